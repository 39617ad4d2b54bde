package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/tools/internal/npy"
)

// loomCmd runs `loom ARGS...` in the process and returns the exit status, stdout and stderr.
func loomCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	rc := loomMain(args, &out, &errOut)
	return rc, out.String(), errOut.String()
}

// Help is conventional: on stdout, exit 0, for the command and for each subcommand, however
// it is asked for.
func TestHelpPrintsUsageOnStdout(t *testing.T) {
	var asks [][]string
	for _, h := range []string{"help", "-h", "--help", "-help"} {
		asks = append(asks, []string{h})
	}
	for name := range subcommands {
		asks = append(asks, []string{name, "-h"}, []string{name, "--help"}, []string{"help", name})
	}
	for _, args := range asks {
		rc, out, errOut := loomCmd(t, args...)
		assert.Equal(t, 0, rc, "%q: %s", args, errOut)
		assert.Empty(t, errOut, "%q", args)
		want := "usage: loom COMMAND"
		if name := args[len(args)-1]; args[0] == "help" && len(args) == 2 {
			want = "usage: loom " + name
		} else if len(args) == 2 {
			want = "usage: loom " + args[0]
		}
		assert.True(t, strings.HasPrefix(out, want), "%q printed:\n%s", args, out)
	}
	// The command list names every subcommand, version among them.
	_, out, _ := loomCmd(t, "help")
	for name := range subcommands {
		assert.Contains(t, out, "  "+name+" ")
	}
	assert.Contains(t, out, "version")
	// `loom help run` is run's usage, with the input forms, not the command list.
	_, out, _ = loomCmd(t, "help", "run")
	assert.Contains(t, out, "zeros:2x3x4")
	assert.Contains(t, out, "-strict")
	assert.NotContains(t, out, "commands:")
}

func TestUsageErrorsExit2OnStderr(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{nil, "usage: loom COMMAND"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run"}, "usage: loom run"},
		{[]string{"run", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"inspect", "a.onnx", "b.onnx"}, "usage: loom inspect"},
		{[]string{"version", "extra"}, "usage: loom version"},
		{[]string{"conformance"}, "usage: loom conformance"},
	} {
		rc, out, errOut := loomCmd(t, tc.args...)
		assert.Equal(t, 2, rc, "%q", tc.args)
		assert.Empty(t, out, "%q", tc.args)
		assert.Contains(t, errOut, tc.stderr, "%q", tc.args)
	}
}

func TestVersion(t *testing.T) {
	rc, out, errOut := loomCmd(t, "version")
	require.Equal(t, 0, rc, errOut)
	assert.Regexp(t, `^loom (devel|v\S+)`, out)
	assert.Contains(t, out, "go       "+runtime.Version())
	assert.Contains(t, out, "compiler "+loom.CompilerVersion)
	assert.Contains(t, out, "backend  host: 1 device(s)")
	assert.Contains(t, out, "backend  cuda: ")
	// The module lines come from the binary's build information, which `go build` records and
	// Bazel's rules_go does not.
	if bi, ok := debug.ReadBuildInfo(); ok && len(bi.Deps) > 0 {
		assert.Contains(t, out, "module   github.com/loomrt/loom/go/session ")
	}
}

// The exit-code rule of docs/cli.md: 0 success, 1 a failure while working, 2 bad arguments
// (among them a path that names no file, an input the model lacks, an input not given).
func TestExitCodesFollowTheRule(t *testing.T) {
	add := filepath.Join("testdata", "add.onnx")
	mnist := filepath.Join("demodata", "mnist.onnx")
	out := t.TempDir()
	notONNX := filepath.Join("demodata", "digit2.npy") // exists, but is no model
	for _, tc := range []struct {
		args   []string
		rc     int
		stderr string
	}{
		{[]string{"run", add, "a=shape:4", "b=shape:4", "-o", out, "--ep", "host"}, 0, ""},
		{[]string{"run", "no-such-model.onnx"}, 2, "model no-such-model.onnx: no such file (relative paths start at "},
		{[]string{"run", "demodata"}, 2, "is a directory"},
		{[]string{"run", notONNX, "-o", out}, 1, "loom run: "},
		{[]string{"run", add, "a=missing.npy", "b=shape:4", "-o", out}, 2, "missing.npy"},
		{[]string{"run", add, "z=shape:4", "-o", out}, 2, `the model has no input "z" (it has "a", "b")`},
		{[]string{"run", add, "a=shape:4", "-o", out}, 2, `input "b" (tensor(float)[N]) not given`},
		{[]string{"run", mnist, "-o", out}, 2, `input "Input3" (tensor(float)[1,1,28,28]) not given`},
		{[]string{"run", add, "a=shape:4", "b=shape:5", "-o", out, "--ep", "host"}, 2, "dimension 0 (N) is 5"},
		{[]string{"run", mnist, "Input3=zeros:1x1x28x27", "-o", out}, 2, "dimension 3 is 27, not 28"},
		{[]string{"run", mnist, "Input3=" + filepath.Join("demodata", "digit2_expected.npy"), "-o", out}, 2, "rank 2, not 4"},
		{[]string{"run", add, "a=shape:10000000", "b=shape:10000000", "-o", out, "--ep", "host", "--memory-budget", "1MB"}, 1, "over budget"},
		{[]string{"run", add, "--ep", "tpu"}, 2, "--ep tpu: unknown execution provider"},
		{[]string{"bench", "no-such-model.onnx"}, 2, "no such file"},
		{[]string{"bench", add, "--ep", "tpu"}, 2, "--ep tpu"},
		{[]string{"inspect", "no-such-model.onnx"}, 2, "no such file"},
		{[]string{"inspect", notONNX}, 1, "loom inspect: "},
		{[]string{"inspect", add, "--level", "max"}, 2, "loom inspect: "},
		{[]string{"compile", "no-such-kernel.loom"}, 2, "kernel source no-such-kernel.loom: no such file"},
		{[]string{"compile", "x.loom", "--target", "sm_x"}, 2, "loom compile: "},
		{[]string{"demo", "--ep", "tpu"}, 2, "--ep tpu"},
		{[]string{"conformance", filepath.Join(t.TempDir(), "none")}, 2, "loom conformance: "},
	} {
		rc, _, errOut := loomCmd(t, tc.args...)
		assert.Equal(t, tc.rc, rc, "%q: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.stderr, "%q", tc.args)
	}
}

// A shape or a number given without its prefix names no file; the error says what was meant.
func TestMalformedInputsGetAHint(t *testing.T) {
	add := filepath.Join("testdata", "add.onnx")
	for _, tc := range []struct{ spec, hint string }{
		{"a=1x3x48x320", "did you mean a=shape:1x3x48x320 (random values) or a=zeros:1x3x48x320?"},
		{"a=4", "did you mean a=value:4?"},
		{"a=2.5", "did you mean a=value:2.5?"},
		{"a=zero:4", "an input is name=FILE.npy, name=shape:DIMS, name=zeros:DIMS, name=ones:DIMS or name=value:V"},
		{"a=nothere.npy", "nothere.npy: no such file or directory"},
	} {
		rc, _, errOut := loomCmd(t, "run", add, tc.spec, "b=shape:4", "-o", t.TempDir())
		assert.Equal(t, 2, rc, tc.spec)
		assert.Contains(t, errOut, tc.hint, tc.spec)
	}
	rc, _, errOut := loomCmd(t, "run", add, "a=zeros:4x", "b=shape:4")
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, `input "a": bad dimension "" in "zeros:4x"`)
}

// zeros:SHAPE and ones:SHAPE fill an input; run prints the output's shape as inspect does.
func TestZerosAndOnesInputs(t *testing.T) {
	dir := t.TempDir()
	rc, out, errOut := loomCmd(t, "run", filepath.Join("testdata", "add.onnx"), "a=zeros:6", "b=ones:6", "-o", dir, "--ep", "host")
	require.Equal(t, 0, rc, errOut)
	assert.Equal(t, "c tensor(float)[6] -> "+filepath.Join(dir, "c.npy")+"\n", out)
	c, err := npy.Read(filepath.Join(dir, "c.npy"))
	require.NoError(t, err)
	vals, err := session.TensorOf[float32](c)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1, 1, 1, 1, 1}, vals)
	assert.Equal(t, []int64{6}, c.Shape())

	// bench takes them too.
	var bout, berr bytes.Buffer
	require.Equal(t, 0, benchMain([]string{filepath.Join("testdata", "add.onnx"), "a=zeros:8", "b=ones:8", "--runs", "2", "--ep", "host"}, &bout, &berr, false), berr.String())
}

func TestRunAndInspectSpellShapesAlike(t *testing.T) {
	mnist := filepath.Join("demodata", "mnist.onnx")
	rc, out, errOut := loomCmd(t, "run", mnist, "Input3="+filepath.Join("demodata", "digit2.npy"), "-o", t.TempDir(), "--ep", "host")
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "Plus214_Output_0 tensor(float)[1,10] -> ")
	rc, out, errOut = loomCmd(t, "inspect", mnist)
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "Plus214_Output_0: tensor(float)[1,10]")
}

func TestFallbacksSumUpInOneLine(t *testing.T) {
	same := []session.FallbackEntry{
		{Node: "conv", Op: "Conv", Provider: "host", Reason: "CUDA unavailable: no driver"},
		{Node: "pool", Op: "MaxPool", Provider: "host", Reason: "CUDA unavailable: no driver"},
	}
	var w bytes.Buffer
	assert.Equal(t, 2, reportFallbacks(&w, "loom run", "cuda", same, false))
	assert.Equal(t, "loom run: 2 node(s) do not run on cuda: they run on host: CUDA unavailable: no driver (-v lists them)\n", w.String())

	w.Reset()
	mixed := append(same, session.FallbackEntry{Node: "nms", Op: "NonMaxSuppression", Provider: "host", Reason: "no CUDA kernel"})
	assert.Equal(t, 3, reportFallbacks(&w, "loom run", "cuda", mixed, true))
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	require.Len(t, lines, 4, w.String())
	assert.Equal(t, "loom run: 3 node(s) do not run on cuda: 2 run on host: CUDA unavailable: no driver; 1 more for 1 other reason(s)", lines[0])
	assert.Equal(t, `loom run: node "nms" (NonMaxSuppression) runs on host: no CUDA kernel`, lines[3])

	w.Reset()
	assert.Equal(t, 0, reportFallbacks(&w, "loom run", "host", nil, true))
	assert.Empty(t, w.String())
}

// --ep cuda on a machine without a GPU: one line, exit 0; --strict makes it exit 1 before
// running. With a GPU every node of the add model runs on CUDA and both exit 0.
func TestRunStrictProvider(t *testing.T) {
	add := filepath.Join("testdata", "add.onnx")
	dir := t.TempDir()
	args := []string{"run", add, "a=shape:4", "b=shape:4", "-o", dir, "--ep", "cuda"}
	rc, _, errOut := loomCmd(t, args...)
	require.Equal(t, 0, rc, errOut)
	rcStrict, outStrict, errStrict := loomCmd(t, append(args, "--strict")...)
	if _, err := native.Devices(native.BackendCUDA); err == nil {
		assert.Equal(t, 0, rcStrict, errStrict)
		return
	}
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one summary line:\n%s", errOut)
	assert.Contains(t, errOut, "loom run: 1 node(s) do not run on cuda: they run on host: ")
	assert.Equal(t, 1, rcStrict, errStrict)
	assert.Contains(t, errStrict, "--strict: 1 node(s) do not run on cuda")
	assert.Empty(t, outStrict, "--strict stops before running")
	_, _, errVerbose := loomCmd(t, append(args, "-v")...)
	assert.Contains(t, errVerbose, `loom run: node "add" (Add) runs on host: `)
}

// nodeTest writes an ONNX node test of the add model into dir/name: inputs a and b, and
// output want.
func nodeTest(t *testing.T, dir, name string, a, b, want []float32) {
	t.Helper()
	tensorPB := func(name string, v []float32) []byte {
		raw := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
		return cat(pbVarint(1, uint64(len(v))), pbVarint(2, 1), pbField(8, []byte(name)), pbField(9, raw))
	}
	set := filepath.Join(dir, name, "test_data_set_0")
	require.NoError(t, os.MkdirAll(set, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name, "model.onnx"), addModelBytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(set, "input_0.pb"), tensorPB("a", a), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(set, "input_1.pb"), tensorPB("b", b), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(set, "output_0.pb"), tensorPB("c", want), 0o644))
}

// conformance --json prints JSON objects only, the counts last; a filter that matches no test
// is a bad argument.
func TestConformanceJSONAndFilter(t *testing.T) {
	dir := t.TempDir()
	nodeTest(t, dir, "test_add_right", []float32{1, 2}, []float32{3, 4}, []float32{4, 6})
	nodeTest(t, dir, "test_add_wrong", []float32{1, 2}, []float32{3, 4}, []float32{4, 7})

	rc, out, errOut := loomCmd(t, "conformance", dir, "--json")
	assert.Equal(t, 1, rc, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	var objs []map[string]any
	for _, l := range lines {
		var o map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &o), "not JSON: %q", l)
		objs = append(objs, o)
	}
	assert.Equal(t, "test_add_right", objs[0]["name"])
	assert.Equal(t, "pass", objs[0]["status"])
	assert.Equal(t, "fail", objs[1]["status"])
	assert.Equal(t, map[string]any{"passed": 1.0, "failed": 1.0, "skipped": 0.0}, objs[2])

	rc, out, errOut = loomCmd(t, "conformance", dir, "--filter", "right$", "-v")
	assert.Equal(t, 0, rc, errOut)
	assert.Equal(t, "pass test_add_right\n1 passed, 0 failed, 0 skipped\n", out)

	rc, out, errOut = loomCmd(t, "conformance", dir, "--filter", "^test_mul")
	assert.Equal(t, 2, rc)
	assert.Empty(t, out)
	assert.Contains(t, errOut, `--filter "^test_mul" matches none of the 2 tests in `+dir)

	rc, _, errOut = loomCmd(t, "conformance", t.TempDir())
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, "no node tests")
}

// The demo's samples are named after the digit they show: digitD.npy's reference scores pick D.
func TestDemoSamplesAreNamedAfterTheirDigit(t *testing.T) {
	files, err := demoData.ReadDir("demodata")
	require.NoError(t, err)
	var digits []int
	name := regexp.MustCompile(`^digit([0-9])\.npy$`)
	for _, f := range files {
		m := name.FindStringSubmatch(f.Name())
		if m == nil {
			continue
		}
		d := int(m[1][0] - '0')
		digits = append(digits, d)
		want, err := embeddedFloats("demodata/digit" + m[1] + "_expected.npy")
		require.NoError(t, err)
		scores, err := session.TensorOf[float32](want)
		require.NoError(t, err)
		assert.Equal(t, d, argmax(scores), "%s: the reference scores pick another digit", f.Name())
	}
	assert.ElementsMatch(t, demoDigits, digits)
}

// TestCLIDocExamples runs docs/cli.md's examples from the repository root, as the page says
// they run, and compares their output with the page's: each "$ loom ..." line in a code block,
// and the lines after it up to the next command (up to a "..." line when the page cuts the
// output short). Examples whose output depends on the machine or the moment (demo, bench,
// version, --ep cuda) are left out, and conformance when the ONNX node tests are not installed.
func TestCLIDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "cli.md"))
	if err != nil {
		t.Skipf("docs/cli.md is not here (a Bazel sandbox?): %v", err)
	}
	type example struct {
		args []string
		want []string
	}
	var examples []*example
	inBlock := false
	var cur *example
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock, cur = !inBlock, nil
		case !inBlock:
		case strings.HasPrefix(line, "$ loom "):
			var args []string
			for _, f := range strings.Fields(strings.TrimPrefix(line, "$ loom ")) {
				args = append(args, strings.Trim(f, "'"))
			}
			cur = &example{args: args}
			examples = append(examples, cur)
		case cur != nil:
			cur.want = append(cur.want, line)
		}
	}
	require.NotEmpty(t, examples)
	t.Chdir(filepath.Join("..", "..", ".."))
	root := regexp.MustCompile(`relative paths start at [^)]*`)
	checked := 0
	for _, ex := range examples {
		cmd := strings.Join(ex.args, " ")
		switch {
		case ex.args[0] == "demo", ex.args[0] == "bench", ex.args[0] == "version", strings.Contains(cmd, "--ep cuda"):
			continue
		case ex.args[0] == "conformance":
			if _, err := os.Stat(ex.args[1]); err != nil {
				t.Logf("skipped (%v): loom %s", err, cmd)
				continue
			}
		}
		tmp := t.TempDir()
		args := make([]string, len(ex.args))
		for i, a := range ex.args {
			args[i] = strings.ReplaceAll(a, "/tmp/out", tmp)
		}
		var out, errOut bytes.Buffer
		loomMain(args, &out, &errOut)
		got := strings.Split(strings.ReplaceAll(errOut.String()+out.String(), tmp, "/tmp/out"), "\n")
		if len(got) > 0 && got[len(got)-1] == "" {
			got = got[:len(got)-1]
		}
		want := ex.want
		for i, w := range want {
			if w == "..." {
				want, got = want[:i], got[:min(i, len(got))]
				break
			}
		}
		norm := func(lines []string) string {
			return root.ReplaceAllString(strings.Join(lines, "\n"), "relative paths start at ROOT")
		}
		assert.Equal(t, norm(want), norm(got), "docs/cli.md: $ loom %s", cmd)
		checked++
	}
	t.Logf("%d of docs/cli.md's %d examples checked", checked, len(examples))
	assert.GreaterOrEqual(t, checked, 8)
}
