// Command loom is Loom's command-line tool. Each subcommand lives in a file of its own and
// registers itself in subcommands.
package main

import (
	"fmt"
	"os"
	"sort"
)

// subcommand is one `loom NAME ...` command: run gets the arguments after the name and
// returns the exit status.
type subcommand struct {
	summary string
	run     func(args []string) int
}

var subcommands = map[string]subcommand{}

func register(name, summary string, run func(args []string) int) {
	subcommands[name] = subcommand{summary: summary, run: run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: loom COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, subcommands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "loom: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(cmd.run(os.Args[2:]))
}
