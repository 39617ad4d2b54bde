package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/loomrt/loom/go/serve/inferencepb"
	"github.com/loomrt/loom/go/session"
)

// ServerName is the name ServerMetadata reports.
const ServerName = "loom"

// extensions are the protocol extensions the server implements (ServerMetadata): the binary
// tensor data of REST requests and responses, the repository API (index, load, unload), a
// model's configuration (REST GET .../config, gRPC ModelConfig) and its statistics (REST GET
// .../stats, gRPC ModelStatistics).
var extensions = []string{"binary_tensor_data", "model_repository", "model_configuration", "statistics"}

// Server serves models over the Open Inference Protocol: the REST API (Handler) and the gRPC
// service (RegisterGRPC), sharing one model repository, scheduler per model version and
// metrics registry. Serve runs both on listeners; Shutdown stops them gracefully.
type Server struct {
	cfg     config
	metrics *metrics
	tracer  trace.Tracer
	log     *slog.Logger

	mu       sync.RWMutex
	models   map[string]map[string]*model // name -> version -> model
	sources  map[string]modelSource       // every model a load may name
	closing  bool
	inflight sync.WaitGroup // requests being served (guarded by mu for Add)
	ready    bool

	loadMu sync.Mutex // serializes loads and unloads

	srvMu   sync.Mutex
	httpSrv *http.Server
	grpcSrv *grpc.Server
}

// New builds a Server and loads its models: a repository (WithModelRepository), one model
// directory (WithModelDir) and models in memory (WithModelBytes). A model that does not load
// fails New, naming the model.
func New(opts ...Option) (*Server, error) {
	cfg := config{maxBody: DefaultMaxBodyBytes, readTimeout: defaultReadTimeout, headerTimeout: defaultHeaderTimeout,
		idleTimeout: defaultIdleTimeout, serverName: ServerName, serverVersion: "devel"}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, metrics: newMetrics(), log: cfg.logger, models: map[string]map[string]*model{}, sources: map[string]modelSource{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	tp := cfg.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/loomrt/loom/go/serve")
	if cfg.repository != "" {
		ents, err := os.ReadDir(cfg.repository)
		if err != nil {
			return nil, fmt.Errorf("model repository: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				s.sources[e.Name()] = s.repoSource(e.Name())
			}
		}
	}
	if cfg.singleDir != "" {
		file := filepath.Join(cfg.singleDir, "model.onnx")
		if _, err := os.Stat(file); err != nil {
			return nil, fmt.Errorf("model directory: %w", err)
		}
		s.sources[cfg.singleName] = modelSource{name: cfg.singleName, file: file, cfg: filepath.Join(cfg.singleDir, "config.json")}
	}
	for i := range cfg.embedded {
		e := &cfg.embedded[i]
		s.sources[e.name] = modelSource{name: e.name, emb: e}
	}
	names := make([]string, 0, len(s.sources))
	for n := range s.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := s.LoadModel(n); err != nil {
			s.closeModels()
			return nil, err
		}
	}
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	return s, nil
}

func (s *Server) repoSource(name string) modelSource {
	dir := filepath.Join(s.cfg.repository, name)
	return modelSource{name: name, dir: dir, cfg: filepath.Join(dir, "config.json")}
}

// LoadModel loads (or reloads) every version of a model the server knows a source for: a
// repository's subdirectory, the model directory or a model in memory. A reload replaces the
// running versions once the new ones have loaded; the old ones finish their requests first.
func (s *Server) LoadModel(name string) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.RLock()
	src, ok := s.sources[name]
	closing := s.closing
	s.mu.RUnlock()
	if closing {
		return errorf(kindUnavailable, "the server is shutting down")
	}
	if !ok && s.cfg.repository != "" && validName(name) {
		if st, err := os.Stat(filepath.Join(s.cfg.repository, name)); err == nil && st.IsDir() {
			src, ok = s.repoSource(name), true
		}
	}
	if !ok {
		return errorf(kindNotFound, "no model %q in the model repository", name)
	}
	versions, err := src.versions()
	if err != nil {
		return errorf(kindInvalid, "%v", err)
	}
	loaded := map[string]*model{}
	for _, v := range versions {
		m, err := s.loadVersion(src, v)
		if err != nil {
			for _, lm := range loaded {
				lm.close()
			}
			return errorf(kindInvalid, "%v", err)
		}
		loaded[v] = m
	}
	s.mu.Lock()
	old := s.models[name]
	s.models[name] = loaded
	s.sources[name] = src
	for _, m := range loaded {
		s.metrics.register(m)
	}
	s.mu.Unlock()
	for v, m := range old {
		if _, kept := loaded[v]; !kept {
			s.metrics.unregister(m)
		}
		m.close()
	}
	s.log.Info("loom serve: model loaded", "model", name, "versions", versions)
	return nil
}

// validName accepts a model name that is one path element.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

// UnloadModel unloads every version of a model; its queued and running requests finish first.
func (s *Server) UnloadModel(name string) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.Lock()
	old, ok := s.models[name]
	delete(s.models, name)
	s.mu.Unlock()
	if !ok {
		return errorf(kindNotFound, "model %q is not loaded", name)
	}
	for _, m := range old {
		s.metrics.unregister(m)
		m.close()
	}
	s.log.Info("loom serve: model unloaded", "model", name)
	return nil
}

// lookup finds a loaded model version; an empty version is the newest.
func (s *Server) lookup(name, version string) (*model, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	vs, ok := s.models[name]
	if !ok {
		return nil, errorf(kindNotFound, "unknown model %q", name)
	}
	if version == "" {
		var best *model
		var bestN int64 = -1
		for v, m := range vs {
			n, _ := strconv.ParseInt(v, 10, 64)
			if best == nil || n > bestN {
				best, bestN = m, n
			}
		}
		return best, nil
	}
	m, ok := vs[version]
	if !ok {
		return nil, errorf(kindNotFound, "model %q has no version %q (it has %s)", name, version, joinNames(sortedKeys(vs)))
	}
	return m, nil
}

func sortedKeys(vs map[string]*model) []string {
	keys := make([]string, 0, len(vs))
	for v := range vs {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	return keys
}

// Ready reports whether the server takes inference requests: its models are loaded and it is not
// shutting down.
func (s *Server) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ready && !s.closing
}

// modelIndex is one row of the repository index.
type modelIndex struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// index lists the known models: every loaded version READY, known but unloaded ones UNAVAILABLE.
func (s *Server) index(readyOnly bool) []modelIndex {
	s.mu.RLock()
	names := map[string]bool{}
	for n := range s.sources {
		names[n] = true
	}
	for n := range s.models {
		names[n] = true
	}
	var out []modelIndex
	for n := range names {
		if vs, ok := s.models[n]; ok {
			for _, v := range sortedKeys(vs) {
				out = append(out, modelIndex{Name: n, Version: v, State: "READY"})
			}
		} else if !readyOnly {
			out = append(out, modelIndex{Name: n, State: "UNAVAILABLE", Reason: "unloaded"})
		}
	}
	s.mu.RUnlock()
	if s.cfg.repository != "" && !readyOnly {
		if ents, err := os.ReadDir(s.cfg.repository); err == nil {
			for _, e := range ents {
				if e.IsDir() && !names[e.Name()] {
					out = append(out, modelIndex{Name: e.Name(), State: "UNAVAILABLE", Reason: "not loaded"})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// inferRequest is a decoded inference request of either protocol.
type inferRequest struct {
	model, version string
	id             string
	inputs         []session.NamedTensor
	outputs        []string      // requested outputs; none means all
	timeout        time.Duration // the request's "timeout" parameter, 0 for none
}

// inferResponse is a finished inference request.
type inferResponse struct {
	model   *model
	id      string
	names   []string
	outputs []session.Tensor
}

// begin counts a request in flight, or refuses it while the server shuts down.
func (s *Server) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errorf(kindUnavailable, "the server is shutting down")
	}
	s.inflight.Add(1)
	return nil
}

// startSpan starts the server span of a request (a child of the trace its headers carry).
func (s *Server) startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
}

// infer runs a request: checks its inputs against the model, queues it and selects its outputs.
func (s *Server) infer(ctx context.Context, req *inferRequest, resolved *model) (*inferResponse, error) {
	start := time.Now()
	m := resolved
	if m == nil {
		var err error
		if m, err = s.lookup(req.model, req.version); err != nil {
			return nil, err
		}
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("loom.model", m.name), attribute.String("loom.model_version", m.version))
	resp, rows, queue, compute, err := s.inferModel(ctx, req, m)
	s.metrics.request(m, err == nil, rows, time.Since(start), queue, compute)
	if err != nil {
		e := asError(err)
		span.RecordError(e)
		span.SetStatus(codes.Error, e.msg)
		if e.kind == kindInternal {
			s.log.Warn("loom serve: inference failed", "model", m.name, "version", m.version, "error", e.msg)
		}
		return nil, e
	}
	return resp, nil
}

func (s *Server) inferModel(ctx context.Context, req *inferRequest, m *model) (_ *inferResponse, rows int64, queue, compute time.Duration, _ error) {
	// Inputs in the model's order, each given once, checked against the declaration.
	byName := map[string]session.Tensor{}
	for _, in := range req.inputs {
		if _, dup := byName[in.Name]; dup {
			return nil, 0, 0, 0, errorf(kindInvalid, "model %q: input %q is given twice", m.name, in.Name)
		}
		if err := m.checkInput(in.Name, in.Tensor); err != nil {
			return nil, 0, 0, 0, err
		}
		byName[in.Name] = in.Tensor
	}
	inputs := make([]session.NamedTensor, 0, len(m.inputs))
	for _, io := range m.inputs {
		t, ok := byName[io.Name]
		if !ok {
			return nil, 0, 0, 0, errorf(kindInvalid, "model %q: input %q (%s %v) is missing", m.name, io.Name, datatypeOf[io.DType], shapeOf(io))
		}
		inputs = append(inputs, session.NamedTensor{Name: io.Name, Tensor: t})
	}
	idx := make([]int, 0, len(m.outputs))
	if len(req.outputs) == 0 {
		for i := range m.outputs {
			idx = append(idx, i)
		}
	}
	for _, name := range req.outputs {
		i, err := m.outputIndex(name)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		idx = append(idx, i)
	}
	if req.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.timeout)
		defer cancel()
	}
	outs, queue, compute, err := m.sched.submit(ctx, inputs)
	if err != nil {
		return nil, 0, queue, compute, err
	}
	if len(outs) != len(m.outputs) {
		return nil, 0, queue, compute, errorf(kindInternal, "model %q returned %d outputs, want %d", m.name, len(outs), len(m.outputs))
	}
	resp := &inferResponse{model: m, id: req.id}
	for _, i := range idx {
		resp.names = append(resp.names, m.outputs[i].Name)
		resp.outputs = append(resp.outputs, outs[i])
	}
	rows = 1
	if m.batching {
		rows = inputs[0].Tensor.Dims()[0]
	}
	return resp, rows, queue, compute, nil
}

// Serve runs the REST API on httpL and the gRPC service on grpcL (either may be nil) until
// Shutdown, and returns nil after a graceful shutdown, or the first listener's error.
func (s *Server) Serve(httpL, grpcL net.Listener) error {
	s.srvMu.Lock()
	if s.httpSrv != nil || s.grpcSrv != nil {
		s.srvMu.Unlock()
		return errors.New("serve: Serve called twice")
	}
	s.httpSrv = &http.Server{
		Handler: s.Handler(), ReadHeaderTimeout: s.cfg.headerTimeout, ReadTimeout: s.cfg.readTimeout,
		IdleTimeout: s.cfg.idleTimeout, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.grpcSrv = s.NewGRPCServer()
	httpSrv, grpcSrv := s.httpSrv, s.grpcSrv
	s.srvMu.Unlock()
	errs := make(chan error, 2)
	n := 0
	if httpL != nil {
		n++
		go func() {
			err := httpSrv.Serve(httpL)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errs <- err
		}()
	}
	if grpcL != nil {
		n++
		go func() { errs <- grpcSrv.Serve(grpcL) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
			go s.Shutdown(context.Background()) //nolint:errcheck // the listener's error is returned
		}
	}
	return first
}

// NewGRPCServer returns a gRPC server with the inference service registered and the message
// size limit of WithMaxBodyBytes; Serve uses one, and an application may serve its own.
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append([]grpc.ServerOption{grpc.MaxRecvMsgSize(int(s.cfg.maxBody)), grpc.MaxSendMsgSize(1 << 30)}, opts...)
	g := grpc.NewServer(opts...)
	inferencepb.RegisterGRPCInferenceServiceServer(g, &grpcService{s: s})
	return g
}

// Shutdown stops the server gracefully: readiness turns false, then (after WithShutdownDelay)
// the listeners stop accepting, the requests in flight and queued are answered, and the models'
// sessions close. When ctx ends first, the remaining connections are closed and ctx's error
// returned (the sessions are still closed once their runs end).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.ready = false
	s.mu.Unlock()
	if s.cfg.shutdownDelay > 0 {
		select {
		case <-time.After(s.cfg.shutdownDelay):
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	already := s.closing
	s.closing = true
	s.mu.Unlock()
	s.srvMu.Lock()
	httpSrv, grpcSrv := s.httpSrv, s.grpcSrv
	s.srvMu.Unlock()
	var errHTTP error
	var wg sync.WaitGroup
	if grpcSrv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopped := make(chan struct{})
			go func() { grpcSrv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-ctx.Done():
				grpcSrv.Stop()
				<-stopped
			}
		}()
	}
	if httpSrv != nil {
		errHTTP = httpSrv.Shutdown(ctx)
		if errHTTP != nil {
			httpSrv.Close()
		}
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if !already {
		s.closeModels()
	}
	if err == nil {
		err = errHTTP
	}
	return err
}

// closeModels unloads every model (after its requests).
func (s *Server) closeModels() {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.Lock()
	models := s.models
	s.models = map[string]map[string]*model{}
	s.mu.Unlock()
	for _, vs := range models {
		for _, m := range vs {
			if err := m.close(); err != nil {
				s.log.Warn("loom serve: closing model", "model", m.name, "version", m.version, "error", err)
			}
		}
	}
}
