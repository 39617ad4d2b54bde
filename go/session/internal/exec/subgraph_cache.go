package exec

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The subgraph cache: the If, Loop, Scan and SequenceMap bodies prepared once per input
// signature, and the run phases the statistics count by.

// RunPhase says whether a run is a Warmup or a Run, so the statistics can tell them apart.
type RunPhase int

const (
	PhaseRun RunPhase = iota
	PhaseWarmup
	phaseCount
)

// KernelPhaseCounts are the kernel cache outcomes of one phase; KernelCache updates them under
// its lock.
type KernelPhaseCounts struct{ Hits, Misses, Compiles, Shipped int64 }

const (
	FlowIf = iota
	FlowLoop
	FlowScan
	FlowSequenceMap
	flowKinds
)

func flowKind(opType string) int {
	switch opType {
	case "Loop":
		return FlowLoop
	case "Scan":
		return FlowScan
	case "SequenceMap":
		return FlowSequenceMap
	}
	return FlowIf
}

// preparedBody is a subgraph made ready to evaluate: its initializers converted and its
// operators resolved once, instead of on every iteration.
type preparedBody struct {
	inits map[string]tensor.Tensor
	ops   []RunFunc
}

type bodyKey struct {
	g   *graph.Graph
	sig string
}

// maxPreparedBodies bounds the bodyCache: a Loop whose carried shapes change every iteration
// would otherwise add an entry per iteration. Beyond it bodies are built and not kept.
const maxPreparedBodies = 1024

// bodyCache keeps an InferenceSession's prepared subgraphs by subgraph and the shapes and
// types of its inputs. Prepared bodies are read-only, so concurrent runs share them.
type bodyCache struct {
	mu     sync.Mutex
	bodies map[bodyKey]*preparedBody
	// held is the memory of the cached bodies' initializers (see detachOutputs).
	held   HeldRanges
	Builds [flowKinds]atomic.Int64
	Runs   [flowKinds]atomic.Int64
}

// Get returns the prepared body for g with signature sig, building it on first use.
func (c *bodyCache) Get(kind int, g *graph.Graph, sig string) (*preparedBody, error) {
	key := bodyKey{g: g, sig: sig}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.bodies[key]; p != nil {
		return p, nil
	}
	p, err := prepareBody(g)
	if err != nil {
		return nil, err
	}
	c.Builds[kind].Add(1)
	if c.bodies == nil {
		c.bodies = map[bodyKey]*preparedBody{}
	}
	if len(c.bodies) < maxPreparedBodies {
		c.bodies[key] = p
		for _, t := range p.inits {
			if r, ok := DataRange(t); ok {
				c.held = append(c.held, r)
			}
		}
	}
	return p, nil
}

// holds reports whether r overlaps the initializers of a cached body.
func (c *bodyCache) holds(r MemRange) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held.Overlaps(r)
}

// Close drops the prepared bodies. Idempotent.
func (c *bodyCache) Close() {
	c.mu.Lock()
	c.bodies, c.held = nil, nil
	c.mu.Unlock()
}

func prepareBody(g *graph.Graph) (*preparedBody, error) {
	p := &preparedBody{inits: make(map[string]tensor.Tensor, len(g.Initializers)), ops: make([]RunFunc, len(g.Nodes))}
	for name, gt := range g.Initializers {
		t, err := tensor.FromGraphTensor(gt)
		if err != nil {
			return nil, fmt.Errorf("subgraph %q initializer %q: %w", g.Name, name, err)
		}
		p.inits[name] = t
	}
	for i, n := range g.Nodes {
		f, ok := LookupOp(n)
		if !ok {
			return nil, tensor.NewNodeError("Run", tensor.ErrInvalidArgument, n, "operator %s is not supported", n.OpType)
		}
		p.ops[i] = f
	}
	return p, nil
}

// bodySignature spells out the element types and shapes of g's inputs as bound in sc.
func bodySignature(g *graph.Graph, sc *Scope) string {
	var b strings.Builder
	for _, v := range g.Inputs {
		t, ok := sc.Vals[v.Name]
		if !ok {
			b.WriteString("-;")
			continue
		}
		b.WriteString(strconv.Itoa(int(t.DType())))
		for _, d := range t.Dims() {
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(d, 10))
		}
		b.WriteByte(';')
	}
	return b.String()
}

// evalBody evaluates the subgraph g of an If, Loop or Scan node (opType) in sc, whose values
// bind g's inputs, using the session's prepared body for that input signature.
func (rc *RunCtx) evalBody(opType string, g *graph.Graph, sc *Scope) ([]tensor.Tensor, error) {
	kind := flowKind(opType)
	p, err := rc.Eng.Bodies.Get(kind, g, bodySignature(g, sc))
	if err != nil {
		return nil, err
	}
	rc.Eng.Bodies.Runs[kind].Add(1)
	// A Loop of many iterations of an empty body runs no node: the check between iterations.
	if err := rc.Canceled(nil); err != nil {
		return nil, err
	}
	return rc.evalGraphWith(g, sc, p)
}
