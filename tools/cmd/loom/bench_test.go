package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/add.onnx")

// pbField encodes one length-delimited protobuf field; pbVarint one varint field.
func pbField(num int, payload []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(num<<3|2))
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

func pbVarint(num int, v uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(num<<3)), v)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// addModelBytes is the ONNX model c = a + b for float vectors of a symbolic length N (opset
// 13), written by hand so that the test needs no model files or protobuf library.
func addModelBytes() []byte {
	vector := func(name string) []byte {
		dim := pbField(1, pbField(2, []byte("N"))) // TensorShapeProto.dim { dim_param: "N" }
		tensorType := cat(pbVarint(1, 1), pbField(2, dim))
		return cat(pbField(1, []byte(name)), pbField(2, pbField(1, tensorType)))
	}
	node := cat(pbField(1, []byte("a")), pbField(1, []byte("b")), pbField(2, []byte("c")),
		pbField(3, []byte("add")), pbField(4, []byte("Add")))
	g := cat(pbField(1, node), pbField(2, []byte("add")),
		pbField(11, vector("a")), pbField(11, vector("b")), pbField(12, vector("c")))
	return cat(pbVarint(1, 8), pbField(2, []byte("loom-test")), pbField(7, g),
		pbField(8, cat(pbField(1, nil), pbVarint(2, 13))))
}

// TestAddModelFixture keeps testdata/add.onnx (used by docs/cli.md and the ONNX Runtime
// comparison) equal to addModelBytes; `go test -run AddModelFixture -update` rewrites it.
func TestAddModelFixture(t *testing.T) {
	path := filepath.Join("testdata", "add.onnx")
	if *update {
		require.NoError(t, os.WriteFile(path, addModelBytes(), 0o644))
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, addModelBytes(), b)
}

func runBenchArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	rc := benchMain(args, &out, &errOut, false)
	return rc, out.String(), errOut.String()
}

func TestBenchJSONHasTheOrtbenchFields(t *testing.T) {
	model := filepath.Join("testdata", "add.onnx")
	rc, out, errOut := runBenchArgs(t, model, "a=shape:64", "b=shape:64", "--runs", "7", "--warmup", "1",
		"--threads", "1", "--ep", "host", "--json")
	require.Equal(t, 0, rc, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, "--json prints exactly one line")
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &r))
	// The fields of shared/bench/ortbench.c and ort.js.
	for _, k := range []string{"runtime", "model", "threads", "runs", "load_ms", "median_ms", "p95_ms", "min_ms", "peak_rss_mb"} {
		assert.Contains(t, r, k)
	}
	assert.Equal(t, "add.onnx", r["model"])
	assert.Equal(t, 7.0, r["runs"])
	assert.Equal(t, 1.0, r["threads"])
	assert.Equal(t, "host", r["provider"])
	minMs, median, p95 := r["min_ms"].(float64), r["median_ms"].(float64), r["p95_ms"].(float64)
	assert.Greater(t, median, 0.0)
	assert.LessOrEqual(t, minMs, median)
	assert.LessOrEqual(t, median, p95)
	assert.GreaterOrEqual(t, r["load_ms"].(float64), 0.0)
	assert.Greater(t, r["peak_rss_mb"].(float64), 1.0)
	assert.Equal(t, 0.0, r["weights_mb"], "add.onnx has no initializers")
	assert.Empty(t, errOut, "no progress bar or notes when not on a terminal")

	// weights_mb is the initializers' size: mlp.onnx holds 64x128 + 128 + 128x10 + 10 floats.
	rc, out, errOut = runBenchArgs(t, filepath.Join("testdata", "mlp.onnx"), "--runs", "2", "--warmup", "0", "--ep", "host", "--json")
	require.Equal(t, 0, rc, errOut)
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &r))
	assert.Equal(t, round(4*(64*128+128+128*10+10)/float64(1<<20), 3), r["weights_mb"])
}

func TestBenchTextOutputAndMissingInputs(t *testing.T) {
	// No inputs given: both get random values, N counting as 1.
	rc, out, errOut := runBenchArgs(t, filepath.Join("testdata", "add.onnx"), "--runs", "3", "--ep", "host")
	require.Equal(t, 0, rc, errOut)
	assert.Regexp(t, `^add\.onnx on host: median [0-9.]+ ms, p95 [0-9.]+ ms, min [0-9.]+ ms over 3 runs, 1 thread\(s\); load [0-9.]+ ms; peak RSS [0-9.]+ MB\n$`, out)
	// One given: the other takes its N.
	rc, _, errOut = runBenchArgs(t, filepath.Join("testdata", "add.onnx"), "b=shape:16", "--runs", "1", "--ep", "host")
	require.Equal(t, 0, rc, errOut)
}

func TestBenchRejectsBadArguments(t *testing.T) {
	model := filepath.Join("testdata", "add.onnx")
	for _, tc := range []struct {
		args   []string
		rc     int
		stderr string
	}{
		{nil, 2, "usage: loom bench"},
		{[]string{"no-such-model.onnx"}, 2, "no-such-model.onnx: no such file"},
		{[]string{model, "a"}, 2, `input "a": want name=FILE.npy, name=shape:DIMS, name=zeros:DIMS, name=ones:DIMS or name=value:V`},
		{[]string{model, "z=shape:4"}, 2, `the model has no input "z" (it has "a", "b")`},
		{[]string{model, "a=shape:4x"}, 2, `input "a": bad dimension "" in "shape:4x"`},
		{[]string{model, "a=shape:-1"}, 2, `bad dimension "-1"`},
		{[]string{model, "a=value:two"}, 2, `input "a": bad value in "value:two"`},
		{[]string{model, "a=missing.npy"}, 2, "missing.npy"},
		{[]string{model, "a=" + filepath.Join("testdata", "add.onnx")}, 2, "is not a .npy file"},
		{[]string{model, "a=shape:4", "a=shape:4"}, 2, `input "a" is given twice`},
		{[]string{model, "a=shape:4", "b=shape:5"}, 2, `input "b" is tensor(float)[5] but the model wants tensor(float)[N]: dimension 0 (N) is 5, but input "a" makes it 4`},
		{[]string{model, "a=shape:4x4"}, 2, `input "a" is tensor(float)[4,4] but the model wants tensor(float)[N]: rank 2, not 1`},
		{[]string{model, "--runs", "0"}, 2, "--runs 0: want at least 1"},
		{[]string{model, "--warmup", "-1"}, 2, "--warmup -1"},
		{[]string{model, "--threads", "-2"}, 2, "--threads -2"},
		{[]string{model, "--runs", "many"}, 2, "invalid value"},
		{[]string{model, "--ep", "tpu"}, 2, "tpu"},
	} {
		rc, out, errOut := runBenchArgs(t, tc.args...)
		assert.Equal(t, tc.rc, rc, "%q: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.stderr, "%q", tc.args)
		assert.Empty(t, out, "%q", tc.args)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	assert.Equal(t, 5.0, percentile(sorted, 50))
	assert.Equal(t, 10.0, percentile(sorted, 95))
	assert.Equal(t, 1.0, percentile(sorted, 0))
	assert.Equal(t, 7.0, percentile([]float64{7}, 95))
}

// weightBytes counts the initializers a run reads in full: an embedding table that only Gather
// reads rows of is left out, the same table read by a MatMul too (tied weights) is not.
func TestWeightBytesLeavesOutGatheredTables(t *testing.T) {
	g := &graph.Graph{Name: "emb", Initializers: map[string]*graph.Tensor{
		"table": {Name: "table", DType: graph.Float, Dims: []int64{10, 4}, Raw: make([]byte, 160)},
		"w":     {Name: "w", DType: graph.Float, Dims: []int64{4, 3}, Raw: make([]byte, 48)},
	}}
	g.Nodes = []*graph.Node{
		graph.NewNode("gather", "Gather", []string{"table", "ids"}, []string{"e"}),
		graph.NewNode("mm", "MatMul", []string{"e", "w"}, []string{"y"}),
	}
	m := &graph.Model{Graph: g}
	assert.Equal(t, int64(48), weightBytes(m))
	g.Nodes = append(g.Nodes, graph.NewNode("tied", "MatMul", []string{"e", "table"}, []string{"z"}))
	assert.Equal(t, int64(208), weightBytes(m))
	assert.Equal(t, int64(0), weightBytes(nil))
}
