package graph

import (
	"fmt"
	"sort"
	"strings"
)

// PlanOptions tunes a memory plan.
type PlanOptions struct {
	// Alignment of every buffer offset in bytes (default 64).
	Alignment int64
}

// BufferKind says how a value gets its memory.
type BufferKind int

// The kinds of planned values.
const (
	// BufferArena values own a span of the arena.
	BufferArena BufferKind = iota
	// BufferInPlace values reuse the arena span of an input that dies at their producer.
	BufferInPlace
	// BufferView values alias (part of) another value's memory without copying: Reshape,
	// Squeeze, Unsqueeze, Flatten, Identity and contiguous Slice.
	BufferView
	// BufferExternal values live outside the arena: graph inputs, initializers and Constant
	// outputs, and views of them.
	BufferExternal
)

// Buffer is the placement of one value of the main graph.
type Buffer struct {
	Value  string
	Kind   BufferKind
	Offset int64  // arena offset (for a view: of the viewed bytes)
	Size   int64  // bytes
	Root   string // the value owning the memory (itself for arena values)
	First  int    // index of the producing node (-1 for graph inputs and initializers)
	Last   int    // index of the last reader (len(Nodes) for graph outputs)
}

// MemoryPlan is a liveness-based placement of the main graph's activations in one arena for
// a fixed shape signature.
type MemoryPlan struct {
	Buffers    []Buffer
	ArenaBytes int64 // the arena size: peak planned memory
	NaiveBytes int64 // every activation in its own allocation, no reuse
	// LiveBytes is the largest total size of arena values alive at one time, a lower bound on
	// ArenaBytes for this order of nodes.
	LiveBytes int64
	InPlace   int
	Views     int
	// Unplanned lists values the plan leaves to the runtime (non-tensor values, values inside
	// subgraphs are not visited at all), with the reason.
	Unplanned []string
}

// PlanMemory plans for the shapes m's values have now, so infer them for the signature first
// (infer.ShapesFor in go/graph/infer binds the inputs): it computes each main-graph value's
// live range in node order, maps views onto the memory they alias, lets element-wise operators
// overwrite an input that dies there, and places the remaining buffers in one arena, largest
// first, at the lowest offset that no time-overlapping buffer uses. A value whose shape is not
// static is listed in Unplanned.
func PlanMemory(m *Model, opts PlanOptions) (*MemoryPlan, error) {
	if opts.Alignment <= 0 {
		opts.Alignment = 64
	}
	if m.Graph == nil {
		return nil, &Error{Model: m.Name, Msg: "model has no graph"}
	}
	g := m.Graph
	plan := &MemoryPlan{}
	bufs := map[string]*Buffer{}
	order := []string{}
	add := func(b *Buffer) {
		bufs[b.Value] = b
		order = append(order, b.Value)
	}
	size := func(name string) (int64, error) {
		v := g.Values[name]
		if v == nil || v.Type.Kind != KindTensor || !v.Type.Ranked {
			return 0, fmt.Errorf("value %q has no tensor shape", name)
		}
		n := v.Type.Shape.NumElements()
		if n < 0 {
			return 0, fmt.Errorf("value %q has shape %v, not static for this signature", name, v.Type.Shape)
		}
		if v.Type.Elem == String || !v.Type.Elem.Valid() {
			return 0, fmt.Errorf("value %q of type %v has no fixed size", name, v.Type)
		}
		return v.Type.Elem.ByteSize(n), nil
	}
	for _, in := range g.Inputs {
		add(&Buffer{Value: in.Name, Kind: BufferExternal, Root: in.Name, First: -1, Last: -1})
	}
	for _, name := range g.InitOrder {
		if bufs[name] == nil {
			t := g.Initializers[name]
			add(&Buffer{Value: name, Kind: BufferExternal, Root: name, First: -1, Last: -1, Size: t.DType.ByteSize(t.NumElements())})
		}
	}
	// Live ranges.
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o == "" {
				continue
			}
			sz, err := size(o)
			if err != nil {
				plan.Unplanned = append(plan.Unplanned, fmt.Sprintf("%s (%v)", o, err))
				continue
			}
			kind := BufferArena
			if n.OpType == "Constant" && n.Domain == "" {
				kind = BufferExternal // weights spelled as Constant nodes live with the initializers
			}
			add(&Buffer{Value: o, Kind: kind, Root: o, First: i, Last: i, Size: sz})
		}
		for _, in := range append(append([]string{}, n.Inputs...), n.ImplicitInputs()...) {
			if b := bufs[in]; b != nil && b.Last < i {
				b.Last = i
			}
		}
	}
	for _, o := range g.Outputs {
		if b := bufs[o.Name]; b != nil {
			b.Last = len(g.Nodes)
		}
	}
	root := func(name string) *Buffer {
		b := bufs[name]
		for b != nil && b.Root != b.Value {
			b = bufs[b.Root]
		}
		return b
	}
	// Views and in-place reuse, in node order so that chains resolve to their roots.
	for i, n := range g.Nodes {
		if n.Domain != "" || len(n.Outputs) == 0 || len(n.Inputs) == 0 {
			continue
		}
		out := bufs[n.Outputs[0]]
		src := bufs[n.Inputs[0]]
		if out == nil || src == nil || out.Kind != BufferArena {
			continue
		}
		if n.Traits().View || (n.OpType == "Slice" && contiguousSlice(g, n)) {
			r := root(src.Value)
			off := int64(0)
			if n.OpType == "Slice" {
				off = sliceOffset(g, n)
			}
			out.Kind, out.Root, out.Offset = BufferView, r.Value, off+src.Offset
			if r.Kind == BufferExternal {
				out.Kind = BufferExternal
			}
			if out.Last > r.Last {
				r.Last = out.Last
			}
			plan.Views++
			continue
		}
		if n.Traits().InPlace {
			for _, in := range n.Inputs {
				s := bufs[in]
				if s == nil || (s.Kind != BufferArena && s.Kind != BufferInPlace) || s.Last != i || s.Size != out.Size || g.IsOutput(in) {
					continue
				}
				r := root(in)
				if r.Last > i || aliasedLater(bufs, r.Value, i) || readsRootTwice(n, in, r.Value, root) {
					continue // another value still reads this memory
				}
				// out takes over the memory; its owner's range extends to out's.
				out.Kind, out.Root = BufferInPlace, r.Value
				r.Last = max(r.Last, out.Last)
				plan.InPlace++
				break
			}
		}
	}
	// Place roots: largest first, lowest fitting offset.
	var roots []*Buffer
	for _, name := range order {
		b := bufs[name]
		if b.Kind == BufferArena {
			roots = append(roots, b)
			plan.NaiveBytes += b.Size
		}
	}
	for _, name := range order {
		if b := bufs[name]; b.Kind == BufferInPlace {
			plan.NaiveBytes += b.Size
		}
	}
	sort.SliceStable(roots, func(i, j int) bool { return roots[i].Size > roots[j].Size })
	var placed []*Buffer
	for _, b := range roots {
		b.Offset = fitOffset(placed, b, opts.Alignment)
		placed = append(placed, b)
		plan.ArenaBytes = max(plan.ArenaBytes, b.Offset+b.Size)
	}
	for t := 0; t <= len(g.Nodes); t++ {
		var live int64
		for _, b := range roots {
			if b.First <= t && t <= b.Last {
				live += b.Size
			}
		}
		plan.LiveBytes = max(plan.LiveBytes, live)
	}
	for _, name := range order {
		b := bufs[name]
		switch b.Kind {
		case BufferInPlace:
			b.Offset = root(name).Offset
		case BufferView:
			b.Offset += root(name).Offset
		}
		plan.Buffers = append(plan.Buffers, *b)
	}
	return plan, nil
}

// aliasedLater reports whether a view of name is read after node i (overwriting name would
// corrupt it).
func aliasedLater(bufs map[string]*Buffer, name string, i int) bool {
	for _, b := range bufs {
		if b.Kind == BufferView && b.Root == name && b.Last > i {
			return true
		}
	}
	return false
}

// readsRootTwice reports whether a node input other than in shares root's memory; writing the
// output over in could then clobber elements the other input still has to read.
func readsRootTwice(n *Node, in, root string, rootOf func(string) *Buffer) bool {
	for _, other := range n.Inputs {
		if other == "" || other == in {
			continue
		}
		if r := rootOf(other); r != nil && r.Value == root {
			return true
		}
	}
	return false
}

func fitOffset(placed []*Buffer, b *Buffer, align int64) int64 {
	type span struct{ lo, hi int64 }
	var busy []span
	for _, p := range placed {
		if p.First <= b.Last && b.First <= p.Last {
			busy = append(busy, span{p.Offset, p.Offset + p.Size})
		}
	}
	sort.Slice(busy, func(i, j int) bool { return busy[i].lo < busy[j].lo })
	off := int64(0)
	for _, s := range busy {
		if off+b.Size <= s.lo {
			break
		}
		if s.hi > off {
			off = (s.hi + align - 1) / align * align
		}
	}
	return off
}

// sliceSpec returns the single sliced axis and its start of a Slice with constant, step-1
// arguments on a statically shaped input.
func sliceSpec(g *Graph, n *Node) (axis int, start int64, ok bool) {
	in := g.Value(n.Inputs[0])
	if in == nil || !in.Type.Ranked {
		return 0, 0, false
	}
	dims, static := in.Type.Shape.Ints()
	if !static || len(n.Inputs) < 3 {
		return 0, 0, false
	}
	get := func(i int) []int64 {
		if i >= len(n.Inputs) || n.Inputs[i] == "" {
			return nil
		}
		t := g.Initializer(n.Inputs[i])
		if t == nil {
			return nil
		}
		v, err := t.Int64s()
		if err != nil {
			return nil
		}
		return v
	}
	starts, ends, axes, steps := get(1), get(2), get(3), get(4)
	if len(starts) != 1 || len(ends) != 1 {
		return 0, 0, false
	}
	a := int64(0)
	if axes != nil {
		if len(axes) != 1 {
			return 0, 0, false
		}
		a = axes[0]
	}
	if steps != nil && (len(steps) != 1 || steps[0] != 1) {
		return 0, 0, false
	}
	ax, err := NormAxis(a, len(dims))
	if err != nil {
		return 0, 0, false
	}
	s := ClampSliceIndex(starts[0], dims[ax], 1)
	return ax, s, true
}

// contiguousSlice: a step-1 slice of one axis is a contiguous span when every axis before it
// has size 1.
func contiguousSlice(g *Graph, n *Node) bool {
	ax, _, ok := sliceSpec(g, n)
	if !ok {
		return false
	}
	dims, _ := g.Value(n.Inputs[0]).Type.Shape.Ints()
	for _, d := range dims[:ax] {
		if d != 1 {
			return false
		}
	}
	return true
}

func sliceOffset(g *Graph, n *Node) int64 {
	ax, start, _ := sliceSpec(g, n)
	v := g.Value(n.Inputs[0])
	dims, _ := v.Type.Shape.Ints()
	inner := int64(1)
	for _, d := range dims[ax+1:] {
		inner *= d
	}
	return v.Type.Elem.ByteSize(start * inner)
}

// String summarizes the plan.
func (p *MemoryPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "arena %d bytes (naive %d, live lower bound %d), %d in-place, %d views",
		p.ArenaBytes, p.NaiveBytes, p.LiveBytes, p.InPlace, p.Views)
	if len(p.Unplanned) > 0 {
		fmt.Fprintf(&b, ", %d unplanned", len(p.Unplanned))
	}
	return b.String()
}
