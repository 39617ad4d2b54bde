package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loomrt/loom/go/serve/inferencepb"
	"github.com/loomrt/loom/go/session"
)

// Every kind of bad request gets its status and a message naming what is wrong, and the server
// goes on serving.
func TestBadRequests(t *testing.T) {
	ts := startServer(t, WithModelRepository(twoModels(t)), WithMaxBodyBytes(64<<10))
	rng := newRand(t)
	x := mnistInput(rng)
	good := jsonInput(mnistIn, x)
	with := func(k string, v any) map[string]any {
		in := map[string]any{}
		for kk, vv := range good {
			in[kk] = vv
		}
		in[k] = v
		return in
	}
	raw := rawOf(t, x)
	binIn := func(size int) map[string]any {
		return map[string]any{"name": mnistIn, "datatype": "FP32", "shape": []int64{1, 1, 28, 28}, "parameters": map[string]any{"binary_data_size": size}}
	}
	for _, tc := range []struct {
		name   string
		path   string
		body   string // raw JSON, or
		req    any
		chunks [][]byte
		status int
		want   string
	}{
		{"malformed JSON", "mnist", `{"inputs": [`, nil, nil, 400, `model "mnist": malformed inference request JSON`},
		{"unknown datatype", "mnist", "", map[string]any{"inputs": []any{with("datatype", "FP8")}}, nil, 400, `model "mnist" input "Input3": datatype "FP8" is not supported`},
		{"wrong datatype", "mnist", "", map[string]any{"inputs": []any{with("datatype", "FP64")}}, nil, 400, `model "mnist" input "Input3": datatype FP64, but the model takes FP32`},
		{"shape and data disagree", "mnist", "", map[string]any{"inputs": []any{with("shape", []int{1, 1, 28, 27})}}, nil, 400, `input "Input3": shape [1 1 28 27] has 756 elements but data has 784`},
		{"shape the model does not take", "mnist", "", map[string]any{"inputs": []any{with("shape", []int{1, 1, 784})}}, nil, 400, `input "Input3": shape [1 1 784] has rank 3, but the model takes rank 4`},
		{"a string among numbers", "mnist", "", map[string]any{"inputs": []any{with("data", append([]any{"x"}, make([]any, 783)...))}}, nil, 400, `data element 0: wants a number, got a string`},
		{"null among numbers", "mnist", "", map[string]any{"inputs": []any{with("data", append([]any{1}, make([]any, 783)...))}}, nil, 400, `data element 1: wants a number, got null`},
		{"missing input", "mnist", "", map[string]any{"inputs": []any{}}, nil, 400, `model "mnist": input "Input3" (FP32 [1 1 28 28]) is missing`},
		{"unknown input", "mnist", "", map[string]any{"inputs": []any{good, with("name", "z")}}, nil, 400, `model "mnist" has no input "z" (its inputs: "Input3")`},
		{"input twice", "mnist", "", map[string]any{"inputs": []any{good, good}}, nil, 400, `input "Input3" is given twice`},
		{"unknown output", "mnist", "", map[string]any{"inputs": []any{good}, "outputs": []any{map[string]any{"name": "nope"}}}, nil, 400, `model "mnist" has no output "nope"`},
		{"no data", "mnist", "", map[string]any{"inputs": []any{with("data", nil)}}, nil, 400, `no data`},
		{"binary size past the body", "mnist", "", map[string]any{"inputs": []any{binIn(784*4 + 4)}}, [][]byte{raw}, 400, `binary_data_size 3140, but only 3136 bytes`},
		{"binary bytes left over", "mnist", "", map[string]any{"inputs": []any{binIn(784 * 4)}}, [][]byte{raw, {1, 2}}, 400, `2 bytes of binary data after the inputs`},
		{"binary size not a whole tensor", "mnist", "", map[string]any{"inputs": []any{binIn(784*4 - 2)}}, [][]byte{raw[:784*4-2]}, 400, `needs 3136 bytes (784 elements of 4 bytes) but the data has 3134`},
		{"unknown model", "nope", "", map[string]any{"inputs": []any{good}}, nil, 404, `unknown model "nope"`},
		{"unknown version", "mnist/versions/3", "", map[string]any{"inputs": []any{good}}, nil, 404, `model "mnist" has no version "3" (it has 1)`},
		{"body over the limit", "mnist", `{"inputs": [], "pad": "` + strings.Repeat("x", 70<<10) + `"}`, nil, nil, 413, `over the limit of 65536 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := ts.url + "/v2/models/" + tc.path + "/infer"
			var res *restResult
			var err error
			if tc.body != "" {
				res, err = postRaw(t, url, tc.body)
			} else {
				res, err = post(context.Background(), t, url, tc.req, tc.chunks...)
			}
			require.NoError(t, err)
			assert.Equal(t, tc.status, res.status)
			assert.Contains(t, res.errorText(), tc.want)
		})
	}
	// gRPC's bad requests get status codes.
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  *pb.ModelInferRequest
		code codes.Code
		want string
	}{
		{"unknown model", &pb.ModelInferRequest{ModelName: "nope"}, codes.NotFound, `unknown model "nope"`},
		{"raw contents count", &pb.ModelInferRequest{ModelName: "mnist", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: mnistIn, Datatype: "FP32", Shape: []int64{1, 1, 28, 28}}},
			RawInputContents: [][]byte{raw, raw}}, codes.InvalidArgument, "2 raw_input_contents for 1 inputs"},
		{"raw size", &pb.ModelInferRequest{ModelName: "mnist", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: mnistIn, Datatype: "FP32", Shape: []int64{1, 1, 28, 28}}},
			RawInputContents: [][]byte{raw[:100]}}, codes.InvalidArgument, "needs 3136 bytes"},
		{"typed count", &pb.ModelInferRequest{ModelName: "mnist", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: mnistIn, Datatype: "FP32", Shape: []int64{1, 1, 28, 28},
			Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}}}}, codes.InvalidArgument, "has 784 elements but fp32_contents has 1"},
		{"too large", &pb.ModelInferRequest{ModelName: "mnist", RawInputContents: [][]byte{make([]byte, 100<<10)}}, codes.ResourceExhausted, "larger than max"},
	} {
		_, err := ts.client.ModelInfer(ctx, tc.req)
		assert.Equal(t, tc.code, status.Code(err), "%s: %v", tc.name, err)
		assert.Contains(t, fmt.Sprint(err), tc.want, tc.name)
	}
	// Still serving, and the failures were counted against the model.
	res, err := post(ctx, t, ts.url+"/v2/models/mnist/infer", map[string]any{"inputs": []any{good}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.status)
	assert.GreaterOrEqual(t, testutil.ToFloat64(ts.metrics.failure.WithLabelValues("mnist", "1")), 10.0)
	assert.Equal(t, 1.0, testutil.ToFloat64(ts.metrics.success.WithLabelValues("mnist", "1")))
}

func postRaw(t testing.TB, url, body string) (*restResult, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	res := &restResult{status: resp.StatusCode, body: map[string]any{}}
	if err := jsonUnmarshal(b, &res.body); err != nil {
		return nil, fmt.Errorf("%s: %v", b, err)
	}
	return res, nil
}

// A full queue refuses at once; a request cancelled while queued leaves the queue and never runs.
func TestQueueFullAndCancellation(t *testing.T) {
	ts := startServer(t, WithModelBytes("mnist", "1", mnistBytes(t), ModelConfig{Instances: 1, MaxQueueSize: 2}))
	h := hook(t, ts.Server, "mnist", true)
	rng := newRand(t)
	in := session.NamedTensor{Name: mnistIn, Tensor: mnistInput(rng)}
	ctx := context.Background()
	results := make(chan error, 3)
	send := func(ctx context.Context) {
		_, err := grpcInfer(ctx, ts.client, "mnist", in)
		results <- err
	}
	go send(ctx) // A: runs, held at the gate
	h.waitStarted(t)
	go send(ctx) // B: queued
	cctx, cancel := context.WithCancel(ctx)
	go send(cctx) // C: queued, then cancelled
	eventually(t, func() bool { return queueLen(ts.Server, "mnist") == 2 }, "two queued requests")
	assert.Equal(t, 2.0, testutil.ToFloat64(ts.metrics.queueDepth.WithLabelValues("mnist", "1")))

	_, err := grpcInfer(ctx, ts.client, "mnist", in) // D: the queue is full
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, fmt.Sprint(err), "the queue is full")
	res, err := post(ctx, t, ts.url+"/v2/models/mnist/infer", map[string]any{"inputs": []any{jsonInput(mnistIn, in.Tensor)}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, res.status)

	cancel()
	eventually(t, func() bool { return queueLen(ts.Server, "mnist") == 1 }, "the cancelled request to leave the queue")
	h.release()
	var codesSeen []codes.Code
	for range 3 {
		codesSeen = append(codesSeen, status.Code(<-results))
	}
	assert.ElementsMatch(t, []codes.Code{codes.OK, codes.OK, codes.Canceled}, codesSeen)
	assert.Equal(t, int64(2), h.runs.Load(), "the cancelled request must not run")
	assert.Equal(t, 2.0, testutil.ToFloat64(ts.metrics.executions.WithLabelValues("mnist", "1")))
	assert.Equal(t, 0.0, testutil.ToFloat64(ts.metrics.queueDepth.WithLabelValues("mnist", "1")))
}

// A request's deadline (gRPC's, or the REST "timeout" parameter) ends it in the queue.
func TestDeadlines(t *testing.T) {
	ts := startServer(t, WithModelBytes("mnist", "1", mnistBytes(t), ModelConfig{Instances: 1}))
	h := hook(t, ts.Server, "mnist", true)
	rng := newRand(t)
	in := session.NamedTensor{Name: mnistIn, Tensor: mnistInput(rng)}
	first := make(chan error, 1)
	go func() {
		_, err := grpcInfer(context.Background(), ts.client, "mnist", in)
		first <- err
	}()
	h.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := grpcInfer(ctx, ts.client, "mnist", in)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	res, err := post(context.Background(), t, ts.url+"/v2/models/mnist/infer",
		map[string]any{"inputs": []any{jsonInput(mnistIn, in.Tensor)}, "parameters": map[string]any{"timeout": 50000}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusGatewayTimeout, res.status)
	assert.Contains(t, res.errorText(), "deadline exceeded")
	h.release()
	require.NoError(t, <-first)
	assert.Equal(t, int64(1), h.runs.Load(), "requests past their deadline must not run")
}

// A run that fails answers its own request only, also when it shared a dynamic batch.
func TestFailingRunReachesOnlyItsRequest(t *testing.T) {
	ts := startServer(t, WithModelRepository(twoModels(t)))
	poison := errors.New("poisoned input")
	for _, name := range []string{"mnist", "encoder"} {
		h := hook(t, ts.Server, name, false)
		h.fail = func(inputs []session.NamedTensor) error {
			f, _ := session.TensorOf[float32](inputs[0].Tensor)
			for _, v := range f {
				if v == 42 {
					return &session.Error{Op: "Run", Kind: session.ErrInternal, Cause: poison}
				}
			}
			return nil
		}
	}
	rng := newRand(t)
	for _, tc := range []struct {
		model string
		input func(bad bool) session.NamedTensor
	}{
		{"mnist", func(bad bool) session.NamedTensor {
			x := mnistInput(rng)
			if bad {
				floatsOf(t, x)[5] = 42
			}
			return session.NamedTensor{Name: mnistIn, Tensor: x}
		}},
		{"encoder", func(bad bool) session.NamedTensor {
			x := encoderInput(rng, 1, 4)
			if bad {
				floatsOf(t, x)[5] = 42
			}
			return session.NamedTensor{Name: "x", Tensor: x}
		}},
	} {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		inputs := make([]session.NamedTensor, 8)
		for i := range inputs {
			inputs[i] = tc.input(i == 3)
		}
		for i := range inputs {
			wg.Go(func() {
				resp, err := grpcInfer(context.Background(), ts.client, tc.model, inputs[i])
				if err == nil {
					want := floatsOf(t, reference(t, map[string]string{"mnist": mnistPath, "encoder": encoderPath}[tc.model], inputs[i])[0])
					requireClose(t, want, grpcFloats(t, resp, 0), tc.model)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if i == 3 {
				assert.Equal(t, codes.Internal, status.Code(err), "%v", err)
				assert.Contains(t, fmt.Sprint(err), "poisoned input")
			} else {
				assert.NoError(t, err, "%s request %d", tc.model, i)
			}
		}
	}
}

// Shutdown turns readiness false, refuses new requests, answers those in flight and queued,
// then closes the models.
func TestShutdownAnswersInFlight(t *testing.T) {
	s, err := New(WithModelBytes("mnist", "1", mnistBytes(t), ModelConfig{Instances: 1}))
	require.NoError(t, err)
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(httpL, nil) }()
	h := hook(t, s, "mnist", true)
	url := "http://" + httpL.Addr().String() + "/v2/models/mnist/infer"
	rng := newRand(t)
	req := map[string]any{"inputs": []any{jsonInput(mnistIn, mnistInput(rng))}}
	results := make(chan int, 4)
	for range 4 {
		go func() {
			res, err := post(context.Background(), t, url, req)
			if err != nil {
				results <- -1
				return
			}
			results <- res.status
		}()
	}
	h.waitStarted(t)
	eventually(t, func() bool { return queueLen(s, "mnist") == 3 }, "three queued requests")
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	eventually(t, func() bool { return !s.Ready() }, "readiness to turn false")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v2/health/ready", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v2/models/mnist/infer", strings.NewReader("{}")))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "shutting down")
	h.release()
	for range 4 {
		assert.Equal(t, http.StatusOK, <-results)
	}
	require.NoError(t, <-shut)
	require.NoError(t, <-served)
	assert.Equal(t, int64(4), h.runs.Load())
	_, err = s.lookup("mnist", "")
	assert.Error(t, err, "the models are closed")
	http.DefaultClient.CloseIdleConnections()
}

// Clients that go away mid-request, and slow clients, cost the server nothing lasting.
func TestClientDisconnectsAndSlowClients(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Run("serve", func(t *testing.T) {
		ts := startServer(t, WithModelBytes("mnist", "1", mnistBytes(t), ModelConfig{Instances: 1}),
			WithTimeouts(time.Second, 200*time.Millisecond, time.Second))
		h := hook(t, ts.Server, "mnist", true)
		rng := newRand(t)
		x := mnistInput(rng)
		req := map[string]any{"inputs": []any{jsonInput(mnistIn, x)}}
		// A REST client and a gRPC client give up while their requests run.
		restCtx, cancelREST := context.WithCancel(context.Background())
		grpcCtx, cancelGRPC := context.WithCancel(context.Background())
		done := make(chan error, 2)
		go func() {
			_, err := post(restCtx, t, ts.url+"/v2/models/mnist/infer", req)
			done <- err
		}()
		h.waitStarted(t)
		go func() {
			_, err := grpcInfer(grpcCtx, ts.client, "mnist", session.NamedTensor{Name: mnistIn, Tensor: x})
			done <- err
		}()
		eventually(t, func() bool { return queueLen(ts.Server, "mnist") == 1 }, "the gRPC request to queue")
		// The queued gRPC request goes while the REST one still holds the only instance...
		cancelGRPC()
		assert.Error(t, <-done)
		eventually(t, func() bool { return queueLen(ts.Server, "mnist") == 0 }, "the queue to empty")
		// ...then the running REST request: its run stops at the gate.
		cancelREST()
		assert.Error(t, <-done)
		h.release()

		// A client that sends half its headers, and one that sends half its body, are cut off.
		for _, partial := range []string{
			"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\n",
			"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\"",
		} {
			conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
			require.NoError(t, err)
			_, err = conn.Write([]byte(partial))
			require.NoError(t, err)
			start := time.Now()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			io.Copy(io.Discard, conn) //nolint:errcheck // ends when the server closes
			assert.Less(t, time.Since(start), 5*time.Second, "the server must close a slow connection")
			conn.Close()
		}
		// Still serving.
		res, err := post(context.Background(), t, ts.url+"/v2/models/mnist/infer", req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, res.status)
		gr, err := grpcInfer(context.Background(), ts.client, "mnist", session.NamedTensor{Name: mnistIn, Tensor: x})
		require.NoError(t, err)
		requireClose(t, res.floats(t, mnistOut), grpcFloats(t, gr, 0), "after disconnects")
		assert.Equal(t, int64(3), h.runs.Load(), "the cancelled queued request must not run")
		require.NoError(t, ts.Shutdown(context.Background()))
	})
	// No goroutine outlives the server (a few of the runtime's and http's may linger briefly).
	eventually(t, func() bool {
		http.DefaultClient.CloseIdleConnections()
		return runtime.NumGoroutine() <= base+2
	}, fmt.Sprintf("goroutines to return to %d (%s)", base, goroutines()))
}

// The metrics count requests, inferences, executions and durations per model and version.
func TestMetrics(t *testing.T) {
	ts := startServer(t, WithModelRepository(twoModels(t)))
	rng := newRand(t)
	ctx := context.Background()
	for range 3 {
		_, err := grpcInfer(ctx, ts.client, "encoder", session.NamedTensor{Name: "x", Tensor: encoderInput(rng, 2, 3)})
		require.NoError(t, err)
	}
	_, err := grpcInfer(ctx, ts.client, "encoder", session.NamedTensor{Name: "x", Tensor: encoderInput(rng, 2, 3).Reshaped(3, 2, 64)})
	require.NoError(t, err)
	_, err = grpcInfer(ctx, ts.client, "encoder", session.NamedTensor{Name: "x", Tensor: mnistInput(rng)})
	require.Error(t, err)
	resp, err := http.Get(ts.url + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, line := range []string{
		`nv_inference_request_success{model="encoder",version="1"} 4`,
		`nv_inference_request_failure{model="encoder",version="1"} 1`,
		`nv_inference_count{model="encoder",version="1"} 9`,
		`nv_inference_exec_count{model="encoder",version="1"} 4`,
		`nv_inference_request_success{model="mnist",version="1"} 0`,
		`loom_batch_size_count{model="encoder",version="1"} 4`,
		`loom_batch_size_sum{model="encoder",version="1"} 9`,
		`loom_queue_depth{model="encoder",version="1"} 0`,
	} {
		assert.Contains(t, text, line+"\n")
	}
	for _, name := range []string{"nv_inference_request_duration_us", "nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us"} {
		v := testutil.ToFloat64(map[string]*countersT{
			"nv_inference_request_duration_us": {ts.metrics.requestUS}, "nv_inference_queue_duration_us": {ts.metrics.queueUS},
			"nv_inference_compute_infer_duration_us": {ts.metrics.computeUS}}[name].v.WithLabelValues("encoder", "1"))
		assert.Contains(t, text, name+`{model="encoder",version="1"}`)
		if name != "nv_inference_queue_duration_us" {
			assert.Greater(t, v, 0.0, name)
		}
	}
	assert.LessOrEqual(t, testutil.ToFloat64(ts.metrics.computeUS.WithLabelValues("encoder", "1")), testutil.ToFloat64(ts.metrics.requestUS.WithLabelValues("encoder", "1")))
	assert.True(t, bytes.Contains(body, []byte("go_goroutines")))
}
