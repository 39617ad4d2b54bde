package serve

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session"
)

// loadDuration is how long each load phase runs: LOOM_SERVE_LOAD_SECONDS (default 2, so CI stays
// quick; docs/performance.md's figures come from 20).
func loadDuration(t testing.TB) time.Duration {
	s := os.Getenv("LOOM_SERVE_LOAD_SECONDS")
	if s == "" {
		return 2 * time.Second
	}
	n, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, "LOOM_SERVE_LOAD_SECONDS")
	return time.Duration(n * float64(time.Second))
}

// loadStats are one load phase's figures.
type loadStats struct {
	requests, errors int
	firstErr         error
	p50, p99         time.Duration
	throughput       float64 // requests per second
}

func (s loadStats) String() string {
	return fmt.Sprintf("%d requests, %d errors, %.0f req/s, p50 %.2f ms, p99 %.2f ms", s.requests, s.errors, s.throughput,
		float64(s.p50.Microseconds())/1000, float64(s.p99.Microseconds())/1000)
}

// generateLoad runs clients goroutines, each calling do(client) back to back for d, and
// measures every call.
func generateLoad(clients int, d time.Duration, do func(client int) error) loadStats {
	var mu sync.Mutex
	var lat []time.Duration
	var st loadStats
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				err := do(c)
				mine = append(mine, time.Since(t0))
				if err != nil {
					mu.Lock()
					st.errors++
					if st.firstErr == nil {
						st.firstErr = err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	st.requests = len(lat)
	if len(lat) > 0 {
		st.p50, st.p99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	st.throughput = float64(len(lat)) / elapsed.Seconds()
	return st
}

// inferClient sends one model's requests over REST (binary tensors, even clients) or gRPC (odd).
func inferClient(t testing.TB, ts *testServer, model string, inputs []session.NamedTensor) func(client int) error {
	raws := make([][]byte, len(inputs))
	for i, in := range inputs {
		raws[i] = rawOf(t, in.Tensor)
	}
	return func(c int) error {
		in := inputs[c%len(inputs)]
		if c%2 == 1 {
			_, err := grpcInfer(context.Background(), ts.client, model, in)
			return err
		}
		req := map[string]any{
			"inputs":     []any{map[string]any{"name": in.Name, "datatype": "FP32", "shape": in.Tensor.Shape(), "parameters": map[string]any{"binary_data_size": len(raws[c%len(inputs)])}}},
			"parameters": map[string]any{"binary_data_output": true},
		}
		res, err := post(context.Background(), t, ts.url+"/v2/models/"+model+"/infer", req, raws[c%len(inputs)])
		if err != nil {
			return err
		}
		if res.status != http.StatusOK {
			return fmt.Errorf("status %d: %s", res.status, res.errorText())
		}
		return nil
	}
}

// 64 concurrent clients against MNIST and the encoder (dynamic batching on): no errors.
func TestLoad64Clients(t *testing.T) {
	ts := startServer(t, WithModelRepository(writeRepo(t, map[string]repoModel{
		"mnist":   {file: mnistPath},
		"encoder": {file: encoderPath, config: `{"max_batch_size": 32, "max_queue_delay_us": 2000}`},
	})))
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = 64
	rng := newRand(t)
	d := loadDuration(t)
	for _, tc := range []struct {
		model  string
		inputs []session.NamedTensor
	}{
		{"mnist", []session.NamedTensor{{Name: mnistIn, Tensor: mnistInput(rng)}, {Name: mnistIn, Tensor: mnistInput(rng)}}},
		{"encoder", []session.NamedTensor{{Name: "x", Tensor: encoderInput(rng, 1, 16)}, {Name: "x", Tensor: encoderInput(rng, 1, 16)}}},
	} {
		st := generateLoad(64, d, inferClient(t, ts, tc.model, tc.inputs))
		t.Logf("%s, 64 clients (half REST binary, half gRPC), %v: %v", tc.model, d, st)
		require.Zero(t, st.errors, "first error: %v", st.firstErr)
		require.NotZero(t, st.requests)
	}
}

// batchSteps is the encoder's sequence length in TestBatchingThroughput.
var batchSteps = int64(envInt("LOOM_SERVE_BATCH_STEPS", 16))

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// The encoder at 32 clients, dynamic batching off and on: both error-free; the throughput ratio
// is logged (docs/performance.md, "Serving").
func TestBatchingThroughput(t *testing.T) {
	rng := newRand(t)
	d := loadDuration(t)
	inputs := []session.NamedTensor{{Name: "x", Tensor: encoderInput(rng, 1, batchSteps)}, {Name: "x", Tensor: encoderInput(rng, 1, batchSteps)}}
	var rates [2]float64
	for i, cfg := range []string{`{"instances": 2}`, `{"instances": 2, "max_batch_size": 32, "max_queue_delay_us": 2000}`} {
		t.Run([]string{"off", "on"}[i], func(t *testing.T) {
			ts := startServer(t, WithModelRepository(writeRepo(t, map[string]repoModel{"encoder": {file: encoderPath, config: cfg}})))
			http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = 64
			st := generateLoad(32, d, inferClient(t, ts, "encoder", inputs))
			t.Logf("encoder, 32 clients, batching %s (%s), %v: %v", []string{"off", "on"}[i], cfg, d, st)
			require.Zero(t, st.errors, "first error: %v", st.firstErr)
			rates[i] = st.throughput
		})
	}
	if rates[0] > 0 {
		t.Logf("dynamic batching: %.2fx the throughput", rates[1]/rates[0])
	}
}

// BenchmarkInferGRPC measures one MNIST request over gRPC on loopback, end to end.
func BenchmarkInferGRPC(b *testing.B) {
	ts := startServer(b, WithModelBytes("mnist", "1", mnistBytes(b), ModelConfig{}))
	rng := newRand(b)
	in := session.NamedTensor{Name: mnistIn, Tensor: mnistInput(rng)}
	for b.Loop() {
		if _, err := grpcInfer(context.Background(), ts.client, "mnist", in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInferREST measures one MNIST request over REST with binary tensors on loopback.
func BenchmarkInferREST(b *testing.B) {
	ts := startServer(b, WithModelBytes("mnist", "1", mnistBytes(b), ModelConfig{}))
	rng := newRand(b)
	x := mnistInput(rng)
	do := inferClient(b, ts, "mnist", []session.NamedTensor{{Name: mnistIn, Tensor: x}})
	for b.Loop() {
		if err := do(0); err != nil {
			b.Fatal(err)
		}
	}
}
