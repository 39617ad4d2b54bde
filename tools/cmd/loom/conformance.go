package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"

	"github.com/loomrt/loom/go/session/conformance"
)

func init() {
	register("conformance", "run ONNX node-test directories and report passed/failed/skipped", runConformance)
}

func runConformance(args []string) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object per test, then the summary")
	filter := fs.String("filter", "", "run only tests whose directory name matches this regular expression")
	verbose := fs.Bool("v", false, "print every test, not only failures")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loom conformance DIR... [--json] [--filter RE] [-v]")
		fs.PrintDefaults()
	}
	dirs, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(dirs) == 0 {
		fs.Usage()
		return 2
	}
	var opts conformance.Options
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loom conformance: --filter: %v\n", err)
			return 2
		}
		opts.Filter = re
	}
	tests, err := conformance.Discover(dirs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loom conformance: %v\n", err)
		return 2
	}
	enc := json.NewEncoder(os.Stdout)
	results := conformance.Run(tests, opts, func(r conformance.Result) {
		switch {
		case *asJSON:
			enc.Encode(r)
		case r.Status != conformance.Pass || *verbose:
			fmt.Printf("%s %s %s\n", r.Status, r.Name, r.Message)
		}
	})
	sum := conformance.Tally(results)
	fmt.Println(sum)
	if sum.Failed > 0 {
		return 1
	}
	return 0
}

// parseInterleaved parses flags that may come before, between or after the positional
// arguments, returning the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
