package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
)

func init() {
	register("inspect", "describe a model: inputs, outputs, opsets, ops, parameters, passes", inspectModel)
}

// inspectModel implements `loom inspect MODEL [--level L] [--plan]`: it loads and checks the
// model, runs the optimization passes up to the level (recording node counts before and after
// each) and prints the report.
func inspectModel(args []string) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	level := fs.String("level", "all", "optimization level to apply: disabled, basic, extended or all")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loom inspect MODEL [--level disabled|basic|extended|all]")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fs.Usage()
		return 2
	}
	lvl, err := opt.ParseLevel(*level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loom inspect: %v\n", err)
		return 2
	}
	m, err := graph.Load(pos[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "loom inspect: %v\n", err)
		return 1
	}
	defer m.Close()
	if err := m.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "loom inspect: %v\n", err)
		return 1
	}
	if err := opt.Optimize(m, lvl); err != nil {
		fmt.Fprintf(os.Stderr, "loom inspect: %v\n", err)
		return 1
	}
	fmt.Print(graph.Inspect(m).String())
	return 0
}
