package serve

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loomrt/loom/go/serve/inferencepb"
	"github.com/loomrt/loom/go/session"
)

// The model configuration over REST and gRPC: the same description, Triton's field meanings.
func TestModelConfiguration(t *testing.T) {
	ts := startServer(t, WithModelRepository(writeRepo(t, map[string]repoModel{
		"mnist":   {file: mnistPath},
		"encoder": {file: encoderPath, config: `{"max_batch_size": 8, "max_queue_delay_us": 1000, "instances": 3}`},
	})))
	var enc modelConfiguration
	getJSON(t, ts.url+"/v2/models/encoder/versions/1/config", http.StatusOK, &enc)
	assert.Equal(t, modelConfiguration{Name: "encoder", Platform: Platform, Backend: "loom", MaxBatchSize: 8,
		Input:           []ioConfig{{Name: "x", DataType: "TYPE_FP32", Dims: []int64{-1, 64}}},
		Output:          []ioConfig{{Name: "y", DataType: "TYPE_FP32", Dims: []int64{-1, 64}}},
		InstanceGroup:   []instanceGroup{{Name: "encoder", Kind: "KIND_CPU", Count: 3}},
		DynamicBatching: &dynamicBatching{PreferredBatchSize: []int{1, 2, 4, 8}, MaxQueueDelayMicroseconds: 1000}}, enc)
	var mn modelConfiguration
	getJSON(t, ts.url+"/v2/models/mnist/config", http.StatusOK, &mn)
	assert.Zero(t, mn.MaxBatchSize, "a model the server does not batch")
	assert.Nil(t, mn.DynamicBatching)
	assert.Equal(t, []int64{1, 1, 28, 28}, mn.Input[0].Dims)

	ctx := context.Background()
	g, err := ts.client.ModelConfig(ctx, &pb.ModelConfigRequest{Name: "encoder"})
	require.NoError(t, err)
	c := g.GetConfig()
	assert.Equal(t, "encoder", c.Name)
	assert.Equal(t, Platform, c.Platform)
	assert.Equal(t, "loom", c.Backend)
	assert.EqualValues(t, 8, c.MaxBatchSize)
	require.Len(t, c.Input, 1)
	assert.Equal(t, pb.DataType_TYPE_FP32, c.Input[0].DataType)
	assert.Equal(t, []int64{-1, 64}, c.Input[0].Dims)
	assert.Equal(t, []int64{-1, 64}, c.Output[0].Dims)
	require.Len(t, c.InstanceGroup, 1)
	assert.Equal(t, pb.ModelInstanceGroup_KIND_CPU, c.InstanceGroup[0].Kind)
	assert.EqualValues(t, 3, c.InstanceGroup[0].Count)
	assert.EqualValues(t, 1000, c.DynamicBatching.GetMaxQueueDelayMicroseconds())
	assert.Equal(t, []int32{1, 2, 4, 8}, c.DynamicBatching.GetPreferredBatchSize())

	_, err = ts.client.ModelConfig(ctx, &pb.ModelConfigRequest{Name: "nope"})
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = ts.client.ModelConfig(ctx, &pb.ModelConfigRequest{Name: "mnist", Version: "7"})
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	var e map[string]string
	getJSON(t, ts.url+"/v2/models/nope/config", http.StatusNotFound, &e)
	assert.Contains(t, e["error"], `unknown model "nope"`)
}

// Statistics count what the server did: requests, inferences, executions, failures, batch
// sizes; the same figures over REST and gRPC.
func TestModelStatistics(t *testing.T) {
	ts := startServer(t, WithModelRepository(twoModels(t)))
	rng := newRand(t)
	ctx := context.Background()

	var st struct {
		ModelStats []modelStatistics `json:"model_stats"`
	}
	getJSON(t, ts.url+"/v2/models/stats", http.StatusOK, &st)
	require.Len(t, st.ModelStats, 2)
	assert.Equal(t, "encoder", st.ModelStats[0].Name)
	assert.Equal(t, "mnist", st.ModelStats[1].Name)
	assert.Zero(t, st.ModelStats[1].LastInference)
	assert.Empty(t, st.ModelStats[1].BatchStats)

	before := time.Now().UnixMilli()
	for range 3 {
		_, err := grpcInfer(ctx, ts.client, "mnist", session.NamedTensor{Name: mnistIn, Tensor: mnistInput(rng)})
		require.NoError(t, err)
	}
	// A request whose data does not fit its shape fails before it runs: a failure, no execution.
	_, err := ts.client.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "mnist", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: mnistIn, Datatype: "FP32", Shape: []int64{1, 1, 28, 28}}}, RawInputContents: [][]byte{make([]byte, 12)}})
	require.Error(t, err)
	// Two encoder rows in one request: two inferences, one execution of batch size 2.
	_, err = grpcInfer(ctx, ts.client, "encoder", session.NamedTensor{Name: "x", Tensor: encoderInput(rng, 2, 5)})
	require.NoError(t, err)

	getJSON(t, ts.url+"/v2/models/mnist/versions/1/stats", http.StatusOK, &st)
	require.Len(t, st.ModelStats, 1)
	m := st.ModelStats[0]
	assert.Equal(t, "mnist", m.Name)
	assert.Equal(t, "1", m.Version)
	assert.EqualValues(t, 3, m.InferenceCount)
	assert.EqualValues(t, 3, m.ExecutionCount)
	assert.EqualValues(t, 3, m.InferenceStats.Success.Count)
	assert.EqualValues(t, 1, m.InferenceStats.Fail.Count)
	assert.EqualValues(t, 3, m.InferenceStats.ComputeInfer.Count)
	assert.NotZero(t, m.InferenceStats.ComputeInfer.NS)
	assert.GreaterOrEqual(t, m.InferenceStats.Success.NS, m.InferenceStats.ComputeInfer.NS, "a request's time includes its run's")
	assert.GreaterOrEqual(t, m.LastInference, uint64(before))
	require.Len(t, m.BatchStats, 1)
	assert.EqualValues(t, 1, m.BatchStats[0].BatchSize)
	assert.EqualValues(t, 3, m.BatchStats[0].ComputeInfer.Count)

	g, err := ts.client.ModelStatistics(ctx, &pb.ModelStatisticsRequest{Name: "encoder"})
	require.NoError(t, err)
	require.Len(t, g.ModelStats, 1)
	e := g.ModelStats[0]
	assert.EqualValues(t, 2, e.InferenceCount)
	assert.EqualValues(t, 1, e.ExecutionCount)
	assert.EqualValues(t, 1, e.InferenceStats.GetSuccess().GetCount())
	require.Len(t, e.BatchStats, 1)
	assert.EqualValues(t, 2, e.BatchStats[0].BatchSize)

	all, err := ts.client.ModelStatistics(ctx, &pb.ModelStatisticsRequest{})
	require.NoError(t, err)
	require.Len(t, all.ModelStats, 2)
	assert.EqualValues(t, 3, all.ModelStats[1].InferenceCount)

	_, err = ts.client.ModelStatistics(ctx, &pb.ModelStatisticsRequest{Name: "nope"})
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = ts.client.ModelStatistics(ctx, &pb.ModelStatisticsRequest{Version: "1"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	var bad map[string]string
	getJSON(t, ts.url+"/v2/models/mnist/versions/9/stats", http.StatusNotFound, &bad)
	assert.Contains(t, bad["error"], `has no version "9"`)
}
