package serve

import (
	"context"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/go/graph"
	pb "github.com/loomrt/loom/go/serve/inferencepb"
	"github.com/loomrt/loom/go/session"
)

// grpcService implements inference.GRPCInferenceService over a Server.
type grpcService struct {
	pb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

func grpcError(err error) error {
	e := asError(err)
	return status.Error(e.GRPCCode(), e.msg)
}

func (g *grpcService) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	return &pb.ServerReadyResponse{Ready: g.s.Ready()}, nil
}

func (g *grpcService) ModelReady(_ context.Context, req *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	_, err := g.s.lookup(req.GetName(), req.GetVersion())
	return &pb.ModelReadyResponse{Ready: err == nil && g.s.Ready()}, nil
}

func (g *grpcService) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	return &pb.ServerMetadataResponse{Name: g.s.cfg.serverName, Version: g.s.cfg.serverVersion, Extensions: extensions}, nil
}

func (g *grpcService) ModelMetadata(_ context.Context, req *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	m, err := g.s.lookup(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	md := g.s.metadataOf(m)
	resp := &pb.ModelMetadataResponse{Name: md.Name, Versions: md.Versions, Platform: md.Platform}
	for _, t := range md.Inputs {
		resp.Inputs = append(resp.Inputs, &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	for _, t := range md.Outputs {
		resp.Outputs = append(resp.Outputs, &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	return resp, nil
}

// ModelConfig answers the model configuration extension (the fields of modelConfiguration).
func (g *grpcService) ModelConfig(_ context.Context, req *pb.ModelConfigRequest) (*pb.ModelConfigResponse, error) {
	m, err := g.s.lookup(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	c := m.config()
	dtype := func(name string) pb.DataType { return pb.DataType(pb.DataType_value[name]) }
	cfg := &pb.ModelConfig{Name: c.Name, Platform: c.Platform, Backend: c.Backend, MaxBatchSize: int32(c.MaxBatchSize)}
	for _, io := range c.Input {
		cfg.Input = append(cfg.Input, &pb.ModelInput{Name: io.Name, DataType: dtype(io.DataType), Dims: io.Dims})
	}
	for _, io := range c.Output {
		cfg.Output = append(cfg.Output, &pb.ModelOutput{Name: io.Name, DataType: dtype(io.DataType), Dims: io.Dims})
	}
	for _, ig := range c.InstanceGroup {
		cfg.InstanceGroup = append(cfg.InstanceGroup, &pb.ModelInstanceGroup{Name: ig.Name, Count: int32(ig.Count),
			Kind: pb.ModelInstanceGroup_Kind(pb.ModelInstanceGroup_Kind_value[ig.Kind])})
	}
	if db := c.DynamicBatching; db != nil {
		cfg.DynamicBatching = &pb.ModelDynamicBatching{MaxQueueDelayMicroseconds: uint64(db.MaxQueueDelayMicroseconds)}
		for _, p := range db.PreferredBatchSize {
			cfg.DynamicBatching.PreferredBatchSize = append(cfg.DynamicBatching.PreferredBatchSize, int32(p))
		}
	}
	return &pb.ModelConfigResponse{Config: cfg}, nil
}

// ModelStatistics answers the statistics extension.
func (g *grpcService) ModelStatistics(_ context.Context, req *pb.ModelStatisticsRequest) (*pb.ModelStatisticsResponse, error) {
	sts, err := g.s.statistics(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	dur := func(d duration) *pb.StatisticDuration { return &pb.StatisticDuration{Count: d.Count, Ns: d.NS} }
	resp := &pb.ModelStatisticsResponse{}
	for _, st := range sts {
		is := st.InferenceStats
		e := &pb.ModelStatistics{Name: st.Name, Version: st.Version, LastInference: st.LastInference,
			InferenceCount: st.InferenceCount, ExecutionCount: st.ExecutionCount,
			InferenceStats: &pb.InferStatistics{Success: dur(is.Success), Fail: dur(is.Fail), Queue: dur(is.Queue),
				ComputeInput: dur(is.ComputeInput), ComputeInfer: dur(is.ComputeInfer), ComputeOutput: dur(is.ComputeOutput),
				CacheHit: dur(is.CacheHit), CacheMiss: dur(is.CacheMiss)}}
		for _, b := range st.BatchStats {
			e.BatchStats = append(e.BatchStats, &pb.InferBatchStatistics{BatchSize: b.BatchSize, ComputeInput: dur(b.ComputeInput),
				ComputeInfer: dur(b.ComputeInfer), ComputeOutput: dur(b.ComputeOutput)})
		}
		resp.ModelStats = append(resp.ModelStats, e)
	}
	return resp, nil
}

func (g *grpcService) RepositoryIndex(_ context.Context, req *pb.RepositoryIndexRequest) (*pb.RepositoryIndexResponse, error) {
	resp := &pb.RepositoryIndexResponse{}
	for _, e := range g.s.index(req.GetReady()) {
		resp.Models = append(resp.Models, &pb.RepositoryIndexResponse_ModelIndex{Name: e.Name, Version: e.Version, State: e.State, Reason: e.Reason})
	}
	return resp, nil
}

func (g *grpcService) RepositoryModelLoad(_ context.Context, req *pb.RepositoryModelLoadRequest) (*pb.RepositoryModelLoadResponse, error) {
	if err := g.s.LoadModel(req.GetModelName()); err != nil {
		return nil, grpcError(err)
	}
	return &pb.RepositoryModelLoadResponse{}, nil
}

func (g *grpcService) RepositoryModelUnload(_ context.Context, req *pb.RepositoryModelUnloadRequest) (*pb.RepositoryModelUnloadResponse, error) {
	if err := g.s.UnloadModel(req.GetModelName()); err != nil {
		return nil, grpcError(err)
	}
	return &pb.RepositoryModelUnloadResponse{}, nil
}

// mdCarrier reads W3C trace context from incoming gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

func (g *grpcService) ModelInfer(ctx context.Context, req *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = propagator.Extract(ctx, mdCarrier(md))
	}
	ctx, span := g.s.startSpan(ctx, "ModelInfer")
	defer span.End()
	if err := g.s.begin(); err != nil {
		return nil, grpcError(err)
	}
	defer g.s.inflight.Done()
	m, err := g.s.lookup(req.GetModelName(), req.GetModelVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	ir, err := decodeGRPC(m, req)
	if err != nil {
		g.s.metrics.request(m, false, 0, 0, 0, 0)
		return nil, grpcError(err)
	}
	resp, err := g.s.infer(ctx, ir, m)
	if err != nil {
		return nil, grpcError(err)
	}
	out := &pb.ModelInferResponse{ModelName: m.name, ModelVersion: m.version, Id: resp.id}
	for i, name := range resp.names {
		t := resp.outputs[i]
		raw, err := encodeRaw(nil, t)
		if err != nil {
			return nil, grpcError(errorf(kindInternal, "model %q output %q: %v", m.name, name, err))
		}
		out.Outputs = append(out.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: datatypeOf[t.DType()], Shape: t.Shape()})
		out.RawOutputContents = append(out.RawOutputContents, raw)
	}
	return out, nil
}

// decodeGRPC decodes a ModelInferRequest's inputs (raw_input_contents or the typed contents),
// requested outputs and timeout parameter.
func decodeGRPC(m *model, req *pb.ModelInferRequest) (*inferRequest, error) {
	ir := &inferRequest{model: m.name, version: m.version, id: req.GetId()}
	raw := req.GetRawInputContents()
	if len(raw) > 0 && len(raw) != len(req.GetInputs()) {
		return nil, errorf(kindInvalid, "model %q: %d raw_input_contents for %d inputs (give one per input, in order, or none)", m.name, len(raw), len(req.GetInputs()))
	}
	if p, ok := req.GetParameters()["timeout"]; ok {
		us := p.GetInt64Param()
		if us <= 0 {
			us = int64(min(p.GetUint64Param(), math.MaxInt64))
		}
		if us < 0 {
			return nil, errorf(kindInvalid, "model %q: parameter \"timeout\" must be a non-negative integer (microseconds)", m.name)
		}
		ir.timeout = time.Duration(us) * time.Microsecond
	}
	for i, in := range req.GetInputs() {
		bad := func(format string, args ...any) error {
			return errorf(kindInvalid, "model %q input %q: %s", m.name, in.GetName(), fmt.Sprintf(format, args...))
		}
		if in.GetName() == "" {
			return nil, errorf(kindInvalid, "model %q: input %d has no name", m.name, i)
		}
		d, err := parseDatatype(in.GetDatatype())
		if err != nil {
			return nil, bad("%v", err)
		}
		var t session.Tensor
		if len(raw) > 0 {
			if in.GetContents() != nil {
				return nil, bad("has contents, but the request uses raw_input_contents")
			}
			t, err = decodeRaw(d, in.GetShape(), raw[i])
		} else {
			t, err = decodeContents(d, in.GetShape(), in.GetContents())
		}
		if err != nil {
			return nil, bad("%v", err)
		}
		ir.inputs = append(ir.inputs, session.NamedTensor{Name: in.GetName(), Tensor: t})
	}
	for _, o := range req.GetOutputs() {
		if _, ok := o.GetParameters()["classification"]; ok {
			return nil, errorf(kindInvalid, "model %q output %q: the classification extension is not supported", m.name, o.GetName())
		}
		ir.outputs = append(ir.outputs, o.GetName())
	}
	return ir, nil
}

// decodeContents decodes an input's typed contents field.
func decodeContents(d session.DType, shape []int64, c *pb.InferTensorContents) (session.Tensor, error) {
	n, err := elementCount(shape)
	if err != nil {
		return session.Tensor{}, err
	}
	if c == nil {
		return session.Tensor{}, fmt.Errorf("no contents and no raw_input_contents")
	}
	count := func(have int, field string) error {
		if have != n {
			return fmt.Errorf("shape %v has %d elements but %s has %d", shape, n, field, have)
		}
		return nil
	}
	switch d {
	case graph.Bool:
		if err := count(len(c.BoolContents), "bool_contents"); err != nil {
			return session.Tensor{}, err
		}
		return session.NewTensor(shape, append([]bool(nil), c.BoolContents...))
	case graph.Int8:
		return narrowInts[int8](shape, c.IntContents, count, math.MinInt8, math.MaxInt8)
	case graph.Int16:
		return narrowInts[int16](shape, c.IntContents, count, math.MinInt16, math.MaxInt16)
	case graph.Int32:
		return narrowInts[int32](shape, c.IntContents, count, math.MinInt32, math.MaxInt32)
	case graph.Int64:
		if err := count(len(c.Int64Contents), "int64_contents"); err != nil {
			return session.Tensor{}, err
		}
		return session.NewTensor(shape, append([]int64(nil), c.Int64Contents...))
	case graph.Uint8:
		return narrowUints[uint8](shape, c.UintContents, count, math.MaxUint8)
	case graph.Uint16:
		return narrowUints[uint16](shape, c.UintContents, count, math.MaxUint16)
	case graph.Uint32:
		return narrowUints[uint32](shape, c.UintContents, count, math.MaxUint32)
	case graph.Uint64:
		if err := count(len(c.Uint64Contents), "uint64_contents"); err != nil {
			return session.Tensor{}, err
		}
		return session.NewTensor(shape, append([]uint64(nil), c.Uint64Contents...))
	case graph.Float:
		if err := count(len(c.Fp32Contents), "fp32_contents"); err != nil {
			return session.Tensor{}, err
		}
		return session.NewTensor(shape, append([]float32(nil), c.Fp32Contents...))
	case graph.Double:
		if err := count(len(c.Fp64Contents), "fp64_contents"); err != nil {
			return session.Tensor{}, err
		}
		return session.NewTensor(shape, append([]float64(nil), c.Fp64Contents...))
	case graph.String:
		if err := count(len(c.BytesContents), "bytes_contents"); err != nil {
			return session.Tensor{}, err
		}
		s := make([]string, n)
		for i, b := range c.BytesContents {
			s[i] = string(b)
		}
		return session.NewTensor(shape, s)
	}
	return session.Tensor{}, fmt.Errorf("%s has no typed contents field; send it in raw_input_contents", datatypeOf[d])
}

func narrowInts[T int8 | int16 | int32](shape []int64, in []int32, count func(int, string) error, lo, hi int32) (session.Tensor, error) {
	if err := count(len(in), "int_contents"); err != nil {
		return session.Tensor{}, err
	}
	out := make([]T, len(in))
	for i, v := range in {
		if v < lo || v > hi {
			return session.Tensor{}, fmt.Errorf("int_contents[%d] = %d is out of the datatype's range", i, v)
		}
		out[i] = T(v)
	}
	return session.NewTensor(shape, out)
}

func narrowUints[T uint8 | uint16 | uint32](shape []int64, in []uint32, count func(int, string) error, hi uint32) (session.Tensor, error) {
	if err := count(len(in), "uint_contents"); err != nil {
		return session.Tensor{}, err
	}
	out := make([]T, len(in))
	for i, v := range in {
		if v > hi {
			return session.Tensor{}, fmt.Errorf("uint_contents[%d] = %d is out of the datatype's range", i, v)
		}
		out[i] = T(v)
	}
	return session.NewTensor(shape, out)
}
