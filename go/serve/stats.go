package serve

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loomrt/loom/go/session"
)

// duration is a count of events and their cumulative duration (Triton's StatisticDuration).
type duration struct {
	Count uint64 `json:"count"`
	NS    uint64 `json:"ns"`
}

func (d *duration) add(t time.Duration) {
	d.Count++
	d.NS += uint64(max(t, 0))
}

// inferStats are a model version's cumulative request statistics, in the statistics
// extension's JSON shape (Triton's InferStatistics). Loom measures a run whole: its input
// preparation and output extraction are part of compute_infer, and it has no response cache,
// so those fields stay 0.
type inferStats struct {
	Success       duration `json:"success"`
	Fail          duration `json:"fail"`
	Queue         duration `json:"queue"`
	ComputeInput  duration `json:"compute_input"`
	ComputeInfer  duration `json:"compute_infer"`
	ComputeOutput duration `json:"compute_output"`
	CacheHit      duration `json:"cache_hit"`
	CacheMiss     duration `json:"cache_miss"`
}

// batchStats are the executions of one batch size (Triton's InferBatchStatistics).
type batchStats struct {
	BatchSize     uint64   `json:"batch_size"`
	ComputeInput  duration `json:"compute_input"`
	ComputeInfer  duration `json:"compute_infer"`
	ComputeOutput duration `json:"compute_output"`
}

// modelStatistics is one model version's entry of a statistics answer (Triton's
// ModelStatistics).
type modelStatistics struct {
	Name           string       `json:"name"`
	Version        string       `json:"version"`
	LastInference  uint64       `json:"last_inference"` // ms since the Unix epoch, 0: never
	InferenceCount uint64       `json:"inference_count"`
	ExecutionCount uint64       `json:"execution_count"`
	InferenceStats inferStats   `json:"inference_stats"`
	BatchStats     []batchStats `json:"batch_stats"`
}

// statsRecorder accumulates a model version's statistics. Its zero value is ready.
type statsRecorder struct {
	mu         sync.Mutex
	last       time.Time
	inferences uint64
	executions uint64
	infer      inferStats
	batches    map[uint64]*duration // batch size -> executions
}

// request records a finished request: rows inferences when ok, its whole duration under
// success or fail, and, when ok, its queue and compute time.
func (r *statsRecorder) request(ok bool, rows int64, total, queue, compute time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = time.Now()
	if !ok {
		r.infer.Fail.add(total)
		return
	}
	r.inferences += uint64(max(rows, 1))
	r.infer.Success.add(total)
	r.infer.Queue.add(queue)
	r.infer.ComputeInfer.add(compute)
}

// executed records one model execution of rows rows that took compute.
func (r *statsRecorder) executed(rows int64, compute time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.executions++
	if r.batches == nil {
		r.batches = map[uint64]*duration{}
	}
	size := uint64(max(rows, 1))
	d := r.batches[size]
	if d == nil {
		d = &duration{}
		r.batches[size] = d
	}
	d.add(compute)
}

// snapshot is the statistics so far, batch sizes in increasing order.
func (r *statsRecorder) snapshot(name, version string) modelStatistics {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := modelStatistics{Name: name, Version: version, InferenceCount: r.inferences, ExecutionCount: r.executions,
		InferenceStats: r.infer, BatchStats: []batchStats{}}
	if !r.last.IsZero() {
		st.LastInference = uint64(r.last.UnixMilli())
	}
	for size, d := range r.batches {
		st.BatchStats = append(st.BatchStats, batchStats{BatchSize: size, ComputeInfer: *d})
	}
	slices.SortFunc(st.BatchStats, func(a, b batchStats) int { return cmp.Compare(a.BatchSize, b.BatchSize) })
	return st
}

// statistics gives the statistics of the loaded model versions that name and version select:
// an empty name selects every model, an empty version every version of the model. A name or
// version that is not loaded is a not-found error. Entries are sorted by name, then version.
func (s *Server) statistics(name, version string) ([]modelStatistics, error) {
	var picked []*model
	if name != "" {
		if version != "" {
			m, err := s.lookup(name, version)
			if err != nil {
				return nil, err
			}
			picked = append(picked, m)
		} else {
			s.mu.RLock()
			vs, ok := s.models[name]
			for _, m := range vs {
				picked = append(picked, m)
			}
			s.mu.RUnlock()
			if !ok {
				return nil, errorf(kindNotFound, "unknown model %q", name)
			}
		}
	} else {
		if version != "" {
			return nil, errorf(kindInvalid, "statistics: a version (%q) needs a model name", version)
		}
		s.mu.RLock()
		for _, vs := range s.models {
			for _, m := range vs {
				picked = append(picked, m)
			}
		}
		s.mu.RUnlock()
	}
	out := make([]modelStatistics, 0, len(picked))
	for _, m := range picked {
		out = append(out, m.stats.snapshot(m.name, m.version))
	}
	slices.SortFunc(out, func(a, b modelStatistics) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return compareVersions(a.Version, b.Version)
	})
	return out, nil
}

// compareVersions orders version names numerically (they are positive integers), others
// after them by name.
func compareVersions(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(a, b)
}

// ioConfig is an input or output of a model configuration (Triton's ModelInput/ModelOutput).
type ioConfig struct {
	Name     string  `json:"name"`
	DataType string  `json:"data_type"`
	Dims     []int64 `json:"dims"`
}

// instanceGroup is a model configuration's instance group (Triton's ModelInstanceGroup).
type instanceGroup struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// dynamicBatching is a model configuration's dynamic batching (Triton's ModelDynamicBatching).
type dynamicBatching struct {
	PreferredBatchSize        []int `json:"preferred_batch_size"`
	MaxQueueDelayMicroseconds int64 `json:"max_queue_delay_microseconds"`
}

// modelConfiguration is the model configuration extension's answer: the part of Triton's
// ModelConfig that describes a Loom model.
type modelConfiguration struct {
	Name            string           `json:"name"`
	Platform        string           `json:"platform"`
	Backend         string           `json:"backend"`
	MaxBatchSize    int              `json:"max_batch_size"`
	Input           []ioConfig       `json:"input"`
	Output          []ioConfig       `json:"output"`
	InstanceGroup   []instanceGroup  `json:"instance_group"`
	DynamicBatching *dynamicBatching `json:"dynamic_batching,omitempty"`
}

// config is the model's configuration. With batching, dims leave out the batch dimension and
// max_batch_size is the configured one; without, max_batch_size is 0 (as Triton reports a
// model it does not batch) and dims are the whole shapes.
func (m *model) config() modelConfiguration {
	conv := func(ios []session.IOMeta) []ioConfig {
		out := []ioConfig{}
		for _, io := range ios {
			dims := shapeOf(io)
			if m.batching && len(dims) > 0 {
				dims = dims[1:] // Triton's dims leave out the batch dimension
			}
			dt := datatypeOf[io.DType]
			if dt == "BYTES" {
				dt = "STRING"
			}
			out = append(out, ioConfig{Name: io.Name, DataType: "TYPE_" + dt, Dims: dims})
		}
		return out
	}
	kind := "KIND_CPU"
	if m.cfg.Provider == "cuda" {
		kind = "KIND_GPU"
	}
	c := modelConfiguration{Name: m.name, Platform: Platform, Backend: "loom", Input: conv(m.inputs), Output: conv(m.outputs),
		InstanceGroup: []instanceGroup{{Name: m.name, Kind: kind, Count: m.cfg.Instances}}}
	if m.batching {
		c.MaxBatchSize = m.cfg.MaxBatchSize
		c.DynamicBatching = &dynamicBatching{MaxQueueDelayMicroseconds: m.cfg.MaxQueueDelayMicroseconds}
		for p := 1; p <= m.cfg.MaxBatchSize; p *= 2 {
			c.DynamicBatching.PreferredBatchSize = append(c.DynamicBatching.PreferredBatchSize, p)
		}
	}
	return c
}
