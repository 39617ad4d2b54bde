// Command testsummary reads `go test -json` events on standard input, prints each package's
// result line and the output of failed tests (a passing test's output is dropped, so CI logs stay
// short), and ends with one line counting the tests:
//
//	go: N passed, N failed, N skipped
//
// It exits non-zero when any test or package failed, so a shell pipeline can rely on its status.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is the subset of test2json's TestEvent that the summary needs.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on pass and fail
}

// timed is one finished top-level test and its duration.
type timed struct {
	name    string
	seconds float64
}

// summary counts test outcomes and remembers which packages failed outside any test
// (build errors, panics in init, TestMain failures).
type summary struct {
	passed, failed, skipped int
	failedTests             []string
	failedPackages          map[string]bool
	durations               []timed // top-level tests, passed or failed
}

// slowest is the n longest top-level tests, longest first.
func (s *summary) slowest(n int) []timed {
	d := append([]timed(nil), s.durations...)
	sort.SliceStable(d, func(i, j int) bool { return d[i].seconds > d[j].seconds })
	return d[:min(n, len(d))]
}

func main() {
	label := "go"
	if len(os.Args) > 1 {
		label = os.Args[1]
	}
	s, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if len(s.failedTests) > 0 {
		fmt.Println("failed tests:")
		for _, name := range s.failedTests {
			fmt.Println("  ", name)
		}
	}
	pkgs := make([]string, 0, len(s.failedPackages))
	for p := range s.failedPackages {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Println("failed package:", p)
	}
	if slow := s.slowest(12); len(slow) > 0 {
		fmt.Println("slowest tests:")
		for _, d := range slow {
			fmt.Printf("  %7.1fs %s\n", d.seconds, d.name)
		}
	}
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", label, s.passed, s.failed, s.skipped)
	if s.failed > 0 || len(pkgs) > 0 {
		os.Exit(1)
	}
}

// summarize consumes the event stream. Lines that are not JSON (build errors printed by
// `go test` itself) are echoed and counted as a package failure.
func summarize(r io.Reader, w io.Writer) (*summary, error) {
	s := &summary{failedPackages: map[string]bool{}}
	// Output of tests still running, keyed by package and test, printed only if they fail.
	pending := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(w, string(line))
			continue
		}
		key := e.Package + "." + e.Test
		if (e.Action == "pass" || e.Action == "fail") && e.Test != "" && !strings.Contains(e.Test, "/") {
			s.durations = append(s.durations, timed{key, e.Elapsed})
		}
		switch e.Action {
		case "output":
			if e.Test == "" {
				fmt.Fprint(w, e.Output)
			} else {
				pending[key] = append(pending[key], e.Output)
			}
		case "pass":
			if e.Test != "" {
				s.passed++
				delete(pending, key)
			}
		case "fail":
			if e.Test != "" {
				for _, line := range pending[key] {
					fmt.Fprint(w, line)
				}
				delete(pending, key)
				s.failed++
				s.failedTests = append(s.failedTests, e.Package+"."+e.Test)
			} else {
				s.failedPackages[e.Package] = true
			}
		case "skip":
			if e.Test != "" {
				s.skipped++
				delete(pending, key)
			}
		}
	}
	return s, sc.Err()
}
