package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzRESTInfer posts arbitrary bodies (JSON, with or without a binary tail announced by
// Inference-Header-Content-Length) to the infer endpoint of MNIST and of the batching encoder,
// through the handler the server uses. Whatever the body, the answer is 200 with a well-formed
// response or a 4xx/503 with a JSON error: never a panic, a 5xx for the client's mistake, or a
// hang. `go test -fuzz FuzzRESTInfer .` runs it; plain `go test` runs the seeds.
func FuzzRESTInfer(f *testing.F) {
	mnist, err := os.ReadFile(mnistPath)
	require.NoError(f, err)
	encoder, err := os.ReadFile(encoderPath)
	require.NoError(f, err)
	s, err := New(
		WithModelBytes("mnist", "1", mnist, ModelConfig{IntraOpThreads: 1}),
		WithModelBytes("encoder", "1", encoder, ModelConfig{IntraOpThreads: 1, MaxBatchSize: 8, MaxQueueDelayMicroseconds: 100}),
		WithMaxBodyBytes(1<<20),
	)
	require.NoError(f, err)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(f, s.Shutdown(ctx))
	})
	h := s.Handler()

	good, err := json.Marshal(map[string]any{"inputs": []any{map[string]any{
		"name": mnistIn, "shape": []int{1, 1, 28, 28}, "datatype": "FP32", "data": make([]float32, 784)}}})
	require.NoError(f, err)
	bin, err := json.Marshal(map[string]any{
		"inputs": []any{map[string]any{"name": "x", "shape": []int{1, 16, 64}, "datatype": "FP32",
			"parameters": map[string]any{"binary_data_size": 16 * 64 * 4}}},
		"parameters": map[string]any{"binary_data_output": true}})
	require.NoError(f, err)
	f.Add(good, -1, false)
	f.Add(append(bin, make([]byte, 16*64*4)...), len(bin), true)
	f.Add(bin, len(bin), true)
	f.Add([]byte(`{"inputs":[{"name":"Input3","shape":[1,1,28,28],"datatype":"FP32","data":[1,2]}]}`), -1, false)
	f.Add([]byte(`{"inputs":[{"name":"x","shape":[9223372036854775807,16,64],"datatype":"FP32","data":[]}]}`), -1, true)
	f.Add([]byte(`{"inputs":[{"name":"x","shape":[-1,16,64],"datatype":"BYTES","data":["a"]}]}`), -1, true)
	f.Add([]byte(`{"id":"x","outputs":[{"name":"nope"}],"inputs":[]}`), -1, false)
	f.Add([]byte(`{"inputs":[{"name":"Input3","shape":[1,1,28,28],"datatype":"FP32","parameters":{"binary_data_size":3136}}]}`), 20, false)
	f.Add([]byte(`{`), 0, false)

	f.Fuzz(func(t *testing.T, body []byte, headerLen int, toEncoder bool) {
		model := "mnist"
		if toEncoder {
			model = "encoder"
		}
		req := httptest.NewRequest(http.MethodPost, "/v2/models/"+model+"/infer", bytes.NewReader(body))
		if headerLen >= 0 {
			req.Header.Set(headerLength, strconv.Itoa(headerLen))
		}
		rec := httptest.NewRecorder()
		served := make(chan struct{})
		go func() {
			defer close(served)
			h.ServeHTTP(rec, req)
		}()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer after 10 s to %.300q (header length %d)", body, headerLen)
		}
		code := rec.Code
		switch {
		case code == http.StatusOK:
			out := rec.Body.Bytes()
			if n := rec.Header().Get(headerLength); n != "" {
				k, err := strconv.Atoi(n)
				if err != nil || k < 0 || k > len(out) {
					t.Fatalf("200 with %s %q over a body of %d bytes", headerLength, n, len(out))
				}
				out = out[:k]
			}
			var resp map[string]any
			if err := json.Unmarshal(out, &resp); err != nil || resp["outputs"] == nil {
				t.Fatalf("200 with a response that is not an infer response (%v): %.200q", err, out)
			}
		case code >= 400 && code < 500, code == http.StatusServiceUnavailable:
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%d without a JSON error (%v): %.200q", code, err, rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for a client's request: %.300q", code, rec.Body.Bytes())
		}
	})
}
