// Package conformance runs ONNX node-test directories (model.onnx with
// test_data_set_*/input_N.pb and output_N.pb) through an InferenceSession and compares the
// outputs with the expected ones.
package conformance

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// Status is the outcome of one test directory.
type Status string

// The outcomes.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Result is one test directory's outcome; Message says why it failed or was skipped.
type Result struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
	// Seconds is how long the test took: loading, every data set and closing. Not in the
	// JSON form (`loom conformance --json`), whose lines stay the same from run to run.
	Seconds float64 `json:"-"`
}

// Options tunes a run. The zero value compares at rtol 1e-3, atol 1e-7 and runs every test.
type Options struct {
	Filter     *regexp.Regexp // only test names matching it
	RTol, ATol float64
	// Session are the options of every test's session; nil: the host provider.
	Session []session.LoadOption
	// Parallel is how many tests run at once (each in its own session); 0 or 1: one at a time.
	Parallel int
}

// Summary counts the outcomes.
type Summary struct {
	Passed, Failed, Skipped int
}

// String is the runner's last line: "N passed, N failed, N skipped".
func (s Summary) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", s.Passed, s.Failed, s.Skipped)
}

// Tally counts results.
func Tally(rs []Result) Summary {
	var s Summary
	for _, r := range rs {
		switch r.Status {
		case Pass:
			s.Passed++
		case Fail:
			s.Failed++
		default:
			s.Skipped++
		}
	}
	return s
}

// DefaultNodeTests is where Debian's libonnx-testdata installs the ONNX node tests.
const DefaultNodeTests = "/usr/share/libonnx-testdata/data/node"

// NodeTests is the directory of the ONNX node tests: $LOOM_NODE_TESTS when set (a relative
// path, as Bazel tests get from NODE_TESTS_ENV, is taken from the test's runfiles directory),
// else DefaultNodeTests.
func NodeTests() string {
	dir := os.Getenv("LOOM_NODE_TESTS")
	if dir == "" {
		return DefaultNodeTests
	}
	if !filepath.IsAbs(dir) {
		if root := os.Getenv("TEST_SRCDIR"); root != "" {
			return filepath.Join(root, os.Getenv("TEST_WORKSPACE"), dir)
		}
	}
	return dir
}

// Discover lists the test directories under each of dirs: a directory holding model.onnx is a
// test; otherwise its immediate subdirectories holding one are.
func Discover(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "model.onnx")); err == nil {
			out = append(out, d)
			continue
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(d, e.Name(), "model.onnx")); err == nil {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Run runs every test directory and calls report (if not nil) after each, one call at a time
// (in the order the tests finish when opts.Parallel runs several at once). The results are in
// the order of tests, each with its duration.
func Run(tests []string, opts Options, report func(Result)) []Result {
	if opts.RTol == 0 && opts.ATol == 0 {
		opts.RTol, opts.ATol = 1e-3, 1e-7
	}
	var picked []string
	for _, dir := range tests {
		if opts.Filter == nil || opts.Filter.MatchString(filepath.Base(dir)) {
			picked = append(picked, dir)
		}
	}
	out := make([]Result, len(picked))
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	worker := func() {
		defer wg.Done()
		for {
			mu.Lock()
			i := next
			next++
			mu.Unlock()
			if i >= len(picked) {
				return
			}
			start := time.Now()
			r := runOne(picked[i], opts)
			r.Name = filepath.Base(picked[i])
			r.Seconds = time.Since(start).Seconds()
			out[i] = r
			if report != nil {
				mu.Lock()
				report(r)
				mu.Unlock()
			}
		}
	}
	workers := min(max(opts.Parallel, 1), max(len(picked), 1))
	wg.Add(workers)
	for range workers {
		go worker()
	}
	wg.Wait()
	return out
}

// Slowest is the n longest-running of rs, longest first, as "name 1.23s" items.
func Slowest(rs []Result, n int) []string {
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b Result) int { return cmp.Compare(b.Seconds, a.Seconds) })
	var out []string
	for _, r := range sorted[:min(n, len(sorted))] {
		out = append(out, fmt.Sprintf("%s %.2fs", r.Name, r.Seconds))
	}
	return out
}

func runOne(dir string, opts Options) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{Status: Fail, Message: fmt.Sprintf("panic: %v", p)}
		}
	}()
	m, err := graph.Load(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return Result{Status: Fail, Message: err.Error()}
	}
	values, unsupported := hasValueIO(m.Graph)
	if unsupported != "" {
		m.Close()
		return Result{Status: Skip, Message: unsupported}
	}
	sessionOpts := opts.Session
	if sessionOpts == nil {
		sessionOpts = []session.LoadOption{session.WithExecutionProvider(session.ProviderHost)}
	}
	s, err := session.FromGraph(m, sessionOpts...)
	if err != nil {
		m.Close()
		return Result{Status: Fail, Message: err.Error()}
	}
	defer func() { s.Close(); m.Close() }()
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return Result{Status: Skip, Message: "no test_data_set_*"}
	}
	graphInputs := m.Graph.Inputs
	var note, fail string // set by judgeByDistribution
	for _, set := range sets {
		if values { // sequences or optionals: through RunValues (values.go)
			if msg := runValueSet(s, m.Graph, set, opts); msg != "" {
				return Result{Status: Fail, Message: msg}
			}
			continue
		}
		var feeds []session.NamedTensor
		for i := 0; ; i++ {
			b, err := os.ReadFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				break
			}
			t, name, err := DecodeTensor(b)
			if err != nil {
				return Result{Status: Fail, Message: fmt.Sprintf("%s input_%d.pb: %v", filepath.Base(set), i, err)}
			}
			if name == "" && i < len(graphInputs) {
				name = graphInputs[i].Name
			}
			t = bfloat16Quirk(t, declaredType(graphInputs, name))
			feeds = append(feeds, session.NamedTensor{Name: name, Tensor: t})
		}
		got, err := s.Run(context.Background(), feeds)
		if err != nil {
			return Result{Status: Fail, Message: err.Error()}
		}
		if hasRandomOps(m.Graph) { // random outputs are judged by distribution (distribution.go)
			if note, fail = judgeByDistribution(s, m.Graph, set, feeds, got, opts); fail != "" {
				return Result{Status: Fail, Message: fail}
			}
			continue
		}
		// A signature's first run is interpreted (and traced), or, when its plan can be
		// built from shapes alone, runs that plan; the second runs the session's compiled plan
		// for it. Where no run was interpreted, a third runs through a session that interprets
		// (the interpreter is what runs whatever plans decline). All must match.
		runs := 2
		if plannedFromShapes(s) {
			runs = 3
		}
		for run := 1; run <= runs; run++ {
			switch run {
			case 2:
				if got, err = s.Run(context.Background(), feeds); err != nil {
					return Result{Status: Fail, Message: "second run (compiled plan): " + err.Error()}
				}
			case 3:
				if got, err = interpretSet(dir, sessionOpts, feeds); err != nil {
					return Result{Status: Fail, Message: "third run (interpreter): " + err.Error()}
				}
			}
			for i := range got {
				b, err := os.ReadFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
				if err != nil {
					return Result{Status: Fail, Message: fmt.Sprintf("output_%d.pb: %v", i, err)}
				}
				want, _, err := DecodeTensor(b)
				if err != nil {
					return Result{Status: Fail, Message: fmt.Sprintf("output_%d.pb: %v", i, err)}
				}
				if got[i].DType() == graph.BFloat16 && want.DType() == graph.Uint16 {
					want = bfloat16Quirk(want, graph.BFloat16)
				}
				if msg := Compare(got[i], want, opts.RTol, opts.ATol); msg != "" {
					return Result{Status: Fail, Message: fmt.Sprintf("output %d (%s), run %d: %s", i, s.Outputs()[i].Name, run, msg)}
				}
			}
		}
	}
	return Result{Status: Pass, Message: note}
}

// plannedFromShapes says whether a plan of s was built from shapes before its first run
// (session.OptionShapePlans), so that no run of s was interpreted.
func plannedFromShapes(s *session.InferenceSession) bool {
	for _, p := range s.ExecutionPlans() {
		if p.FromShapes {
			return true
		}
	}
	return false
}

// interpretSet runs feeds once through a session of the test's model that interprets every
// run (session.OptionRunPlan "0").
func interpretSet(dir string, opts []session.LoadOption, feeds []session.NamedTensor) ([]session.Tensor, error) {
	m, err := graph.Load(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return nil, err
	}
	defer m.Close()
	s, err := session.FromGraph(m, append(slices.Clone(opts), session.WithOption(session.OptionRunPlan, "0"))...)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Run(context.Background(), feeds)
}

// DecodeTensor decodes a serialized TensorProto and returns it with its name. It reuses the
// model decoder: the bytes become the one initializer of a minimal ModelProto (a trailing
// name field wins over the tensor's own, as protobuf's last-field rule says).
func DecodeTensor(b []byte) (session.Tensor, string, error) {
	name := tensorName(b)
	tensor := append(append([]byte{}, b...), field(8, []byte("__t"))...)
	g := field(5, tensor)
	model := append([]byte{0x08, 8}, field(8, []byte{0x10, 13})...)
	model = append(model, field(7, g)...)
	m, err := graph.LoadBytes(model)
	if err != nil {
		return session.Tensor{}, "", err
	}
	defer m.Close()
	gt := m.Graph.Initializers["__t"]
	if gt == nil {
		return session.Tensor{}, "", fmt.Errorf("not a TensorProto")
	}
	t, err := session.FromGraphTensor(gt)
	return t, name, err
}

func field(num int, payload []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(num<<3|2))
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

// tensorName scans the top-level fields of a TensorProto for its name (field 8).
func tensorName(b []byte) string {
	name := ""
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return name
		}
		b = b[n:]
		switch key & 7 {
		case 0:
			_, n = binary.Uvarint(b)
			if n <= 0 {
				return name
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return name
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return name
			}
			b = b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return name
			}
			if key>>3 == 8 {
				name = string(b[n : n+int(l)])
			}
			b = b[n+int(l):]
		default:
			return name
		}
	}
	return name
}

// Compare checks got against want: same type and shape, and every element within
// atol + rtol·|want| (NaN matches NaN); "" when they agree, else the first difference.
func Compare(got, want session.Tensor, rtol, atol float64) string {
	if got.DType() != want.DType() {
		return fmt.Sprintf("element type %s, want %s", got.DType(), want.DType())
	}
	gs, ws := got.Shape(), want.Shape()
	if fmt.Sprint(gs) != fmt.Sprint(ws) {
		return fmt.Sprintf("shape %v, want %v", gs, ws)
	}
	if g, ok := got.Data().([]string); ok {
		w := want.Data().([]string)
		for i := range g {
			if g[i] != w[i] {
				return fmt.Sprintf("element %d is %q, want %q", i, g[i], w[i])
			}
		}
		return ""
	}
	gv, wv := values(got), values(want)
	exact := !got.DType().IsFloat()
	bad := 0
	first := ""
	for i := range gv {
		g, w := gv[i], wv[i]
		if math.IsNaN(w) && math.IsNaN(g) || g == w {
			continue
		}
		if !exact && math.Abs(g-w) <= atol+rtol*math.Abs(w) {
			continue
		}
		if bad == 0 {
			first = fmt.Sprintf("element %d is %v, want %v", i, g, w)
		}
		bad++
	}
	if bad > 0 {
		return fmt.Sprintf("%d of %d elements differ; %s", bad, len(gv), first)
	}
	return ""
}

// values widens a numeric or bool tensor's elements to float64 (Tensor.Float64s).
func values(t session.Tensor) []float64 { return t.Float64s() }

// bfloat16Quirk reinterprets a uint16 tensor as bfloat16 where bfloat16 is wanted: the ONNX
// 1.12 test generator stored bfloat16 data as uint16 TensorProtos.
func bfloat16Quirk(t session.Tensor, want graph.DataType) session.Tensor {
	if want != graph.BFloat16 || t.DType() != graph.Uint16 {
		return t
	}
	v := t.Data().([]uint16)
	bf := make([]session.BFloat16, len(v))
	for i, x := range v {
		bf[i] = session.BFloat16(x)
	}
	return session.MustTensor(t.Shape(), bf)
}

func declaredType(vs []*graph.Value, name string) graph.DataType {
	for _, v := range vs {
		if v.Name == name {
			return v.Declared.Elem
		}
	}
	return graph.Undefined
}
