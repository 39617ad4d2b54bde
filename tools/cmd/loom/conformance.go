package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/loomrt/loom/go/session/conformance"
)

func init() {
	register("conformance", "run ONNX node-test directories and report passed/failed/skipped", runConformance)
}

// conformanceSummary is the last line of `loom conformance --json`: the counts, so that every
// line of stdout is a JSON object (the tests' lines have "name" and "status", this one not).
type conformanceSummary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

func runConformance(args []string, stdout, stderr io.Writer) int {
	c := newCommand("conformance", "conformance DIR... [--filter RE] [--json] [-v]",
		"Runs ONNX node-test directories (model.onnx and test_data_set_*; a DIR may hold them or be one)\n"+
			"through an InferenceSession and reports each failure (each test with -v), then the counts.\n"+
			"Exit status 1 when a test fails; 2 when no test is found or none matches --filter.", stdout, stderr)
	asJSON := c.Bool("json", false, "print one JSON object per test, then one with the counts (stdout holds only JSON)")
	filter := c.String("filter", "", "run only tests whose directory name matches this regular expression")
	verbose := c.Bool("v", false, "print every test, not only failures")
	dirs, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	if len(dirs) == 0 {
		return c.usageError("no DIR given")
	}
	var opts conformance.Options
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			return c.badArgument("--filter: %v", err)
		}
		opts.Filter = re
	}
	tests, err := conformance.Discover(dirs)
	if err != nil {
		return c.badArgument("%v", err)
	}
	if len(tests) == 0 {
		return c.badArgument("no node tests (directories with a model.onnx) in %s", strings.Join(dirs, ", "))
	}
	if opts.Filter != nil {
		if matching(tests, opts.Filter) == 0 {
			return c.badArgument("--filter %q matches none of the %d tests in %s", *filter, len(tests), strings.Join(dirs, ", "))
		}
	}
	enc := json.NewEncoder(stdout)
	bar := newProgress(matching(tests, opts.Filter), "loom conformance", "tests", !*asJSON)
	results := conformance.Run(tests, opts, func(r conformance.Result) {
		switch {
		case *asJSON:
			enc.Encode(r)
		case r.Status != conformance.Pass || *verbose:
			bar.Clear()
			fmt.Fprintln(stdout, strings.TrimSpace(fmt.Sprintf("%s %s %s", r.Status, r.Name, r.Message)))
		}
		bar.Add(1)
	})
	bar.Finish()
	sum := conformance.Tally(results)
	if *asJSON {
		enc.Encode(conformanceSummary{Passed: sum.Passed, Failed: sum.Failed, Skipped: sum.Skipped})
	} else {
		fmt.Fprintln(stdout, sum)
	}
	if sum.Failed > 0 {
		return exitFailure
	}
	return exitOK
}

// matching counts the tests filter lets through (all of them when it is nil).
func matching(tests []string, filter *regexp.Regexp) int {
	if filter == nil {
		return len(tests)
	}
	n := 0
	for _, t := range tests {
		if filter.MatchString(filepath.Base(t)) {
			n++
		}
	}
	return n
}
