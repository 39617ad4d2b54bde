package plan

import (
	"slices"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// What InferenceSession's persistent device bindings and captured device graphs
// (go/session/device_bindings.go, device_capture.go) read of a plan: the outputs a kernel
// writes in place, the host steps that split the recorded segments, the steps' output shapes
// (to name the nodes a growing dimension reaches), and the memory the plans hold.

// OutputMeta is graph output j's type and shape in this plan (the plan's own: not to be
// modified); computed says a step produces it (false for an output the plan folded into a
// constant).
func (t *Template) OutputMeta(j int) (dtype tensor.DType, shape []int64, computed bool) {
	if j < 0 || j >= len(t.Outputs) {
		return 0, nil, false
	}
	r := t.Outputs[j]
	return r.dtype, r.shape, !r.fixed
}

// Lookup is the entry of key, or nil.
func (c *Cache) Lookup(key string) *Entry { return c.lookup(key) }

// Views counts the plan's view nodes (PlanAlias).
func (t *Template) Views() uint64 {
	var n uint64
	for _, node := range t.Nodes {
		if node.Step == PlanAlias {
			n++
		}
	}
	return n
}

// KernelCalls counts the kernel launches the plan's segments record (an instance's graph
// nodes; BenchmarkPlanPhases divides an instance's cost by it).
func (t *Template) KernelCalls() int {
	n := 0
	for _, steps := range t.Segments {
		for _, i := range steps {
			n += len(t.Steps[i].kernel.Calls)
		}
	}
	return n
}

// HostStep is a step of a plan that runs on the host between recorded segments (a node's Go
// host function, the test of an If whose branches are plan steps, the copy of a branch's
// output into the If's): its node, its reason (the one its trace span carries) and, on a
// device arena, its crossings.
type HostStep struct {
	Node   *graph.Node
	Reason string
	Seam   Seam
}

// HostSteps lists the plan's host steps in run order.
func (t *Template) HostSteps() []HostStep {
	var out []HostStep
	for _, it := range t.Items {
		if it.Segment >= 0 {
			continue
		}
		st := &t.Steps[it.Step]
		if st.Kind == jumpStep {
			continue
		}
		out = append(out, HostStep{Node: st.Node, Reason: st.Reason, Seam: st.Seam})
	}
	return out
}

// StepShapes are the output shapes of every step of the plan (kernel and host steps), by
// node name; an unnamed output has a nil shape.
func (t *Template) StepShapes() map[string][][]int64 {
	m := make(map[string][][]int64, len(t.Steps))
	for _, st := range t.Steps {
		if st.Kind != KernelStep && st.Kind != hostStep {
			continue // an If's branch, jump and copy steps
		}
		shapes := make([][]int64, len(st.out))
		for j, r := range st.out {
			if r.Slot >= 0 {
				shapes[j] = slices.Clone(r.shape)
			}
		}
		m[st.Node.Name] = shapes
	}
	return m
}

// Allocations is the memory a session's plans hold: their instances' arenas (scratch), the
// recorded segments (graphs), and the host-visible staging memory (violation words and, on a
// device arena, the download buffers).
type Allocations struct {
	Arenas, Graphs, Staging  int
	ArenaBytes, StagingBytes int64
}

// Allocations counts the memory of the cache's live instances and, when pool is not nil,
// the shared arenas' slabs (with the arenas).
func (c *Cache) Allocations(pool *ArenaPool) Allocations {
	var a Allocations
	if pool != nil {
		n, bytes := pool.Held()
		a.Arenas, a.ArenaBytes = n, bytes
	}
	c.Mu.Lock()
	defer c.Mu.Unlock()
	for _, e := range c.Entries {
		if e.Template == nil {
			continue
		}
		for _, inst := range e.All {
			if inst.recorded == nil { // on a shared arena, address space only (ArenaPool.Held)
				a.Arenas++
				a.ArenaBytes += max(e.Template.ArenaBytes, 4)
			}
			a.Graphs += len(inst.segKeys)
			a.Staging++
			a.StagingBytes += int64(len(inst.words))
			if inst.dev != nil {
				for _, b := range inst.dev.stage {
					a.StagingBytes += int64(cap(b))
				}
			}
		}
	}
	return a
}

// WeightAllocations counts the device copies of the weights the plans share.
func (p *Env) WeightAllocations() (count int, bytes int64) {
	p.PlanWeights.Mu.Lock()
	defer p.PlanWeights.Mu.Unlock()
	for _, b := range p.PlanWeights.Bufs {
		count++
		bytes += int64(b.Size())
	}
	return count, bytes
}

// Pin takes an instance of e's plan out of the cache for the caller's sole use (a captured
// device graph), making one when none is idle (nil, with no error, when every instance is
// busy). Give it back with c.Give(e, inst, false).
func (p *Env) Pin(c *Cache, e *Entry, phase exec.RunPhase) (t *Template, inst *Instance, err error) {
	t, inst, build := c.Take(e)
	if inst == nil && !build {
		return nil, nil, nil
	}
	if build {
		if inst, err = p.NewInstance(t, phase); err != nil {
			c.Unreserve(e)
			return nil, nil, err
		}
		c.Mu.Lock()
		e.All = append(e.All, inst)
		c.Mu.Unlock()
	}
	return t, inst, nil
}

// Warmed reports whether e has a plan with an instance made (its kernels loaded and its
// segments recorded), and the plan.
func (c *Cache) Warmed(e *Entry) (*Template, bool) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return e.Template, e.Template != nil && e.Count > 0
}

// StandIns are the nodes of e's plan that run shape-generic stand-ins while their exact
// kernels compile in the background (exec.Substitutes), in step order, and whether those
// kernels have all settled with one loaded since (the signature's next lookup plans it again
// with them). None when the plan was built with its exact kernels, or when every compile it
// waited for failed (the stand-ins then stay). A captured device graph would keep the
// stand-ins until it is reset.
func (c *Cache) StandIns(e *Entry) (nodes []*graph.Node, loaded bool) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if e.Template == nil || len(e.waits) == 0 && !e.stale {
		return nil, false
	}
	loaded = c.staleLocked(e)
	if len(e.waits) == 0 { // every compile failed
		return nil, false
	}
	for i := range e.Template.Steps {
		st := &e.Template.Steps[i]
		if st.Node == nil || slices.Contains(nodes, st.Node) {
			continue
		}
		if kc, _ := exec.Substitutes(st.kernel); kc != nil {
			nodes = append(nodes, st.Node)
		}
	}
	return nodes, loaded
}

// TakeLatched returns the violation bits the instance's kernels set since the last call,
// and clears them.
func (inst *Instance) TakeLatched() uint32 {
	b := inst.latched
	inst.latched = 0
	return b
}
