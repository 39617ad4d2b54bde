package serve

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/loomrt/loom/go/serve/inferencepb"
	"github.com/loomrt/loom/go/session"
)

const (
	mnistPath   = "testdata/mnist.onnx"
	encoderPath = "testdata/tiny_encoder.onnx"
	mnistIn     = "Input3"
	mnistOut    = "Plus214_Output_0"
)

// testServer is a Server serving on loopback listeners, with a gRPC client.
type testServer struct {
	*Server
	url    string
	client pb.GRPCInferenceServiceClient
	served chan error
}

// startServer builds a Server from opts and serves it on 127.0.0.1; the test's cleanup shuts
// it down (if the test did not) and checks that Serve returned nil.
func startServer(t testing.TB, opts ...Option) *testServer {
	t.Helper()
	s, err := New(opts...)
	require.NoError(t, err)
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	grpcL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ts := &testServer{Server: s, url: "http://" + httpL.Addr().String(), served: make(chan error, 1)}
	go func() { ts.served <- s.Serve(httpL, grpcL) }()
	conn, err := grpc.NewClient(grpcL.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30)))
	require.NoError(t, err)
	ts.client = pb.NewGRPCInferenceServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-ts.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Serve did not return after Shutdown")
		}
		http.DefaultClient.CloseIdleConnections()
	})
	return ts
}

// repoModel is a model of a test repository.
type repoModel struct {
	file   string // an .onnx file to copy, or
	onnx   []byte // its bytes
	config string // config.json, "" for none
}

// writeRepo lays out a model repository: DIR/NAME/1/model.onnx and DIR/NAME/config.json.
func writeRepo(t testing.TB, models map[string]repoModel) string {
	t.Helper()
	dir := t.TempDir()
	for name, m := range models {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name, "1"), 0o755))
		b := m.onnx
		if m.file != "" {
			var err error
			b, err = os.ReadFile(m.file)
			require.NoError(t, err)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "1", "model.onnx"), b, 0o644))
		if m.config != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name, "config.json"), []byte(m.config), 0o644))
		}
	}
	return dir
}

// reference runs a model file through go/session, for comparison.
func reference(t testing.TB, path string, inputs ...session.NamedTensor) []session.Tensor {
	t.Helper()
	s, err := session.Load(path)
	require.NoError(t, err)
	defer s.Close()
	outs, err := s.Run(context.Background(), inputs)
	require.NoError(t, err)
	return outs
}

func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}

func mnistInput(rng *rand.Rand) session.Tensor {
	return session.MustTensor([]int64{1, 1, 28, 28}, randFloats(rng, 784))
}

func encoderInput(rng *rand.Rand, batch, steps int64) session.Tensor {
	return session.MustTensor([]int64{batch, steps, 64}, randFloats(rng, int(batch*steps*64)))
}

func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, 7))
}

// requireClose compares float32 outputs.
func requireClose(t testing.TB, want []float32, got []float32, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if math.Abs(float64(want[i]-got[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
			require.Failf(t, "outputs differ", "%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func floatsOf(t testing.TB, x session.Tensor) []float32 {
	t.Helper()
	f, err := session.TensorOf[float32](x)
	require.NoError(t, err)
	return f
}

// jsonInput is a REST input with JSON data.
func jsonInput(name string, x session.Tensor) map[string]any {
	data, err := appendJSONData(nil, x)
	if err != nil {
		panic(err)
	}
	return map[string]any{"name": name, "datatype": datatypeOf[x.DType()], "shape": x.Shape(), "data": json.RawMessage(data)}
}

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// restResult is a decoded REST response.
type restResult struct {
	status  int
	header  http.Header
	body    map[string]any
	outputs map[string]restOutputT
}

type restOutputT struct {
	datatype string
	shape    []int64
	json     []any  // "data"
	raw      []byte // binary data
}

// post sends a REST request (JSON, or JSON plus binary chunks with the extension's header) and
// decodes the response, splitting binary outputs off.
func post(ctx context.Context, t testing.TB, url string, req any, chunks ...[]byte) (*restResult, error) {
	js, err := json.Marshal(req)
	require.NoError(t, err)
	body := append([]byte(nil), js...)
	for _, c := range chunks {
		body = append(body, c...)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	if len(chunks) > 0 {
		hr.Header.Set(headerLength, strconv.Itoa(len(js)))
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	res := &restResult{status: resp.StatusCode, header: resp.Header, outputs: map[string]restOutputT{}}
	jsonPart, bin := b, []byte(nil)
	if h := resp.Header.Get(headerLength); h != "" {
		n, err := strconv.Atoi(h)
		require.NoError(t, err)
		jsonPart, bin = b[:n], b[n:]
	}
	if len(jsonPart) == 0 {
		return res, nil
	}
	dec := json.NewDecoder(bytes.NewReader(jsonPart))
	dec.UseNumber()
	if err := dec.Decode(&res.body); err != nil {
		return nil, fmt.Errorf("response %q: %v", jsonPart, err)
	}
	outs, _ := res.body["outputs"].([]any)
	for _, o := range outs {
		om := o.(map[string]any)
		var ro restOutputT
		ro.datatype, _ = om["datatype"].(string)
		for _, d := range om["shape"].([]any) {
			n, _ := d.(json.Number).Int64()
			ro.shape = append(ro.shape, n)
		}
		if p, ok := om["parameters"].(map[string]any); ok {
			if num, ok := p["binary_data_size"].(json.Number); ok {
				n, _ := num.Int64()
				ro.raw, bin = bin[:int(n)], bin[int(n):]
			}
		}
		ro.json, _ = om["data"].([]any)
		res.outputs[om["name"].(string)] = ro
	}
	return res, nil
}

func (r *restResult) floats(t testing.TB, name string) []float32 {
	t.Helper()
	o, ok := r.outputs[name]
	require.True(t, ok, "no output %q in %v", name, r.body)
	if o.raw != nil {
		f := make([]float32, len(o.raw)/4)
		require.NoError(t, binary.Read(bytes.NewReader(o.raw), binary.LittleEndian, f))
		return f
	}
	f := make([]float32, len(o.json))
	for i, v := range o.json {
		x, err := v.(json.Number).Float64()
		require.NoError(t, err)
		f[i] = float32(x)
	}
	return f
}

func (r *restResult) errorText() string {
	if r.body == nil {
		return ""
	}
	s, _ := r.body["error"].(string)
	return s
}

func rawOf(t testing.TB, x session.Tensor) []byte {
	t.Helper()
	b, err := encodeRaw(nil, x)
	require.NoError(t, err)
	return b
}

// grpcInfer sends a ModelInfer with raw_input_contents.
func grpcInfer(ctx context.Context, c pb.GRPCInferenceServiceClient, model string, inputs ...session.NamedTensor) (*pb.ModelInferResponse, error) {
	req := &pb.ModelInferRequest{ModelName: model}
	for _, in := range inputs {
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: in.Name, Datatype: datatypeOf[in.Tensor.DType()], Shape: in.Tensor.Shape()})
		raw, err := encodeRaw(nil, in.Tensor)
		if err != nil {
			return nil, err
		}
		req.RawInputContents = append(req.RawInputContents, raw)
	}
	return c.ModelInfer(ctx, req)
}

func grpcFloats(t testing.TB, resp *pb.ModelInferResponse, i int) []float32 {
	t.Helper()
	raw := resp.GetRawOutputContents()[i]
	f := make([]float32, len(raw)/4)
	require.NoError(t, binary.Read(bytes.NewReader(raw), binary.LittleEndian, f))
	return f
}

// hookRunner wraps a model's runner: it counts runs, reports each start, can hold runs until
// released, and can fail runs.
type hookRunner struct {
	runner
	runs    atomic.Int64
	started chan struct{}
	mu      sync.Mutex
	gate    chan struct{} // nil: runs go ahead
	fail    func(inputs []session.NamedTensor) error
}

func (h *hookRunner) Run(ctx context.Context, inputs []session.NamedTensor) ([]session.Tensor, error) {
	h.runs.Add(1)
	select {
	case h.started <- struct{}{}:
	default:
	}
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if h.fail != nil {
		if err := h.fail(inputs); err != nil {
			return nil, err
		}
	}
	return h.runner.Run(ctx, inputs)
}

// hook installs a hookRunner on a loaded model, before any request reaches it.
func hook(t testing.TB, s *Server, name string, gated bool) *hookRunner {
	t.Helper()
	m, err := s.lookup(name, "")
	require.NoError(t, err)
	h := &hookRunner{runner: m.run, started: make(chan struct{}, 64)}
	if gated {
		h.gate = make(chan struct{})
	}
	m.run = h
	return h
}

func (h *hookRunner) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

func (h *hookRunner) waitStarted(t testing.TB) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not start")
	}
}

// queueLen is a model's queue length.
func queueLen(s *Server, name string) int {
	m, err := s.lookup(name, "")
	if err != nil {
		return -1
	}
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	return len(m.sched.queue)
}

// eventually polls cond for up to 20 s.
func eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mnistBytes(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(mnistPath)
	require.NoError(t, err)
	return b
}

type countersT struct {
	v interface {
		WithLabelValues(...string) prometheus.Counter
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// goroutines dumps every goroutine's stack, for a leak's report.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

func jsonBody(t testing.TB, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}
