// Command loom is Loom's command-line tool. Each subcommand lives in a file of its own and
// registers itself in subcommands.
//
// Conventions (docs/cli.md): `loom help`, `loom -h`, `loom --help`, `loom help CMD` and
// `loom CMD -h` print usage on stdout and exit 0. Exit status: 0 success; 1 a failure while
// working (a model that does not load, a run that fails, results that do not match); 2 bad
// arguments (an unknown command or flag, a malformed value, a path that names no file, an
// input the model does not have or one it needs that is not given).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// subcommand is one `loom NAME ...` command: run gets the arguments after the name and the
// streams to write to, and returns the exit status.
type subcommand struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var subcommands = map[string]subcommand{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	subcommands[name] = subcommand{summary: summary, run: run}
}

// Exit statuses (docs/cli.md).
const (
	exitOK      = 0
	exitFailure = 1 // a failure while working: load, run, mismatching results
	exitUsage   = 2 // bad arguments
)

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: loom COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(subcommands)+1)
	for n := range subcommands {
		names = append(names, n)
	}
	names = append(names, "help")
	sort.Strings(names)
	for _, n := range names {
		summary := "print a command's usage: loom help COMMAND"
		if c, ok := subcommands[n]; ok {
			summary = c.summary
		}
		fmt.Fprintf(w, "  %-12s %s\n", n, summary)
	}
	fmt.Fprintln(w, "\n`loom COMMAND -h` prints a command's usage. Exit status: 0 success, 1 a failure while\nworking (model load, run, mismatching results), 2 bad arguments. docs/cli.md has examples.")
}

// loomMain dispatches `loom ARGS...` and returns the exit status.
func loomMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 || (len(args) == 2 && args[1] == "help") {
			usage(stdout)
			return exitOK
		}
		cmd, ok := subcommands[args[1]]
		if !ok || len(args) > 2 {
			fmt.Fprintf(stderr, "loom help: unknown command %q\n", strings.Join(args[1:], " "))
			usage(stderr)
			return exitUsage
		}
		return cmd.run([]string{"--help"}, stdout, stderr)
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "loom: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return cmd.run(args[1:], stdout, stderr)
}

func main() {
	os.Exit(loomMain(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand's flags and usage. Its parse handles the conventions every
// subcommand shares: -h/--help prints the usage on stdout (exit 0); a bad flag prints the
// error and the usage on stderr (exit 2).
type command struct {
	*flag.FlagSet
	name     string
	synopsis string // what follows "usage: loom "
	about    string // paragraphs after the synopsis; may be empty
	stdout   io.Writer
	stderr   io.Writer
}

func newCommand(name, synopsis, about string, stdout, stderr io.Writer) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // parse prints the usage, on the stream the case calls for
	return &command{FlagSet: fs, name: name, synopsis: synopsis, about: about, stdout: stdout, stderr: stderr}
}

// printUsage writes the usage: the synopsis, the description and the flags.
func (c *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: loom %s\n", c.synopsis)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.about, "\n"))
	}
	hasFlags := false
	c.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(w, "\nflags:")
		c.SetOutput(w)
		c.PrintDefaults()
		c.SetOutput(c.stderr)
	}
}

// parse parses args, whose flags may come before, between or after the positional arguments.
// It returns the positionals and -1, or the exit status when the command is to stop: 0 after
// -h/--help, 2 after a bad flag.
func (c *command) parse(args []string) ([]string, int) {
	pos, err := parseInterleaved(c.FlagSet, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printUsage(c.stdout)
		return nil, exitOK
	case err != nil: // the flag package has printed the error
		c.printUsage(c.stderr)
		return nil, exitUsage
	}
	return pos, -1
}

// usageError reports bad arguments: the message and the usage on stderr, exit status 2.
func (c *command) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "loom %s: %s\n", c.name, fmt.Sprintf(format, args...))
	c.printUsage(c.stderr)
	return exitUsage
}

// badArgument reports a bad argument in one line, without the usage: exit status 2.
func (c *command) badArgument(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "loom %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return exitUsage
}

// fail reports a failure while working: exit status 1.
func (c *command) fail(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "loom %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return exitFailure
}

// checkFile reports a path argument that names no readable file (a bad argument, exit 2),
// with the current directory, since docs and scripts give paths relative to one.
func checkFile(what, path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		wd, _ := os.Getwd()
		return fmt.Errorf("%s %s: no such file (relative paths start at %s)", what, path, wd)
	case err != nil:
		return fmt.Errorf("%s %s: %v", what, path, err)
	case st.IsDir():
		return fmt.Errorf("%s %s is a directory, not a file", what, path)
	}
	return nil
}

// checkProvider accepts the execution providers --ep may name.
func checkProvider(p string) error {
	switch p {
	case "host", "cuda", "auto":
		return nil
	}
	return fmt.Errorf("--ep %s: unknown execution provider (want host, cuda or auto)", p)
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
