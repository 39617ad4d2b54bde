package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/go/session"
)

// tritonPython returns the tritonclient venv's python, skipping the test when there is none
// (failing it instead under LOOM_REQUIRE_TRITONCLIENT=1).
func tritonPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("LOOM_TRITONCLIENT_PYTHON")
	if py == "" {
		if home, err := os.UserHomeDir(); err == nil {
			py = filepath.Join(home, ".cache", "loom-tritonclient", "bin", "python")
		}
	}
	if _, err := os.Stat(py); py == "" || err != nil {
		msg := fmt.Sprintf("no tritonclient venv (LOOM_TRITONCLIENT_PYTHON=%q; tools/serve/venv.sh creates it)", os.Getenv("LOOM_TRITONCLIENT_PYTHON"))
		if os.Getenv("LOOM_REQUIRE_TRITONCLIENT") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

// The check's spec (tritonclient_check.py's docstring).
type checkInput struct {
	Name string `json:"name"`
	File string `json:"file"`
}

type checkRequest struct {
	Inputs  []checkInput `json:"inputs"`
	Outputs []string     `json:"outputs"`
}

type checkModel struct {
	Name     string         `json:"name"`
	Version  string         `json:"version"`
	Requests []checkRequest `json:"requests"`
}

type checkSpec struct {
	OutDir string       `json:"out_dir"`
	Models []checkModel `json:"models"`
}

// What the check reports.
type tensorMeta struct {
	Name     string            `json:"name"`
	Datatype string            `json:"datatype"`
	Shape    []json.RawMessage `json:"shape"` // numbers over HTTP; strings (int64 in protobuf JSON) over gRPC
}

type modelMeta struct {
	Name     string       `json:"name"`
	Versions []string     `json:"versions"`
	Platform string       `json:"platform"`
	Inputs   []tensorMeta `json:"inputs"`
	Outputs  []tensorMeta `json:"outputs"`
}

// indexEntry is a row of the repository index.
type indexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	State   string `json:"state"`
}

type refusal struct {
	Raised  bool   `json:"raised"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

type checkResult struct {
	ServerLive     bool `json:"server_live"`
	ServerReady    bool `json:"server_ready"`
	ServerMetadata struct {
		Name       string   `json:"name"`
		Version    string   `json:"version"`
		Extensions []string `json:"extensions"`
	} `json:"server_metadata"`
	Models map[string]struct {
		Ready               bool      `json:"ready"`
		UnknownVersionReady bool      `json:"unknown_version_ready"`
		Metadata            modelMeta `json:"metadata"`
		Config              *struct {
			Name         string `json:"name"`
			MaxBatchSize int    `json:"max_batch_size"`
		} `json:"config"`
	} `json:"models"`
	Statistics      []statEntry                           `json:"statistics"`
	RepositoryIndex []indexEntry                          `json:"repository_index"`
	Refusals        map[string]map[string]json.RawMessage `json:"refusals"`
}

// statEntry is one model version's statistics as tritonclient_check.py reports them.
type statEntry struct {
	Name           string `json:"name"`
	Version        string `json:"version"`
	InferenceCount int    `json:"inference_count"`
	ExecutionCount int    `json:"execution_count"`
	SuccessCount   int    `json:"success_count"`
}

// testModel is one served model, its requests' inputs and go/session's outputs for them.
type testModel struct {
	name, path string
	maxBatch   int // its config.json's max_batch_size
	sess       *session.InferenceSession
	requests   []testRequest
}

type testRequest struct {
	inputs  []session.NamedTensor
	files   []checkInput
	outputs []session.Tensor // go/session's, in the order of sess.Outputs()
}

// newRequest draws uniform [-1, 1) inputs of the given shapes (one per model input, in order),
// writes them as .npy files under dir and runs them through go/session for the reference.
func newRequest(t *testing.T, m *testModel, rng *rand.Rand, dir string, shapes ...[]int64) {
	t.Helper()
	var r testRequest
	for i, in := range m.sess.Inputs() {
		shape := shapes[i]
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		data := make([]float32, n)
		for j := range data {
			data[j] = float32(rng.Float64()*2 - 1)
		}
		file := filepath.Join(dir, fmt.Sprintf("%s-%d-%s.npy", m.name, len(m.requests), in.Name))
		if err := writeNpyFloat32(file, shape, data); err != nil {
			t.Fatal(err)
		}
		r.inputs = append(r.inputs, session.NamedTensor{Name: in.Name, Tensor: session.MustTensor(shape, data)})
		r.files = append(r.files, checkInput{Name: in.Name, File: file})
	}
	outs, err := m.sess.Run(context.Background(), r.inputs)
	if err != nil {
		t.Fatalf("go/session run of %s: %v", m.name, err)
	}
	r.outputs = outs
	m.requests = append(m.requests, r)
}

// TestTritonClient serves MNIST and the tiny encoder (with dynamic batching) and runs Triton's
// Python client against them over HTTP (JSON tensors, the binary tensor data extension,
// concurrent requests) and gRPC (raw_input_contents, concurrent requests): health, readiness
// and metadata succeed, every output matches go/session's run of the same inputs, and requests
// the server must refuse are refused with a protocol error while it keeps serving.
func TestTritonClient(t *testing.T) {
	py := tritonPython(t)
	dir := t.TempDir()
	repo := filepath.Join(dir, "models")
	writeModelRepository(t, repo,
		map[string]string{"mnist": mnistModel, "encoder": encoderPath},
		map[string]string{"encoder": `{"max_batch_size": 8, "max_queue_delay_us": 2000}`})

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5e7e))
	models := []*testModel{{name: "mnist", path: mnistModel}, {name: "encoder", path: encoderPath, maxBatch: 8}}
	for _, m := range models {
		s, err := session.Load(m.path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		m.sess = s
	}
	for range 4 {
		newRequest(t, models[0], rng, dir, []int64{1, 1, 28, 28})
	}
	// The encoder's requests differ in batch size; T is the same so the server may batch them.
	for _, b := range []int64{1, 2, 1, 3, 1, 1} {
		newRequest(t, models[1], rng, dir, []int64{b, 5, 64})
	}

	srv := startServer(t, "--model-repository", repo)
	for _, proto := range []struct{ name, addr string }{{"http", srv.httpAddr}, {"grpc", srv.grpcAddr}} {
		t.Run(proto.name, func(t *testing.T) {
			runCheck(t, py, proto.name, proto.addr, dir, models)
		})
	}
	if t.Failed() {
		return
	}
	// The server counted what the clients did: per model, every request of the three HTTP
	// variants and the two gRPC ones, and the valid request after the refusals on each.
	metrics := scrapeMetrics(t, srv.httpAddr)
	for _, m := range models {
		rows := 0.0
		for _, r := range m.requests {
			rows += float64(r.inputs[0].Tensor.Shape()[0])
		}
		first := float64(m.requests[0].inputs[0].Tensor.Shape()[0])
		n := float64(len(m.requests))
		for _, c := range []struct {
			name string
			want float64
		}{{"nv_inference_request_success", 5*n + 2}, {"nv_inference_count", 5*rows + 2*first}} {
			if got, ok := metrics[c.name+"/"+m.name]; !ok || got != c.want {
				t.Errorf("/metrics: %s{model=%q,version=\"1\"} = %v (present %v), want %v", c.name, m.name, got, ok, c.want)
			}
		}
		t.Logf("%s: %v rows in %v executions (dynamic batching: %v)", m.name, metrics["nv_inference_count/"+m.name],
			metrics["nv_inference_exec_count/"+m.name], m.name == "encoder")
	}
}

var metricRE = regexp.MustCompile(`(?m)^(nv_inference_\w+)\{model="([^"]*)",version="1"\} (\S+)$`)

// scrapeMetrics gets GET /metrics and returns Triton's counters of version 1 by "name/model".
func scrapeMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, m := range metricRE.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("/metrics: %s: %v", m[0], err)
		}
		out[m[1]+"/"+m[2]] = v
	}
	return out
}

func runCheck(t *testing.T, py, protocol, addr, dir string, models []*testModel) {
	outDir := filepath.Join(dir, "out")
	spec := checkSpec{OutDir: outDir}
	for _, m := range models {
		cm := checkModel{Name: m.name, Version: "1"}
		for _, r := range m.requests {
			req := checkRequest{Inputs: r.files}
			for _, o := range m.sess.Outputs() {
				req.Outputs = append(req.Outputs, o.Name)
			}
			cm.Requests = append(cm.Requests, req)
		}
		spec.Models = append(spec.Models, cm)
	}
	specFile := filepath.Join(dir, protocol+"-spec.json")
	resultFile := filepath.Join(dir, protocol+"-result.json")
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "tritonclient_check.py", "--protocol", protocol, "--url", addr,
		"--spec", specFile, "--result", resultFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tritonclient_check.py --protocol %s: %v\n%s", protocol, err, out)
	}
	b, err = os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	var res checkResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%s: %v", resultFile, err)
	}
	checkHealth(t, protocol, res, models)
	checkRefusals(t, protocol, res, models)

	variants := map[string][]string{"http": {"http-json", "http-binary", "http-concurrent"}, "grpc": {"grpc-raw", "grpc-concurrent"}}[protocol]
	compared := 0
	for _, v := range variants {
		for _, m := range models {
			for i, r := range m.requests {
				for k, o := range m.sess.Outputs() {
					file := filepath.Join(outDir, v, m.name, strconv.Itoa(i), o.Name+".npy")
					shape, got, err := readNpyFloat32(file)
					if err != nil {
						t.Errorf("%s: %v", v, err)
						continue
					}
					want, err := session.TensorOf[float32](r.outputs[k])
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(shape, r.outputs[k].Shape()) {
						t.Errorf("%s %s request %d output %s: shape %v, go/session's %v", v, m.name, i, o.Name, shape, r.outputs[k].Shape())
						continue
					}
					if j, d := maxMismatch(got, want); j >= 0 {
						t.Errorf("%s %s request %d output %s: element %d is %g, go/session's %g (difference %g)", v, m.name, i, o.Name, j, got[j], want[j], d)
					}
					compared++
				}
			}
		}
	}
	t.Logf("%s: %d outputs match go/session's", protocol, compared)
}

// maxMismatch returns the index and size of the worst element outside |a-b| <= 1e-4 + 1e-4|b|
// (a batched run may sum in another order than a single one), or -1.
func maxMismatch(got, want []float32) (int, float64) {
	worst, idx := 0.0, -1
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) || d > 1e-4+1e-4*math.Abs(float64(want[i])) {
			if idx < 0 || d > worst || math.IsNaN(d) {
				worst, idx = d, i
			}
		}
	}
	return idx, worst
}

func checkHealth(t *testing.T, protocol string, res checkResult, models []*testModel) {
	if !res.ServerLive || !res.ServerReady {
		t.Errorf("%s: server live %v, ready %v; want both true", protocol, res.ServerLive, res.ServerReady)
	}
	if res.ServerMetadata.Name == "" || res.ServerMetadata.Version == "" {
		t.Errorf("%s: server metadata %+v lacks a name or version", protocol, res.ServerMetadata)
	}
	for _, m := range models {
		got, ok := res.Models[m.name]
		if !ok {
			t.Errorf("%s: no result for model %s", protocol, m.name)
			continue
		}
		if !got.Ready {
			t.Errorf("%s: model %s version 1 is not ready", protocol, m.name)
		}
		if got.UnknownVersionReady {
			t.Errorf("%s: model %s version 999 (absent) reports ready", protocol, m.name)
		}
		md := got.Metadata
		if md.Name != m.name {
			t.Errorf("%s: metadata of %s names %q", protocol, m.name, md.Name)
		}
		if len(md.Versions) > 0 && !slices.Contains(md.Versions, "1") {
			t.Errorf("%s: metadata of %s lists versions %v, without 1", protocol, m.name, md.Versions)
		}
		if got.Config == nil || got.Config.Name != m.name || got.Config.MaxBatchSize != m.maxBatch {
			t.Errorf("%s: model config of %s: %+v, want name %s and max_batch_size %d", protocol, m.name, got.Config, m.name, m.maxBatch)
		}
		// The statistics after the client's inferences: every request it made succeeded.
		if i := slices.IndexFunc(res.Statistics, func(e statEntry) bool {
			return e.Name == m.name && e.Version == "1"
		}); i < 0 {
			t.Errorf("%s: the statistics %+v have no entry for %s version 1", protocol, res.Statistics, m.name)
		} else if e := res.Statistics[i]; e.SuccessCount == 0 || e.ExecutionCount == 0 || e.InferenceCount < e.SuccessCount {
			t.Errorf("%s: statistics of %s: %+v, want successes, executions and at least one inference a success", protocol, m.name, e)
		}
		if !slices.ContainsFunc(res.RepositoryIndex, func(e indexEntry) bool {
			return e.Name == m.name && (e.Version == "" || e.Version == "1") && e.State == "READY"
		}) {
			t.Errorf("%s: the repository index %+v does not list %s version 1 READY", protocol, res.RepositoryIndex, m.name)
		}
		checkTensorMeta(t, protocol, m.name, "input", md.Inputs, m.sess.Inputs())
		checkTensorMeta(t, protocol, m.name, "output", md.Outputs, m.sess.Outputs())
	}
}

// checkTensorMeta compares the metadata's tensors with the model's: the same names in order,
// FP32, the same rank, and every static dimension either that size or -1 (dynamic).
func checkTensorMeta(t *testing.T, protocol, model, kind string, got []tensorMeta, want []session.IOMeta) {
	if len(got) != len(want) {
		t.Errorf("%s: metadata of %s has %d %ss, the model %d", protocol, model, len(got), kind, len(want))
		return
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Datatype != "FP32" {
			t.Errorf("%s: metadata of %s %s %d: %s %s, want %s FP32", protocol, model, kind, i, g.Name, g.Datatype, w.Name)
		}
		if len(g.Shape) != len(w.Shape) {
			t.Errorf("%s: metadata of %s %s %s: shape %s, rank %d want %d", protocol, model, kind, g.Name, shapeString(g.Shape), len(g.Shape), len(w.Shape))
			continue
		}
		for j, d := range w.Shape {
			v, err := strconv.ParseInt(strings.Trim(string(g.Shape[j]), `"`), 10, 64)
			if err != nil || (v != -1 && (!d.Known() || v != d.Value)) {
				t.Errorf("%s: metadata of %s %s %s: shape %s, model's %v", protocol, model, kind, g.Name, shapeString(g.Shape), w.Shape)
				break
			}
		}
	}
}

func shapeString(s []json.RawMessage) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = string(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// checkRefusals: each request the server must refuse raised a protocol error with a message,
// and the server answered the next valid request.
func checkRefusals(t *testing.T, protocol string, res checkResult, models []*testModel) {
	for _, m := range models {
		rs, ok := res.Refusals[m.name]
		if !ok {
			t.Errorf("%s: no refusal results for %s", protocol, m.name)
			continue
		}
		for _, c := range []struct {
			name, mention string
			codes         []string // acceptable HTTP statuses / gRPC codes
		}{
			{"unknown_model", "no_such_model", []string{"404", "400", "StatusCode.NOT_FOUND", "StatusCode.INVALID_ARGUMENT"}},
			{"unknown_version", "999", []string{"404", "400", "StatusCode.NOT_FOUND", "StatusCode.INVALID_ARGUMENT"}},
			{"unknown_model_metadata", "no_such_model", []string{"404", "400", "StatusCode.NOT_FOUND", "StatusCode.INVALID_ARGUMENT"}},
			{"wrong_datatype", "INT32", []string{"400", "StatusCode.INVALID_ARGUMENT"}},
			{"shape_mismatch", "", []string{"400", "StatusCode.INVALID_ARGUMENT"}},
		} {
			var r refusal
			if err := json.Unmarshal(rs[c.name], &r); err != nil {
				t.Errorf("%s %s %s: %v", protocol, m.name, c.name, err)
				continue
			}
			switch {
			case !r.Raised:
				t.Errorf("%s %s: the server accepted the %s request", protocol, m.name, c.name)
			case r.Message == "" || !strings.Contains(r.Message, c.mention):
				t.Errorf("%s %s %s: message %q does not name %q", protocol, m.name, c.name, r.Message, c.mention)
			case !slices.Contains(c.codes, r.Status):
				t.Errorf("%s %s %s: status %s (%q), want one of %v", protocol, m.name, c.name, r.Status, r.Message, c.codes)
			}
		}
		if string(rs["served_after"]) != "true" {
			t.Errorf("%s %s: no valid request answered after the refusals", protocol, m.name)
		}
	}
}
