package session_test

// Real-model checks: published models run through InferenceSession and compared with ground
// truth (MNIST's own test sets), with ONNX Runtime 1.30's outputs on fixed inputs
// (testdata/realmodels, made by tools/models/make_refs.sh) and with a torch-made greedy decode
// (testdata/models/gpt_ref.json). The published models are not in the repository: they are
// fetched, pinned by version and sha256, by tools/models/fetch.sh into $LOOM_MODELS_DIR or
// ~/.cache/loom-models; a test whose model is absent skips, naming that command.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/go/session/conformance"
)

// The tolerance of every real-model comparison: |got-want| <= realATol + realRTol*|want|.
const (
	realRTol = 1e-3
	realATol = 1e-4
)

// realSetup is how a reference check runs a model: at an optimization level, on the default
// provider, through the cuda provider's placements and copies on the stand-in host device
// whose memory behaves as a GPU's (session.OptionCUDAStandIn), or on a real GPU.
type realSetup struct {
	Level   opt.Level
	StandIn bool
	CUDA    bool // the cuda provider on a CUDA device (only where one exists)
}

func (r realSetup) String() string {
	switch {
	case r.StandIn:
		return r.Level.String() + "/cuda-stand-in"
	case r.CUDA:
		return r.Level.String() + "/cuda"
	}
	return r.Level.String()
}

// realSetups are the setups the reference checks run: the graph as written, the fully
// optimized one with Loom's fused operators, that one through the cuda stand-in and, where a
// CUDA device exists (the device check, the GPU test targets), on the GPU.
var realSetups = func() []realSetup {
	setups := []realSetup{{Level: opt.LevelDisabled}, {Level: opt.LevelAll}, {Level: opt.LevelAll, StandIn: true}}
	if cudaDevices() > 0 {
		setups = append(setups, realSetup{Level: opt.LevelAll, CUDA: true})
	}
	return setups
}()

// cudaDevices is how many CUDA devices this machine has (0 without a driver).
func cudaDevices() int {
	n, err := native.Devices(native.BackendCUDA)
	if err != nil {
		return 0
	}
	return n
}

// forLevels runs check as one subtest per setup in realSetups.
func forLevels(t *testing.T, check func(t *testing.T, setup realSetup)) {
	for _, setup := range realSetups {
		t.Run(setup.String(), func(t *testing.T) { check(t, setup) })
	}
}

// fetchedModel returns the path of a model that tools/models/fetch.sh puts in the models
// directory, or skips the test when it is absent.
func fetchedModel(t *testing.T, rel string) string {
	t.Helper()
	dir := os.Getenv("LOOM_MODELS_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skipf("no LOOM_MODELS_DIR and no home directory (%v); run tools/models/fetch.sh", err)
		}
		dir = filepath.Join(home, ".cache", "loom-models")
	}
	path := filepath.Join(dir, rel)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("real model %s is absent (%v): run tools/models/fetch.sh (LOOM_MODELS_DIR=%s) to fetch it", rel, err, dir)
	}
	return path
}

// loadReal makes a session for path in the given setup, closed when the test ends.
func loadReal(t *testing.T, path string, setup realSetup) *session.InferenceSession {
	t.Helper()
	opts := []session.LoadOption{session.WithOptimizationLevel(setup.Level)}
	if setup.StandIn {
		opts = append(opts, session.WithExecutionProvider(session.ProviderCUDA), session.WithOption(session.OptionCUDAStandIn, "1"))
	}
	if setup.CUDA {
		opts = append(opts, session.WithExecutionProvider(session.ProviderCUDA))
	}
	s, err := session.Load(path, opts...)
	require.NoError(t, err, "loading %s", path)
	if setup.CUDA {
		// The cuda provider falls back to the host when it cannot open the device, which
		// would compare the host with itself.
		require.Equal(t, session.ProviderCUDA, s.Provider(), "%v", s.ExecutionProviderFallbackReport())
		ops := map[string]int{}
		for _, f := range s.ExecutionProviderFallbackReport() {
			ops[f.Op]++
		}
		t.Logf("%s on cuda: %d node(s) on the host %v", filepath.Base(path), len(s.ExecutionProviderFallbackReport()), ops)
	}
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// run runs s and returns its outputs by name.
func run(t *testing.T, s *session.InferenceSession, feeds ...session.NamedTensor) map[string]session.Tensor {
	t.Helper()
	outs, err := s.Run(context.Background(), feeds)
	require.NoError(t, err)
	byName := make(map[string]session.Tensor, len(outs))
	for i, meta := range s.Outputs() {
		byName[meta.Name] = outs[i]
	}
	return byName
}

// requireClose checks got against want elementwise within the real-model tolerance and logs
// the largest absolute error, so that `go test -v` reports how close each model comes.
func requireClose(t *testing.T, what string, got, want session.Tensor) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), "%s: shape", what)
	g, err := session.TensorOf[float32](got)
	require.NoError(t, err, what)
	w, err := session.TensorOf[float32](want)
	require.NoError(t, err, what)
	maxAbs, maxRatio, bad, first := 0.0, 0.0, 0, -1
	for i := range w {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		maxAbs = math.Max(maxAbs, d)
		// How much of its allowance the worst element uses: above 1 fails.
		ratio := d / (realATol + realRTol*math.Abs(float64(w[i])))
		maxRatio = math.Max(maxRatio, ratio)
		if ratio > 1 {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	t.Logf("%s: %d elements, max |error| %.3g, %.2f of the tolerance", what, len(w), maxAbs, maxRatio)
	if bad > 0 {
		require.Failf(t, "outputs differ", "%s: %d of %d elements outside rtol %g / atol %g; element %d is %v, want %v (max |error| %.3g)",
			what, bad, len(w), realRTol, realATol, first, g[first], w[first], maxAbs)
	}
}

// TestRealModelMNIST runs the MNIST CNN (CNTK export, opset 7) on the three test sets that
// ship with it.
func TestRealModelMNIST(t *testing.T) {
	model := fetchedModel(t, "mnist/model.onnx")
	forLevels(t, func(t *testing.T, setup realSetup) { checkMNIST(t, model, setup) })
}

func checkMNIST(t *testing.T, model string, setup realSetup) {
	s := loadReal(t, model, setup)
	for i := range 3 {
		dir := filepath.Join(filepath.Dir(model), fmt.Sprintf("test_data_set_%d", i))
		in := decodePB(t, filepath.Join(dir, "input_0.pb"))
		want := decodePB(t, filepath.Join(dir, "output_0.pb"))
		outs, err := s.Run(context.Background(), []session.NamedTensor{{Name: s.Inputs()[0].Name, Tensor: in}})
		require.NoError(t, err)
		requireClose(t, fmt.Sprintf("test_data_set_%d", i), outs[0], want)
	}
}

func decodePB(t *testing.T, path string) session.Tensor {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	x, _, err := conformance.DecodeTensor(b)
	require.NoError(t, err, path)
	return x
}

// TestRealModelTinyGPTKVGreedy decodes greedily with the KV cache from the prompt the torch
// reference used, feeding each step's present_* back as past_*, and must pick the same tokens.
func TestRealModelTinyGPTKVGreedy(t *testing.T) {
	raw, err := os.ReadFile("testdata/models/gpt_ref.json")
	require.NoError(t, err)
	var ref struct {
		Prompt []int64   `json:"prompt"`
		Seq    []int64   `json:"seq"`
		Steps  []gptStep `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(raw, &ref))
	require.NotEmpty(t, ref.Steps)
	forLevels(t, func(t *testing.T, setup realSetup) {
		got := greedyDecode(t, loadReal(t, "testdata/models/tiny_gpt_kv.onnx", setup), ref.Prompt, ref.Steps)
		require.Equal(t, ref.Seq[len(ref.Prompt):], got)
	})
}

// greedyDecode runs len(steps) greedy steps from prompt with the KV cache and returns the
// chosen tokens, checking each step's sum of last-position logits against the reference.
func greedyDecode(t *testing.T, s *session.InferenceSession, prompt []int64, steps []gptStep) []int64 {
	const heads, headDim = 4, 16
	past := map[string]session.Tensor{}
	for _, name := range []string{"k0", "v0", "k1", "v1"} {
		past[name] = session.MustTensor([]int64{1, heads, 0, headDim}, []float32{})
	}
	ids := prompt
	var got []int64
	maxSumErr := 0.0
	for step, want := range steps {
		feeds := []session.NamedTensor{{Name: "input_ids", Tensor: session.MustTensor([]int64{1, int64(len(ids))}, ids)}}
		for name, p := range past {
			feeds = append(feeds, session.NamedTensor{Name: "past_" + name, Tensor: p})
		}
		outs := run(t, s, feeds...)
		logits, err := session.TensorOf[float32](outs["logits"])
		require.NoError(t, err)
		require.Equal(t, []int64{1, int64(len(ids)), 512}, outs["logits"].Shape())
		last := logits[len(logits)-512:]
		next, sum := 0, 0.0
		for i, v := range last {
			sum += float64(v)
			if v > last[next] {
				next = i
			}
		}
		// The sum of 512 logits, each within the usual tolerance of torch's.
		require.InDelta(t, want.LastLogitsSum, sum, 512*realATol+realRTol*math.Abs(want.LastLogitsSum), "step %d: sum of the last logits", step)
		maxSumErr = math.Max(maxSumErr, math.Abs(sum-want.LastLogitsSum))
		got = append(got, int64(next))
		for name := range past {
			p := outs["present_"+name]
			require.Equal(t, []int64{1, heads, int64(len(prompt) + step), headDim}, p.Shape(), "step %d: present_%s", step, name)
			past[name] = p
		}
		ids = []int64{int64(next)}
	}
	t.Logf("tokens %v; max |error| of the last-logits sums %.3g", got, maxSumErr)
	return got
}

// gptStep is one greedy step of gpt_ref.json: the sum of the last position's logits and the
// token chosen.
type gptStep struct {
	LastLogitsSum float64 `json:"last_logits_sum"`
	Next          int64   `json:"next"`
}

// TestRealModelTinyEncoder compares the torch-exported TransformerEncoder with ONNX Runtime on
// a fixed input, then the unoptimized graph with the fully optimized one (fused attention,
// LayerNorm, MatMul+Add) on fresh random inputs of random shape.
func TestRealModelTinyEncoder(t *testing.T) {
	const model = "testdata/models/tiny_encoder.onnx"
	all := loadReal(t, model, realSetup{Level: opt.LevelAll})
	standIn := loadReal(t, model, realSetup{Level: opt.LevelAll, StandIn: true})
	var gpu *session.InferenceSession // on a real GPU, where there is one
	if cudaDevices() > 0 {
		gpu = loadReal(t, model, realSetup{Level: opt.LevelAll, CUDA: true})
	}
	x := readNpy(t, "testdata/realmodels/tiny_encoder/x.npy")
	want := readNpy(t, "testdata/realmodels/tiny_encoder/ref/y.npy")
	requireClose(t, "vs ONNX Runtime", run(t, all, session.NamedTensor{Name: "x", Tensor: x})["y"], want)
	requireClose(t, "cuda stand-in vs ONNX Runtime", run(t, standIn, session.NamedTensor{Name: "x", Tensor: x})["y"], want)
	if gpu != nil {
		requireClose(t, "cuda vs ONNX Runtime", run(t, gpu, session.NamedTensor{Name: "x", Tensor: x})["y"], want)
	}

	disabled := loadReal(t, model, realSetup{Level: opt.LevelDisabled})
	seed := rand.Uint64()
	t.Logf("random inputs from seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	for range 3 {
		b, n := 1+r.IntN(3), 1+r.IntN(12)
		data := make([]float32, b*n*64)
		for i := range data {
			data[i] = float32(r.Float64()*4 - 2)
		}
		feed := session.NamedTensor{Name: "x", Tensor: session.MustTensor([]int64{int64(b), int64(n), 64}, data)}
		requireClose(t, fmt.Sprintf("level all vs disabled, x[%d,%d,64]", b, n),
			run(t, all, feed)["y"], run(t, disabled, feed)["y"])
		requireClose(t, fmt.Sprintf("cuda stand-in vs host, x[%d,%d,64]", b, n),
			run(t, standIn, feed)["y"], run(t, all, feed)["y"])
		if gpu != nil {
			requireClose(t, fmt.Sprintf("cuda vs host, x[%d,%d,64]", b, n),
				run(t, gpu, feed)["y"], run(t, all, feed)["y"])
		}
	}
}

// TestRealModelSileroVAD streams three 512-sample chunks through Silero VAD v5 at 16 kHz, each
// starting from the state the previous chunk returned, as a caller does, and compares every
// chunk's probability and state with ONNX Runtime's chain.
func TestRealModelSileroVAD(t *testing.T) {
	model := fetchedModel(t, "silero_vad_v5.onnx")
	forLevels(t, func(t *testing.T, setup realSetup) { checkSileroVAD(t, model, setup) })
}

func checkSileroVAD(t *testing.T, model string, setup realSetup) {
	s := loadReal(t, model, setup)
	dir := "testdata/realmodels/silero_vad_v5"
	state := readNpy(t, filepath.Join(dir, "state_0.npy"))
	sr := session.MustTensor([]int64{}, []int64{16000})
	for i := range 3 {
		outs := run(t, s,
			session.NamedTensor{Name: "input", Tensor: readNpy(t, filepath.Join(dir, fmt.Sprintf("input_%d.npy", i)))},
			session.NamedTensor{Name: "state", Tensor: state},
			session.NamedTensor{Name: "sr", Tensor: sr})
		ref := filepath.Join(dir, fmt.Sprintf("ref_%d", i))
		requireClose(t, fmt.Sprintf("chunk %d output", i), outs["output"], readNpy(t, filepath.Join(ref, "output.npy")))
		requireClose(t, fmt.Sprintf("chunk %d stateN", i), outs["stateN"], readNpy(t, filepath.Join(ref, "stateN.npy")))
		state = outs["stateN"]
	}
}

// TestRealModelPPOCRv4Rec runs PP-OCRv4 text recognition on a 1x3x48x320 input and compares
// the per-step character distributions with ONNX Runtime's, and their argmax (the decoded
// characters) exactly.
func TestRealModelPPOCRv4Rec(t *testing.T) {
	model := fetchedModel(t, "ch_PP-OCRv4_rec_infer.onnx")
	forLevels(t, func(t *testing.T, setup realSetup) { checkPPOCR(t, model, setup) })
}

func checkPPOCR(t *testing.T, model string, setup realSetup) {
	s := loadReal(t, model, setup)
	x := readNpy(t, "testdata/realmodels/ppocr_v4_rec/x.npy")
	want := readNpy(t, "testdata/realmodels/ppocr_v4_rec/ref/softmax_11.tmp_0.npy")
	got := run(t, s, session.NamedTensor{Name: "x", Tensor: x})["softmax_11.tmp_0"]
	requireClose(t, "softmax", got, want)
	g, _ := session.TensorOf[float32](got)
	w, _ := session.TensorOf[float32](want)
	const classes = 6625
	for step := 0; step < len(w)/classes; step++ {
		require.Equal(t, argmax(w[step*classes:(step+1)*classes]), argmax(g[step*classes:(step+1)*classes]), "step %d: argmax", step)
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

var (
	npyDescrPattern = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	npyShapePattern = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// readNpy reads a little-endian, C-ordered float32 or int64 .npy file (format 1.0), as
// tools/cmd/modelrefs and ONNX Runtime's runner write them.
func readNpy(t *testing.T, path string) session.Tensor {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, len(b) >= 10 && string(b[:8]) == "\x93NUMPY\x01\x00", "%s: not a version 1.0 .npy file", path)
	hlen := int(binary.LittleEndian.Uint16(b[8:]))
	require.LessOrEqual(t, 10+hlen, len(b), "%s: truncated header", path)
	header, data := string(b[10:10+hlen]), b[10+hlen:]
	require.Contains(t, header, "'fortran_order': False", path)
	descr, dims := npyDescrPattern.FindStringSubmatch(header), npyShapePattern.FindStringSubmatch(header)
	require.True(t, descr != nil && dims != nil, "%s: unreadable header %q", path, header)
	shape := []int64{}
	n := 1
	for _, f := range strings.Split(dims[1], ",") {
		if f = strings.TrimSpace(f); f != "" {
			d, err := strconv.ParseInt(f, 10, 64)
			require.NoError(t, err, "%s: shape %q", path, dims[1])
			shape = append(shape, d)
			n *= int(d)
		}
	}
	switch descr[1] {
	case "<f4":
		require.Len(t, data, 4*n, "%s: data size", path)
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return session.MustTensor(shape, v)
	case "<i8":
		require.Len(t, data, 8*n, "%s: data size", path)
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
		return session.MustTensor(shape, v)
	case "<i4":
		require.Len(t, data, 4*n, "%s: data size", path)
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return session.MustTensor(shape, v)
	}
	require.Failf(t, "unsupported .npy type", "%s: %s", path, descr[1])
	return session.Tensor{}
}
