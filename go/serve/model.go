package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/loomrt/loom/go/session"
)

// runner runs a model: *session.InferenceSession, or a test's wrapper around one.
type runner interface {
	Run(ctx context.Context, inputs []session.NamedTensor) ([]session.Tensor, error)
	Close() error
}

// model is one loaded version of a model: its session, its interface and its scheduler.
type model struct {
	name, version string
	cfg           ModelConfig
	inputs        []session.IOMeta
	outputs       []session.IOMeta
	run           runner
	batching      bool // dynamic batching: cfg.MaxBatchSize > 0 and a variable first dimension
	sched         *scheduler
	stats         statsRecorder // the statistics extension's figures
}

// modelSource is where a model's versions come from, for loading and reloading.
type modelSource struct {
	name string
	dir  string // a repository's model directory: VERSION/model.onnx
	file string // a single model file (WithModelDir), version "1"
	emb  *embeddedModel
	cfg  string // config.json path, "" for none
}

// versions lists a repository model directory's version subdirectories holding model.onnx,
// newest (highest number) first.
func (src modelSource) versions() ([]string, error) {
	switch {
	case src.emb != nil:
		return []string{src.emb.version}, nil
	case src.file != "":
		return []string{"1"}, nil
	}
	ents, err := os.ReadDir(src.dir)
	if err != nil {
		return nil, err
	}
	var vs []int64
	for _, e := range ents {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v <= 0 || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(src.dir, e.Name(), "model.onnx")); err == nil {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] > vs[j] })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatInt(v, 10)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("model %q: no version directory with a model.onnx in %s (want %s/1/model.onnx)", src.name, src.dir, src.dir)
	}
	return out, nil
}

// loadVersion loads one version of the source's model and starts its scheduler.
func (s *Server) loadVersion(src modelSource, version string) (*model, error) {
	cfg := s.cfg.defaults
	if src.emb != nil && !isZero(src.emb.cfg) {
		cfg = src.emb.cfg
	}
	if src.cfg != "" {
		c, found, err := readModelConfig(src.cfg)
		if err != nil {
			return nil, fmt.Errorf("model %q config: %v", src.name, err)
		}
		if found {
			cfg = c
		}
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("model %q config: %v", src.name, err)
	}
	opts := []session.LoadOption{
		session.WithExecutionProvider(session.ExecutionProvider(cfg.Provider)),
		session.WithIntraOpThreads(cfg.threads()),
	}
	if s.cfg.tracerProvider != nil {
		opts = append(opts, session.WithTracerProvider(s.cfg.tracerProvider))
	}
	keys := make([]string, 0, len(cfg.SessionOptions))
	for k := range cfg.SessionOptions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, session.WithOption(k, cfg.SessionOptions[k]))
	}
	var sess *session.InferenceSession
	switch {
	case src.emb != nil:
		sess, err = session.LoadBytes(src.emb.onnx, opts...)
	case src.file != "":
		sess, err = session.Load(src.file, opts...)
	default:
		sess, err = session.Load(filepath.Join(src.dir, version, "model.onnx"), opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("model %q version %s: %w", src.name, version, err)
	}
	m, err := s.newModel(src.name, version, cfg, sess)
	if err != nil {
		sess.Close()
		return nil, err
	}
	return m, nil
}

func isZero(c ModelConfig) bool {
	return c.Provider == "" && c.IntraOpThreads == 0 && c.MaxBatchSize == 0 && c.MaxQueueDelayMicroseconds == 0 &&
		c.MaxQueueSize == 0 && c.Instances == 0 && len(c.SessionOptions) == 0
}

// newModel checks that the session's interface can be served and starts the model's scheduler.
func (s *Server) newModel(name, version string, cfg ModelConfig, sess interface {
	runner
	Inputs() []session.IOMeta
	Outputs() []session.IOMeta
}) (*model, error) {
	m := &model{name: name, version: version, cfg: cfg, inputs: sess.Inputs(), outputs: sess.Outputs(), run: sess}
	for _, group := range [][]session.IOMeta{m.inputs, m.outputs} {
		for _, io := range group {
			if io.Kind != session.ValueTensor {
				return nil, fmt.Errorf("model %q: %q is a %s; only tensors can be served", name, io.Name, io.Kind)
			}
			if _, ok := datatypeOf[io.DType]; !ok {
				return nil, fmt.Errorf("model %q: %q has element type %s, which the protocol has no datatype for", name, io.Name, io.DType)
			}
		}
	}
	if cfg.MaxBatchSize > 0 {
		for _, group := range [][]session.IOMeta{m.inputs, m.outputs} {
			for _, io := range group {
				if !io.Ranked || len(io.Shape) == 0 || io.Shape[0].Known() {
					return nil, fmt.Errorf("model %q: max_batch_size %d needs a variable first (batch) dimension, but %q is %v",
						name, cfg.MaxBatchSize, io.Name, io.Shape)
				}
			}
		}
		m.batching = true
	}
	m.sched = newScheduler(m, s.metrics)
	return m, nil
}

// close stops the model's scheduler (after its queued and running requests) and its session.
func (m *model) close() error {
	m.sched.close()
	return m.run.Close()
}

// shapeOf renders a declared shape for metadata: -1 for a dimension that is not a number.
func shapeOf(io session.IOMeta) []int64 {
	out := make([]int64, len(io.Shape))
	for i, d := range io.Shape {
		out[i] = -1
		if d.Known() {
			out[i] = d.Value
		}
	}
	return out
}

// checkInput checks a request tensor against the model's declaration of that input.
func (m *model) checkInput(name string, t session.Tensor) error {
	for _, io := range m.inputs {
		if io.Name != name {
			continue
		}
		if t.DType() != io.DType {
			return errorf(kindInvalid, "model %q input %q: datatype %s, but the model takes %s", m.name, name, datatypeOf[t.DType()], datatypeOf[io.DType])
		}
		if !io.Ranked {
			return nil
		}
		dims := t.Dims()
		if len(dims) != len(io.Shape) {
			return errorf(kindInvalid, "model %q input %q: shape %v has rank %d, but the model takes rank %d (%v)", m.name, name, dims, len(dims), len(io.Shape), shapeOf(io))
		}
		for i, d := range io.Shape {
			if d.Known() && dims[i] != d.Value {
				return errorf(kindInvalid, "model %q input %q: shape %v, but the model takes %v (dimension %d must be %d)", m.name, name, dims, shapeOf(io), i, d.Value)
			}
		}
		return nil
	}
	names := make([]string, len(m.inputs))
	for i, io := range m.inputs {
		names[i] = strconv.Quote(io.Name)
	}
	return errorf(kindInvalid, "model %q has no input %q (its inputs: %s)", m.name, name, joinNames(names))
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// outputIndex finds a model output by name.
func (m *model) outputIndex(name string) (int, error) {
	for i, io := range m.outputs {
		if io.Name == name {
			return i, nil
		}
	}
	names := make([]string, len(m.outputs))
	for i, io := range m.outputs {
		names[i] = strconv.Quote(io.Name)
	}
	return 0, errorf(kindInvalid, "model %q has no output %q (its outputs: %s)", m.name, name, joinNames(names))
}
