package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	pb "github.com/loomrt/loom/go/serve/inferencepb"
	"github.com/loomrt/loom/go/session"
)

// twoModels is a repository with MNIST (no batch dimension) and the encoder (batching on).
func twoModels(t testing.TB) string {
	return writeRepo(t, map[string]repoModel{
		"mnist":   {file: mnistPath},
		"encoder": {file: encoderPath, config: `{"max_batch_size": 8, "max_queue_delay_us": 1000}`},
	})
}

func TestHealthAndMetadata(t *testing.T) {
	ts := startServer(t, WithModelRepository(twoModels(t)))
	for _, path := range []string{"/v2/health/live", "/v2/health/ready", "/v2/models/mnist/ready", "/v2/models/mnist/versions/1/ready"} {
		resp, err := http.Get(ts.url + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	var md modelMetadata
	getJSON(t, ts.url+"/v2/models/encoder", http.StatusOK, &md)
	assert.Equal(t, modelMetadata{Name: "encoder", Versions: []string{"1"}, Platform: "onnx",
		Inputs:  []tensorMeta{{Name: "x", Datatype: "FP32", Shape: []int64{-1, -1, 64}}},
		Outputs: []tensorMeta{{Name: "y", Datatype: "FP32", Shape: []int64{-1, -1, 64}}}}, md)
	var sm map[string]any
	getJSON(t, ts.url+"/v2", http.StatusOK, &sm)
	assert.Equal(t, "loom", sm["name"])
	var cfg map[string]any
	getJSON(t, ts.url+"/v2/models/encoder/config", http.StatusOK, &cfg)
	assert.EqualValues(t, 8, cfg["max_batch_size"])

	ctx := context.Background()
	live, err := ts.client.ServerLive(ctx, &pb.ServerLiveRequest{})
	require.NoError(t, err)
	assert.True(t, live.Live)
	ready, err := ts.client.ServerReady(ctx, &pb.ServerReadyRequest{})
	require.NoError(t, err)
	assert.True(t, ready.Ready)
	mr, err := ts.client.ModelReady(ctx, &pb.ModelReadyRequest{Name: "mnist", Version: "1"})
	require.NoError(t, err)
	assert.True(t, mr.Ready)
	mr, err = ts.client.ModelReady(ctx, &pb.ModelReadyRequest{Name: "nope"})
	require.NoError(t, err)
	assert.False(t, mr.Ready)
	smd, err := ts.client.ServerMetadata(ctx, &pb.ServerMetadataRequest{})
	require.NoError(t, err)
	assert.Equal(t, "loom", smd.Name)
	assert.Contains(t, smd.Extensions, "binary_tensor_data")
	gmd, err := ts.client.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "mnist"})
	require.NoError(t, err)
	assert.Equal(t, "Input3", gmd.Inputs[0].Name)
	assert.Equal(t, []int64{1, 1, 28, 28}, gmd.Inputs[0].Shape)
	assert.Equal(t, "FP32", gmd.Outputs[0].Datatype)
}

func getJSON(t testing.TB, url string, status int, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "%s: %s", url, b)
	require.NoError(t, json.Unmarshal(b, v), "%s", b)
}

// The REST API's JSON and binary forms, and gRPC's raw and typed contents, give the session's
// outputs on random inputs.
func TestInferMatchesSession(t *testing.T) {
	ts := startServer(t, WithModelRepository(twoModels(t)))
	rng := newRand(t)
	ctx := context.Background()
	for range 3 {
		x := mnistInput(rng)
		want := floatsOf(t, reference(t, mnistPath, session.NamedTensor{Name: mnistIn, Tensor: x})[0])

		// JSON in, JSON out (nested data for once).
		in := jsonInput(mnistIn, x)
		res, err := post(ctx, t, ts.url+"/v2/models/mnist/infer", map[string]any{"id": "r1", "inputs": []any{in}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.status, res.errorText())
		assert.Equal(t, "r1", res.body["id"])
		assert.Equal(t, "application/json", res.header.Get("Content-Type"))
		assert.Equal(t, []int64{1, 10}, res.outputs[mnistOut].shape)
		requireClose(t, want, res.floats(t, mnistOut), "REST JSON")

		// Binary in and out, as tritonclient.http sends by default.
		req := map[string]any{
			"inputs":     []any{map[string]any{"name": mnistIn, "datatype": "FP32", "shape": []int64{1, 1, 28, 28}, "parameters": map[string]any{"binary_data_size": 784 * 4}}},
			"parameters": map[string]any{"binary_data_output": true},
		}
		res, err = post(ctx, t, ts.url+"/v2/models/mnist/versions/1/infer", req, rawOf(t, x))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.status, res.errorText())
		require.NotNil(t, res.outputs[mnistOut].raw, "binary output")
		requireClose(t, want, res.floats(t, mnistOut), "REST binary")

		// A requested output with binary_data false comes back as JSON.
		req["outputs"] = []any{map[string]any{"name": mnistOut, "parameters": map[string]any{"binary_data": false}}}
		res, err = post(ctx, t, ts.url+"/v2/models/mnist/infer", req, rawOf(t, x))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.status, res.errorText())
		require.Nil(t, res.outputs[mnistOut].raw)
		requireClose(t, want, res.floats(t, mnistOut), "REST binary in, JSON out")

		// gRPC, raw contents.
		gr, err := grpcInfer(ctx, ts.client, "mnist", session.NamedTensor{Name: mnistIn, Tensor: x})
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 10}, gr.Outputs[0].Shape)
		requireClose(t, want, grpcFloats(t, gr, 0), "gRPC raw")

		// gRPC, typed contents, the output asked for by name.
		gr, err = ts.client.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "mnist", ModelVersion: "1", Id: "g1",
			Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: mnistIn, Datatype: "FP32", Shape: []int64{1, 1, 28, 28},
				Contents: &pb.InferTensorContents{Fp32Contents: floatsOf(t, x)}}},
			Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: mnistOut}}})
		require.NoError(t, err)
		assert.Equal(t, "g1", gr.Id)
		requireClose(t, want, grpcFloats(t, gr, 0), "gRPC typed")
	}
	// The encoder, whose batch and sequence dimensions are symbolic.
	for _, steps := range []int64{3, 7} {
		x := encoderInput(rng, 2, steps)
		want := floatsOf(t, reference(t, encoderPath, session.NamedTensor{Name: "x", Tensor: x})[0])
		res, err := post(ctx, t, ts.url+"/v2/models/encoder/infer", map[string]any{"inputs": []any{jsonInput("x", x)}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.status, res.errorText())
		assert.Equal(t, []int64{2, steps, 64}, res.outputs["y"].shape)
		requireClose(t, want, res.floats(t, "y"), "encoder REST")
		gr, err := grpcInfer(ctx, ts.client, "encoder", session.NamedTensor{Name: "x", Tensor: x})
		require.NoError(t, err)
		requireClose(t, want, grpcFloats(t, gr, 0), "encoder gRPC")
	}
}

// identityModel has one Identity per datatype, each [N, 2] with a symbolic N.
func identityModel(t testing.TB) []byte {
	t.Helper()
	g := &graph.Graph{Name: "identities"}
	for _, d := range []session.DType{graph.Bool, graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64, graph.Int8, graph.Int16,
		graph.Int32, graph.Int64, graph.Float16, graph.BFloat16, graph.Double, graph.String} {
		name := datatypeOf[d]
		shape := graph.Shape{graph.SymDim("N"), graph.DimOf(2)}
		g.Inputs = append(g.Inputs, graph.Input("in_"+name, graph.TensorType(d, shape)))
		g.Outputs = append(g.Outputs, graph.Output("out_"+name, graph.TensorType(d, shape)))
		g.Nodes = append(g.Nodes, graph.NewNode("id_"+name, "Identity", []string{"in_" + name}, []string{"out_" + name}))
	}
	m, err := graph.FromGraph("identities", g, map[string]int64{"": 17})
	require.NoError(t, err)
	b, err := m.Marshal()
	require.NoError(t, err)
	return b
}

// Every datatype round-trips through JSON, binary and gRPC (raw and typed) unchanged.
func TestDatatypesRoundTrip(t *testing.T) {
	ts := startServer(t, WithModelBytes("ids", "1", identityModel(t), ModelConfig{MaxBatchSize: 4}))
	values := map[string]any{
		"BOOL": []bool{true, false, false, true}, "UINT8": []uint8{0, 1, 200, 255}, "UINT16": []uint16{0, 1, 60000, 7},
		"UINT32": []uint32{0, 1, 4000000000, 9}, "UINT64": []uint64{0, 1, 1 << 63, 5}, "INT8": []int8{-128, 0, 5, 127},
		"INT16": []int16{-32768, 1, 2, 32767}, "INT32": []int32{-5, 0, 1 << 30, 3}, "INT64": []int64{-1 << 62, 0, 1<<53 + 1, 7},
		"FP16": []session.Float16{session.ToFloat16(1.5), session.ToFloat16(-2), session.ToFloat16(0), session.ToFloat16(65504)},
		"BF16": []session.BFloat16{session.ToBFloat16(1.5), session.ToBFloat16(-2), session.ToBFloat16(0), session.ToBFloat16(3)},
		"FP64": []float64{1.25, -1e300, 0, 3.5}, "BYTES": []string{"a", "", "héllo", "\x00bin"},
	}
	var inputs []session.NamedTensor
	var jsonInputs, binInputs []any
	var chunks [][]byte
	for name, v := range values {
		x, err := makeTensor([]int64{2, 2}, v)
		require.NoError(t, err)
		inputs = append(inputs, session.NamedTensor{Name: "in_" + name, Tensor: x})
		jsonInputs = append(jsonInputs, jsonInput("in_"+name, x))
		raw := rawOf(t, x)
		binInputs = append(binInputs, map[string]any{"name": "in_" + name, "datatype": name, "shape": []int64{2, 2}, "parameters": map[string]any{"binary_data_size": len(raw)}})
		chunks = append(chunks, raw)
	}
	ctx := context.Background()
	check := func(what string, got map[string][]byte) {
		for _, in := range inputs {
			name := in.Name[len("in_"):]
			assert.Equal(t, rawOf(t, in.Tensor), got["out_"+name], "%s: %s", what, name)
		}
	}
	// JSON outputs: re-encode them through the server's own decoder to compare bytes.
	res, err := post(ctx, t, ts.url+"/v2/models/ids/infer", map[string]any{"inputs": jsonInputs})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.status, res.errorText())
	got := map[string][]byte{}
	for name, o := range res.outputs {
		d, err := parseDatatype(o.datatype)
		require.NoError(t, err)
		data, err := json.Marshal(o.json)
		require.NoError(t, err)
		x, err := decodeJSONData(d, o.shape, data)
		require.NoError(t, err, name)
		got[name] = rawOf(t, x)
	}
	check("REST JSON", got)

	res, err = post(ctx, t, ts.url+"/v2/models/ids/infer", map[string]any{"inputs": binInputs, "parameters": map[string]any{"binary_data_output": true}}, chunks...)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.status, res.errorText())
	got = map[string][]byte{}
	for name, o := range res.outputs {
		got[name] = o.raw
	}
	check("REST binary", got)

	gr, err := grpcInfer(ctx, ts.client, "ids", inputs...)
	require.NoError(t, err)
	got = map[string][]byte{}
	for i, o := range gr.Outputs {
		got[o.Name] = gr.RawOutputContents[i]
	}
	check("gRPC raw", got)

	// Typed contents, for the datatypes that have a field.
	typed := &pb.ModelInferRequest{ModelName: "ids"}
	for _, in := range inputs {
		c := &pb.InferTensorContents{}
		switch v := in.Tensor.Data().(type) {
		case []bool:
			c.BoolContents = v
		case []uint8:
			for _, e := range v {
				c.UintContents = append(c.UintContents, uint32(e))
			}
		case []uint16:
			for _, e := range v {
				c.UintContents = append(c.UintContents, uint32(e))
			}
		case []uint32:
			c.UintContents = v
		case []uint64:
			c.Uint64Contents = v
		case []int8:
			for _, e := range v {
				c.IntContents = append(c.IntContents, int32(e))
			}
		case []int16:
			for _, e := range v {
				c.IntContents = append(c.IntContents, int32(e))
			}
		case []int32:
			c.IntContents = v
		case []int64:
			c.Int64Contents = v
		case []float64:
			c.Fp64Contents = v
		case []string:
			for _, e := range v {
				c.BytesContents = append(c.BytesContents, []byte(e))
			}
		default:
			continue // FP16 and BF16 have no typed field: fed below as a separate request
		}
		typed.Inputs = append(typed.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: in.Name, Datatype: datatypeOf[in.Tensor.DType()], Shape: []int64{2, 2}, Contents: c})
	}
	_, err = ts.client.ModelInfer(ctx, typed)
	require.Error(t, err, "the FP16 and BF16 inputs are missing")
	assert.Contains(t, err.Error(), "is missing")
	for _, in := range inputs {
		if d := in.Tensor.DType(); d == graph.Float16 || d == graph.BFloat16 {
			typed.Inputs = append(typed.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: in.Name, Datatype: datatypeOf[d], Shape: []int64{2, 2},
				Contents: &pb.InferTensorContents{}})
		}
	}
	_, err = ts.client.ModelInfer(ctx, typed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no typed contents field; send it in raw_input_contents")
}

func TestRepositoryLoadUnload(t *testing.T) {
	ts := startServer(t, WithModelRepository(twoModels(t)))
	ctx := context.Background()
	idx, err := ts.client.RepositoryIndex(ctx, &pb.RepositoryIndexRequest{})
	require.NoError(t, err)
	require.Len(t, idx.Models, 2)
	assert.Equal(t, "encoder", idx.Models[0].Name)
	assert.Equal(t, "READY", idx.Models[1].State)

	_, err = ts.client.RepositoryModelUnload(ctx, &pb.RepositoryModelUnloadRequest{ModelName: "mnist"})
	require.NoError(t, err)
	rng := newRand(t)
	_, err = grpcInfer(ctx, ts.client, "mnist", session.NamedTensor{Name: mnistIn, Tensor: mnistInput(rng)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown model "mnist"`)
	var rows []modelIndex
	resp, err := http.Post(ts.url+"/v2/repository/index", "application/json", nil)
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rows))
	resp.Body.Close()
	assert.Contains(t, rows, modelIndex{Name: "mnist", State: "UNAVAILABLE", Reason: "unloaded"})

	resp, err = http.Post(ts.url+"/v2/repository/models/mnist/load", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = grpcInfer(ctx, ts.client, "mnist", session.NamedTensor{Name: mnistIn, Tensor: mnistInput(rng)})
	require.NoError(t, err)

	_, err = ts.client.RepositoryModelLoad(ctx, &pb.RepositoryModelLoadRequest{ModelName: "../etc"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NotFound")
	resp, err = http.Post(ts.url+"/v2/repository/models/nope/unload", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// Bad repositories and configurations fail New, naming the model and what is wrong.
func TestRepositoryErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		models map[string]repoModel
		want   string
	}{
		{"unknown config field", map[string]repoModel{"m": {file: mnistPath, config: `{"max_batch": 4}`}}, `unknown field "max_batch"`},
		{"batching without a batch dimension", map[string]repoModel{"m": {file: mnistPath, config: `{"max_batch_size": 4}`}}, `model "m": max_batch_size 4 needs a variable first (batch) dimension, but "Input3" is [1,1,28,28]`},
		{"bad provider", map[string]repoModel{"m": {file: mnistPath, config: `{"provider": "tpu"}`}}, `provider "tpu"`},
		{"not a model", map[string]repoModel{"m": {onnx: []byte("not onnx")}}, `model "m" version 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(WithModelRepository(writeRepo(t, tc.models)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := New(WithModelRepository(t.TempDir() + "/missing"))
	assert.ErrorContains(t, err, "model repository")
	_, err = New(WithModelDir(t.TempDir(), "m"))
	assert.ErrorContains(t, err, "model.onnx")
}

// A directory holding model.onnx itself (KServe's /mnt/models) is served under the given name.
func TestModelDir(t *testing.T) {
	dir := writeRepo(t, map[string]repoModel{"m": {file: mnistPath}})
	ts := startServer(t, WithModelDir(dir+"/m/1", "digits"))
	rng := newRand(t)
	x := mnistInput(rng)
	gr, err := grpcInfer(context.Background(), ts.client, "digits", session.NamedTensor{Name: mnistIn, Tensor: x})
	require.NoError(t, err)
	requireClose(t, floatsOf(t, reference(t, mnistPath, session.NamedTensor{Name: mnistIn, Tensor: x})[0]), grpcFloats(t, gr, 0), "model dir")
}
