package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// KernelCacheCounts are the per-session kernel cache outcomes of one phase.
type KernelCacheCounts struct {
	// Hits are kernel requests served by a kernel this session had already compiled and loaded.
	Hits int64
	// Misses are requests that had to go to the Loom compiler (and its disk cache) and load.
	Misses int64
	// Compiles are the misses the Loom compiler really compiled (its disk cache had no entry).
	Compiles int64
	// Shipped are the misses served by a variant compiled ahead of time into the binary
	// (kernels/aot): no compiler, no disk cache.
	Shipped int64
}

// CacheStats reports an InferenceSession's kernel cache, split by phase.
type CacheStats struct {
	Warmup KernelCacheCounts // during Warmup
	Run    KernelCacheCounts // during Run
	// Compiler is the session's Loom compiler's disk cache counters since it was created (zero
	// before the first miss creates it).
	Compiler loom.CacheStats
	// JITUnavailable says why kernels cannot be compiled at run time (no C compiler for a host
	// target, or the session has loaded OptionJITMaxKernels of them), once the session has
	// needed to know; empty when the JIT works (or was never
	// needed). Without the JIT only shipped kernels run, and ops whose kernels are not shipped
	// run as host functions.
	JITUnavailable string
	// JITKernels counts the kernel modules the JIT built and loaded for the session (at most
	// OptionJITMaxKernels).
	JITKernels int64
	// NotShipped counts the ops that ran as host functions because a kernel they needed was
	// neither shipped nor compilable.
	NotShipped int64
	// Background is the background JIT's work (OptionJIT "background"): the kernels it
	// queued because a run took shape-generic shipped ones in their place, those it compiled
	// and loaded (Done) or failed to (Failed; the shape-generic kernels then stay), and the
	// compiles the Loom compiler really ran for them (its disk cache had no entry). The run
	// path's compiles are Warmup.Compiles and Run.Compiles.
	Background BackgroundCompileCounts
	// ProvisionalPlans counts the compiled run plans built with shape-generic stand-ins for
	// kernels compiling in the background, and ReplannedPlans those of them dropped once
	// their kernels were loaded, so that the signature's next run planned it again with the
	// exact kernels.
	ProvisionalPlans, ReplannedPlans int64
	// EvictedPlans counts the compiled run plans evicted, least recently used first, to keep
	// the session's plans within their bounds (a count of signatures, and a share of the
	// memory budget for their arenas); an evicted signature is planned again when it comes
	// back.
	EvictedPlans int64
}

// BackgroundCompileCounts are the background JIT's outcomes (see CacheStats.Background).
type BackgroundCompileCounts struct {
	Queued, Done, Failed, Compiles int64
}

// CacheStats returns the session's kernel cache counters.
func (s *InferenceSession) CacheStats() CacheStats {
	c := &s.eng.Kernels
	c.Mu.Lock()
	counts := c.Counts
	c.Mu.Unlock()
	conv := func(p exec.KernelPhaseCounts) KernelCacheCounts {
		return KernelCacheCounts{Hits: p.Hits, Misses: p.Misses, Compiles: p.Compiles, Shipped: p.Shipped}
	}
	out := CacheStats{Warmup: conv(counts[exec.PhaseWarmup]), Run: conv(counts[exec.PhaseRun])}
	c.Mu.Lock()
	if c.JITErr != nil {
		out.JITUnavailable = c.JITErr.Error()
	}
	out.NotShipped, out.JITKernels = c.NotShipped, int64(c.JITModules())
	c.Mu.Unlock()
	bg := c.BackgroundStats()
	out.Background = BackgroundCompileCounts{Queued: bg.Queued, Done: bg.Done, Failed: bg.Failed, Compiles: bg.Compiles}
	s.plans.Mu.Lock()
	out.ProvisionalPlans, out.ReplannedPlans, out.EvictedPlans = s.plans.Provisional, s.plans.Replanned, s.plans.Evicted
	s.plans.Mu.Unlock()
	// The compiler is only looked at, never created here: a stats call should not make one.
	if l := device.LoomCompiler(s.eng.Ctx); l != nil {
		out.Compiler = l.Stats()
	}
	return out
}

// SubgraphStats counts the subgraph bodies of one control-flow operator kind.
type SubgraphStats struct {
	// Builds are the bodies prepared (initializers converted, operators resolved): one per
	// subgraph and input shape signature while the session's cache has room.
	Builds int64
	// Runs are the body evaluations (one per If, one per Loop or Scan iteration).
	Runs int64
}

// ControlFlowStats reports the subgraph builds and runs of If, Loop, Scan and SequenceMap
// nodes.
type ControlFlowStats struct {
	If, Loop, Scan, SequenceMap SubgraphStats
}

// ControlFlowStats returns the session's subgraph counters, over all Runs and Warmups.
func (s *InferenceSession) ControlFlowStats() ControlFlowStats {
	b := &s.eng.Bodies
	get := func(k int) SubgraphStats {
		return SubgraphStats{Builds: b.Builds[k].Load(), Runs: b.Runs[k].Load()}
	}
	return ControlFlowStats{If: get(exec.FlowIf), Loop: get(exec.FlowLoop), Scan: get(exec.FlowScan), SequenceMap: get(exec.FlowSequenceMap)}
}

// Warmup runs the model once on random non-zero inputs of the given shapes so that every
// kernel those shapes need is compiled and loaded before the first Run; its kernel cache
// outcomes count as warmup in CacheStats. shapes maps input names to shapes; an input it
// omits must have a fully known declared shape. A sequence input is fed one tensor of its
// shape, an optional input holds one. A name that is not an input, a rank or a fixed
// dimension that disagrees with the model, or a negative dimension is an error. ctx bounds the
// warmup run and parents its spans as for Run; a cancelled warmup matches context.Canceled or
// context.DeadlineExceeded.
func (s *InferenceSession) Warmup(ctx context.Context, shapes map[string][]int64) error {
	const op = "Warmup"
	known := map[string]IOMeta{}
	names := make([]string, len(s.inputs))
	for i, m := range s.inputs {
		known[m.Name] = m
		names[i] = m.Name
	}
	asked := make([]string, 0, len(shapes))
	for name := range shapes {
		asked = append(asked, name)
	}
	sort.Strings(asked)
	for _, name := range asked {
		if _, ok := known[name]; !ok {
			return tensor.NewError(op, tensor.ErrInvalidArgument, "no input named %q (inputs: %s)", name, strings.Join(names, ", "))
		}
	}
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	feeds := make([]tensor.NamedValue, 0, len(s.inputs))
	for _, m := range s.inputs {
		shape, ok := shapes[m.Name]
		if !ok {
			var err error
			if shape, err = declaredShape(m); err != nil {
				return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "input %q", m.Name)
			}
		}
		if m.Ranked && len(shape) != len(m.Shape) {
			return tensor.NewError(op, tensor.ErrInvalidArgument, "input %q: rank %d (shape %v), the model wants rank %d (%s)", m.Name, len(shape), shape, len(m.Shape), describeMeta(m))
		}
		for i, d := range shape {
			if d < 0 {
				return tensor.NewError(op, tensor.ErrInvalidArgument, "input %q: dimension %d is negative (%d)", m.Name, i, d)
			}
			if m.Ranked && m.Shape[i].Known() && m.Shape[i].Value != d {
				return tensor.NewError(op, tensor.ErrInvalidArgument, "input %q: dimension %d is %d, the model wants %d (%s)", m.Name, i, d, m.Shape[i].Value, describeMeta(m))
			}
		}
		t, err := randomNonZero(rnd, m.DType, shape)
		if err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "input %q", m.Name)
		}
		feeds = append(feeds, tensor.NamedValue{Name: m.Name, Value: warmupValue(m, t)})
	}
	// A warmup compiles what its shapes need before the first Run, whatever the JIT policy.
	endSync := s.eng.Kernels.SyncCompiles()
	_, err := s.run(ctx, feeds, exec.PhaseWarmup, nil)
	endSync()
	if err != nil {
		if se, ok := err.(*tensor.Error); ok {
			// The run's error as the warmup's, keeping the node, the kind and the cause.
			c := *se
			c.Op, c.Message = op, "the warmup run failed"
			if se.Message != "" {
				c.Message += ": " + se.Message
			}
			return &c
		}
		kind := tensor.ErrInvalidArgument
		return tensor.WrapError(op, kind, err, "the warmup run failed")
	}
	return nil
}

// warmupValue feeds t for input m: a sequence input gets a sequence of t alone, an optional
// one an optional holding t (or that sequence).
func warmupValue(m IOMeta, t tensor.Tensor) tensor.Value {
	v := t
	if m.Kind == tensor.ValueSequence || (m.Kind == tensor.ValueOptional && m.Holds == tensor.ValueSequence) {
		v = tensor.SeqOf(t.DType(), []tensor.Tensor{t})
	}
	if m.Kind == tensor.ValueOptional {
		v = tensor.OptOf(t.DType(), &v)
	}
	return tensor.TensorValue(v)
}

// declaredShape is m's shape when every dimension is known.
func declaredShape(m IOMeta) ([]int64, error) {
	if !m.Ranked {
		return nil, fmt.Errorf("its rank is unknown, so Warmup needs its shape")
	}
	shape := make([]int64, len(m.Shape))
	for i, d := range m.Shape {
		if !d.Known() {
			return nil, fmt.Errorf("dimension %d is %s, so Warmup needs its shape (%s)", i, d, describeMeta(m))
		}
		shape[i] = d.Value
	}
	return shape, nil
}

// randomNonZero makes a tensor of random non-zero values: floats in ±[0.5, 1.5), integers 1 or
// 2 (small, as integer inputs are often indices or counts), booleans true.
func randomNonZero(rnd *rand.Rand, dtype tensor.DType, shape []int64) (tensor.Tensor, error) {
	n, err := tensor.ElementCount(shape)
	if err != nil {
		return tensor.Tensor{}, err
	}
	vals := make([]float64, n)
	for i := range vals {
		switch dtype {
		case graph.Float, graph.Double, graph.Float16, graph.BFloat16:
			v := 0.5 + rnd.Float64()
			if rnd.IntN(2) == 0 {
				v = -v
			}
			vals[i] = v
		case graph.Bool:
			vals[i] = 1
		default:
			vals[i] = float64(1 + rnd.IntN(2))
		}
	}
	return tensor.FromFloat64s(dtype, append([]int64{}, shape...), vals)
}

// DeviceID names the device an InferenceSession runs its kernels on.
type DeviceID struct {
	Backend string // "host" or "cuda"
	Index   int    // the device index within the backend
	Target  string // the code target kernels are compiled for, e.g. "host-x86_64-v4"
}

// String is "backend:index target", e.g. "host:0 host-x86_64-v4".
func (d DeviceID) String() string { return fmt.Sprintf("%s:%d %s", d.Backend, d.Index, d.Target) }

// DeviceID returns the device the session runs on.
func (s *InferenceSession) DeviceID() DeviceID {
	p := s.dev.Props()
	return DeviceID{Backend: p.Backend.String(), Index: p.Index, Target: p.Target}
}
