package main

import (
	"fmt"
	"io"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
)

func init() {
	register("inspect", "describe a model: inputs, outputs, opsets, ops, parameters, passes", inspectModel)
}

// inspectModel implements `loom inspect MODEL [--level L]`: it loads and checks the model, runs
// the optimization passes up to the level (recording node counts before and after each) and
// prints the report.
func inspectModel(args []string, stdout, stderr io.Writer) int {
	c := newCommand("inspect", "inspect MODEL [--level disabled|basic|extended|all]",
		"Loads and checks the model, applies the optimization passes up to --level and reports the model\nand each pass (* marks the passes that changed the graph).", stdout, stderr)
	level := c.String("level", "all", "optimization level to apply: disabled, basic, extended or all")
	pos, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	if len(pos) != 1 {
		return c.usageError("want one MODEL, got %d arguments", len(pos))
	}
	lvl, err := opt.ParseLevel(*level)
	if err != nil {
		return c.badArgument("%v", err)
	}
	if err := checkFile("model", pos[0]); err != nil {
		return c.badArgument("%v", err)
	}
	m, err := graph.Load(pos[0])
	if err != nil {
		return c.fail("%v", err)
	}
	defer m.Close()
	if err := m.Check(); err != nil {
		return c.fail("%v", err)
	}
	if err := opt.Optimize(m, lvl); err != nil {
		return c.fail("%v", err)
	}
	fmt.Fprint(stdout, graph.Inspect(m).String())
	return exitOK
}
