package kernelops

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/movement"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels"
)

// Data movement ops as Loom kernels (kernels/movement.loom): Transpose, Concat, Slice,
// Gather, Expand, Tile, Where, Pad and Cast. The copies move elements by byte width, so they
// serve every numeric type and bool; strings stay on the host.

func init() {
	ops.RegisterKernelOp("Transpose", PlanTranspose, hostFallback("Transpose"))
	ops.RegisterKernelOp("Concat", PlanConcat, hostFallback("Concat"))
	ops.RegisterKernelOp("Slice", PlanSlice, hostFallback("Slice"))
	ops.RegisterKernelOp("Split", PlanSplit, hostFallback("Split"))
	ops.RegisterKernelOp("Gather", PlanGather, hostFallback("Gather"))
	ops.RegisterKernelOp("Expand", PlanExpand, hostFallback("Expand"))
	ops.RegisterKernelOp("Tile", PlanTile, hostFallback("Tile"))
	ops.RegisterKernelOp("Where", PlanWhere, hostFallback("Where"))
	ops.RegisterKernelOp("Pad", PlanPad, hostFallback("Pad"))
	ops.RegisterKernelOp("Cast", PlanCast, hostFallback("Cast"))
}

const movementFile = "movement.loom"

// movementRank is the rank the rank-6 kernels walk (lower ranks pad with leading 1s).
const movementRank = 6

// widthType names the Loom type that moves one element of dt as raw bits; ok is false for
// strings and for types the session has no raw storage for.
func widthType(dt tensor.DType) (string, bool) {
	switch dt {
	case graph.Uint8, graph.Int8, graph.Bool:
		return "u8", true
	case graph.Uint16, graph.Int16, graph.Float16, graph.BFloat16:
		return "u16", true
	case graph.Float, graph.Int32, graph.Uint32:
		return "u32", true
	case graph.Double, graph.Int64, graph.Uint64:
		return "u64", true
	}
	return "", false
}

func declineWidth(dt tensor.DType) string {
	return "host: the movement kernels copy numeric and bool elements, got " + dt.String()
}

// copyAxis is one axis of a strided copy: its size and the element strides of the source and
// the destination along it.
type copyAxis struct {
	n      int64
	xs, ys int64
}

// coalesceCopy drops axes of size 1 and merges neighbours that are contiguous in both source
// and destination, which turns most copies into few long inner loops. The result has at
// least one axis.
func coalesceCopy(axes []copyAxis) []copyAxis {
	var out []copyAxis
	for _, a := range axes {
		if a.n == 1 {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].xs == a.xs*a.n && out[k].ys == a.ys*a.n {
			out[k] = copyAxis{n: out[k].n * a.n, xs: a.xs, ys: a.ys}
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		out = []copyAxis{{n: 1, xs: 0, ys: 1}}
	}
	return out
}

// contiguousStrides are the row-major element strides of shape.
func contiguousStrides(shape []int64) []int64 {
	st := make([]int64, len(shape))
	s := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	return st
}

// tile is a thread block shape (BX threads along the innermost axis, BY along the next).
type tile struct{ bx, by int64 }

// movementTiles are the block shapes the rank-6 kernels are specialized for: 256 threads each,
// at least 16 along x (a full AVX-512 vector of 4-byte elements) except for single columns.
var movementTiles = []tile{{256, 1}, {32, 8}, {16, 16}, {1, 256}}

// pickTile chooses the block shape that covers [rows, cols] with the fewest idle threads
// (ties go to the wider tile).
func pickTile(rows, cols int64) tile {
	best, bestArea := movementTiles[0], int64(-1)
	for _, t := range movementTiles {
		area := (rows + t.by - 1) / t.by * t.by * ((cols + t.bx - 1) / t.bx * t.bx)
		if bestArea < 0 || area < bestArea {
			best, bestArea = t, area
		}
	}
	return best
}

func (t tile) config(cfg map[string]string) map[string]string {
	cfg["BX"] = strconv.FormatInt(t.bx, 10)
	cfg["BY"] = strconv.FormatInt(t.by, 10)
	return cfg
}

func bits64(v int64) uint64 { return uint64(v) }

// A strided copy whose rows are long runs (concatenating a KV cache, slicing along an outer axis)
// takes blocks of longRunTile: 4 KiB of 4-byte elements a block rather than 1 KiB, since a host
// block's fixed cost (its checks and position) is about that of copying 1 KiB
// (go/session's BenchmarkKernelOpsVsHost/concat_kv_cache: 1.5x). CUDA blocks may have 1,024 threads.
const longRun = 4096

var longRunTile = tile{1024, 1}

// A copy that transposes its last two axes (the output's innermost axis strided in the input,
// the next one contiguous there) takes blocks of transposeTile: a block then reads 32 elements
// of each of 8 input rows, where a 256x1 block reads one element of 256 rows, a cache line and
// a page apiece. On the host a 1024x1024 f32 transpose goes from 7.0 to 1.3 ms, 512x512 from
// 0.26 to 0.17 ms, 128x128 stays 0.01 ms (tools/devicecheck/bench.py --ep host --scale S,
// Zen 5, 2026-12-04); 16x16 blocks were faster at 1024x1024 (1.0 ms) and slower below.
var transposeTile = tile{32, 8}

// stridedCopyCall copies src into dst along axes (outermost first) with the element offsets
// xoff and yoff; ok is false when the coalesced copy has more than six axes.
func stridedCopyCall(width string, axes []copyAxis, xoff, yoff int64, src, dst ops.Operand) (ops.KernelCall, bool) {
	ax := coalesceCopy(axes)
	if ax[len(ax)-1].ys != 1 {
		ax = append(ax, copyAxis{n: 1, xs: 0, ys: 1})
	}
	if len(ax) > movementRank {
		return ops.KernelCall{}, false
	}
	for len(ax) < movementRank {
		ax = append([]copyAxis{{n: 1}}, ax...)
	}
	rev := [2]bool{}
	for k := 4; k < 6; k++ {
		if ax[k].xs < 0 {
			// Walk the axis backwards from its last element so that the view's strides are
			// non-negative.
			xoff += (ax[k].n - 1) * ax[k].xs
			ax[k].xs = -ax[k].xs
			rev[k-4] = true
		}
	}
	args := make([]uint64, 0, 21)
	for _, a := range ax {
		args = append(args, bits64(a.n))
	}
	for _, a := range ax {
		args = append(args, bits64(a.xs))
	}
	for _, a := range ax[:5] {
		args = append(args, bits64(a.ys))
	}
	args = append(args, bits64(xoff), bits64(yoff))
	t := pickTile(ax[4].n, ax[5].n)
	if ax[5].n >= longRun {
		t = longRunTile
	}
	if ax[5].xs != 1 && ax[4].xs == 1 && ax[4].n >= transposeTile.by*4 && ax[5].n >= transposeTile.bx {
		t = transposeTile
	}
	var dims [movementRank]int64
	for k, a := range ax {
		dims[k] = a.n
	}
	args = blockSplitArgs(args, dims, t.bx, t.by)
	cfg := t.config(map[string]string{"T": width,
		"REV4": strconv.FormatBool(rev[0]), "REV5": strconv.FormatBool(rev[1]), "UNIT": strconv.FormatBool(ax[5].xs == 1)})
	return ops.KernelCall{File: movementFile, Symbol: "strided_copy", Config: cfg, Args: args, Workload: args[:6],
		Bind: []ops.KernelBinding{ops.ReadOf(src), ops.WriteOf(dst)}}, true
}

// copyPlan is the plan of an op whose one output is a strided copy of input 0.
func copyPlan(x ops.ValueInfo, out []int64, axes []copyAxis, xoff int64, reason string) (*ops.KernelPlan, string) {
	width, ok := widthType(x.Dtype)
	if !ok {
		return nil, declineWidth(x.Dtype)
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: x.Dtype, Shape: out}}, Reason: reason}
	if ops.Numel(out) == 0 {
		return p, ""
	}
	call, ok := stridedCopyCall(width, axes, xoff, 0, ops.InputOperand(0), ops.OutputOperand(0))
	if !ok {
		return nil, "host: the copy needs more than 6 axes after merging contiguous ones"
	}
	p.Calls = []ops.KernelCall{call}
	if contiguousCopy(axes) {
		p.Views = []int64{xoff}
	}
	return p, ""
}

// contiguousCopy reports whether a copy of these axes reads its source in the order it writes
// the output, element after element (every axis it steps through strides the source as the
// output does): the output is then the source's range from the copy's offset.
func contiguousCopy(axes []copyAxis) bool {
	for _, a := range axes {
		if a.n > 1 && a.xs != a.ys {
			return false
		}
	}
	return true
}

// identityCopyPlan copies input 0 unchanged (no-op reductions and casts to the same type).
func identityCopyPlan(x ops.ValueInfo, reason string) (*ops.KernelPlan, string) {
	n := int64(ops.Numel(x.Shape))
	return copyPlan(x, append([]int64{}, x.Shape...), []copyAxis{{n: n, xs: 1, ys: 1}}, 0, reason)
}

func needInput(in []ops.ValueInfo, i int) bool { return i < len(in) && in[i].Present }

// staticInts reads an integer input known before the run; ok is false when it is not.
func staticInts(in []ops.ValueInfo, i int) ([]int64, bool) {
	if !needInput(in, i) || !in[i].Static.IsValid() {
		return nil, false
	}
	switch in[i].Static.DType() {
	case graph.Int64, graph.Int32:
		return tensor.Int64s(in[i].Static), true
	}
	return nil, false
}

func PlanTranspose(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("Transpose needs an input")
	}
	x := in[0]
	r := len(x.Shape)
	perm := make([]int, r)
	if p := n.AttrInts("perm"); len(p) > 0 {
		if len(p) != r {
			return nil, "", ops.OpErr("perm %v for rank %d", p, r)
		}
		seen := make([]bool, r)
		for i, v := range p {
			if v < 0 || v >= int64(r) || seen[v] {
				return nil, "", ops.OpErr("perm %v is not a permutation of %d axes", p, r)
			}
			seen[v] = true
			perm[i] = int(v)
		}
	} else {
		for i := range perm {
			perm[i] = r - 1 - i
		}
	}
	out := make([]int64, r)
	for i, p := range perm {
		out[i] = x.Shape[p]
	}
	xst, yst := contiguousStrides(x.Shape), contiguousStrides(out)
	axes := make([]copyAxis, r)
	for i, p := range perm {
		axes[i] = copyAxis{n: out[i], xs: xst[p], ys: yst[i]}
	}
	p, reason := copyPlan(x, out, axes, 0, "Loom kernel: strided copy")
	return p, reason, nil
}

func PlanConcat(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	var parts []int
	for i, v := range in {
		if v.Present {
			parts = append(parts, i)
		}
	}
	if len(parts) == 0 {
		return nil, "", ops.OpErr("Concat needs at least one input")
	}
	first := in[parts[0]]
	r := len(first.Shape)
	if r == 0 {
		return nil, "", ops.OpErr("Concat of scalars")
	}
	ax, err := ops.NormAxis(n.AttrInt("axis", 0), r)
	if err != nil {
		return nil, "", err
	}
	out := append([]int64{}, first.Shape...)
	out[ax] = 0
	for _, i := range parts {
		v := in[i]
		if v.Dtype != first.Dtype {
			return nil, "", ops.OpErr("Concat inputs of types %s and %s", first.Dtype, v.Dtype)
		}
		if len(v.Shape) != r {
			return nil, "", ops.OpErr("Concat inputs of ranks %d and %d", r, len(v.Shape))
		}
		for k, d := range v.Shape {
			if k != ax && d != first.Shape[k] {
				return nil, "", ops.OpErr("Concat inputs %v and %v differ off axis %d", first.Shape, v.Shape, ax)
			}
		}
		out[ax] += v.Shape[ax]
	}
	width, ok := widthType(first.Dtype)
	if !ok {
		return nil, declineWidth(first.Dtype), nil
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: first.Dtype, Shape: out}}, Reason: "Loom kernel: one strided copy per input"}
	if ops.Numel(out) == 0 {
		return p, "", nil
	}
	outer := int64(ops.Numel(out[:ax]))
	inner := int64(ops.Numel(out[ax+1:]))
	total := out[ax] * inner
	base := int64(0)
	for _, i := range parts {
		chunk := in[i].Shape[ax] * inner
		if chunk > 0 && outer > 0 {
			call, ok := stridedCopyCall(width, []copyAxis{{n: outer, xs: chunk, ys: total}, {n: chunk, xs: 1, ys: 1}}, 0, base,
				ops.InputOperand(i), ops.OutputOperand(0))
			if !ok {
				return nil, "host: the copy needs more than 6 axes", nil
			}
			p.Calls = append(p.Calls, call)
		}
		base += chunk
	}
	return p, "", nil
}

// PlanSplit: one strided copy per output (a part of input 0 along the axis, movement.SplitParts).
// The split input must be known before the run.
func PlanSplit(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("Split needs an input")
	}
	x := in[0]
	var given []int64
	if opset >= 13 && needInput(in, 1) {
		var ok bool
		if given, ok = staticInts(in, 1); !ok {
			return nil, "host: Split's split input must be known before the run", nil
		}
	}
	if len(x.Shape) == 0 {
		return nil, "", ops.OpErr("Split of a scalar")
	}
	ax, parts, err := movement.SplitParts(n, opset, x.Shape, given)
	if err != nil {
		return nil, "", ops.OpErr("%v", err)
	}
	width, ok := widthType(x.Dtype)
	if !ok {
		return nil, declineWidth(x.Dtype), nil
	}
	p := &ops.KernelPlan{Reason: "Loom kernel: one strided copy per output"}
	outer := int64(ops.Numel(x.Shape[:ax]))
	inner := int64(ops.Numel(x.Shape[ax+1:]))
	total := x.Shape[ax] * inner
	base := int64(0)
	for i, s := range parts {
		shape := slices.Clone(x.Shape)
		shape[ax] = s
		p.Outputs = append(p.Outputs, ops.ValueType{Dtype: x.Dtype, Shape: shape})
		chunk := s * inner
		if chunk > 0 && outer > 0 {
			call, ok := stridedCopyCall(width, []copyAxis{{n: outer, xs: total, ys: chunk}, {n: chunk, xs: 1, ys: 1}}, base, 0,
				ops.InputOperand(0), ops.OutputOperand(i))
			if !ok {
				return nil, "host: the copy needs more than 6 axes", nil
			}
			p.Calls = append(p.Calls, call)
		}
		base += chunk
	}
	// With nothing before the split axis longer than one, each part is a contiguous range of
	// the input.
	if outer == 1 && inner > 0 && !slices.Contains(parts, 0) {
		base = 0
		for _, s := range parts {
			p.Views = append(p.Views, base)
			base += s * inner
		}
	}
	return p, "", nil
}

// sliceParams reads Slice's starts, ends, axes and steps (attributes before opset 10, static
// inputs after); ok is false when an input is not known before the run.
func sliceParams(n *graph.Node, opset int64, in []ops.ValueInfo) (starts, ends, axes, steps []int64, ok bool) {
	if opset < 10 {
		return n.AttrInts("starts"), n.AttrInts("ends"), n.AttrInts("axes"), nil, true
	}
	if starts, ok = staticInts(in, 1); !ok {
		return
	}
	if ends, ok = staticInts(in, 2); !ok {
		return
	}
	if needInput(in, 3) {
		if axes, ok = staticInts(in, 3); !ok {
			return
		}
	}
	if needInput(in, 4) {
		if steps, ok = staticInts(in, 4); !ok {
			return
		}
	}
	return starts, ends, axes, steps, true
}

func PlanSlice(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("Slice needs an input")
	}
	x := in[0]
	starts, ends, axes, steps, ok := sliceParams(n, opset, in)
	if !ok {
		return nil, "host: Slice's starts, ends, axes and steps must be known before the run", nil
	}
	r := len(x.Shape)
	if len(ends) != len(starts) || (len(axes) > 0 && len(axes) != len(starts)) || (len(steps) > 0 && len(steps) != len(starts)) {
		return nil, "", ops.OpErr("Slice: starts %v, ends %v, axes %v and steps %v differ in length", starts, ends, axes, steps)
	}
	if len(axes) == 0 {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	begin, step := make([]int64, r), make([]int64, r)
	out := append([]int64{}, x.Shape...)
	for i := range step {
		step[i] = 1
	}
	seen := make([]bool, r)
	for i, a := range axes {
		ax, err := ops.NormAxis(a, r)
		if err != nil {
			return nil, "", err
		}
		if r == 0 {
			return nil, "", ops.OpErr("Slice of a scalar")
		}
		if seen[ax] {
			return nil, "host: Slice's axes repeat an axis", nil
		}
		seen[ax] = true
		d := x.Shape[ax]
		k := int64(1)
		if len(steps) > i {
			k = steps[i]
		}
		if k == 0 {
			return nil, "", ops.OpErr("Slice: step 0 on axis %d", ax)
		}
		begin[ax], out[ax] = movement.SliceBounds(starts[i], ends[i], k, d)
		step[ax] = k
	}
	xst, yst := contiguousStrides(x.Shape), contiguousStrides(out)
	cp := make([]copyAxis, r)
	xoff := int64(0)
	for k := range cp {
		cp[k] = copyAxis{n: out[k], xs: xst[k] * step[k], ys: yst[k]}
		if out[k] > 0 {
			xoff += begin[k] * xst[k]
		}
	}
	p, reason := copyPlan(x, out, cp, xoff, "Loom kernel: strided copy")
	return p, reason, nil
}

func PlanGather(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) {
		return nil, "", ops.OpErr("Gather needs data and indices")
	}
	x, ind := in[0], in[1]
	ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Shape))
	if err != nil {
		return nil, "", err
	}
	if len(x.Shape) == 0 {
		return nil, "", ops.OpErr("Gather from a scalar")
	}
	var it string
	switch ind.Dtype {
	case graph.Int64:
		it = "i64"
	case graph.Int32:
		it = "i32"
	default:
		return nil, "host: the gather kernel takes int64 or int32 indices, got " + ind.Dtype.String(), nil
	}
	width, ok := widthType(x.Dtype)
	if !ok {
		return nil, declineWidth(x.Dtype), nil
	}
	dim := x.Shape[ax]
	if ind.Static.IsValid() {
		for _, g := range tensor.Int64s(ind.Static) {
			if g < -dim || g >= dim {
				return nil, "", ops.OpErr("Gather: index %d out of range [%d, %d)", g, -dim, dim)
			}
		}
	}
	out := append(append(append([]int64{}, x.Shape[:ax]...), ind.Shape...), x.Shape[ax+1:]...)
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: x.Dtype, Shape: out}},
		Reason: "Loom kernel: gather (indices outside the axis are skipped by the guarded read and flagged)"}
	if ops.Numel(out) == 0 {
		// No element to copy, but indices the run gives must still be in range (ONNX: an
		// index out of bounds is an error), and no kernel runs to flag one: the host checks
		// them.
		if ops.Numel(ind.Shape) > 0 && !ind.Static.IsValid() {
			return nil, "host: the output is empty, and the host checks the indices", nil
		}
		return p, "", nil
	}
	outer, nidx, inner := int64(ops.Numel(x.Shape[:ax])), int64(ops.Numel(ind.Shape)), int64(ops.Numel(x.Shape[ax+1:]))
	t := pickTile(nidx, inner)
	args := fastDivArgs([]uint64{bits64(outer), bits64(nidx), bits64(inner), bits64(dim)}, cdiv(inner, t.bx), cdiv(nidx, t.by))
	p.Calls = []ops.KernelCall{{File: movementFile, Symbol: "gather",
		Config: t.config(map[string]string{"T": width, "IT": it}), Args: args, Workload: args[:3],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}

// broadcastCopyAxes describes reading x broadcast to out as copy axes.
func broadcastCopyAxes(x, out []int64) ([]copyAxis, error) {
	st, err := ops.BroadcastStrides(x, out)
	if err != nil {
		return nil, err
	}
	yst := contiguousStrides(out)
	axes := make([]copyAxis, len(out))
	for k := range axes {
		axes[k] = copyAxis{n: out[k], xs: int64(st[k]), ys: yst[k]}
	}
	return axes, nil
}

func PlanExpand(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) {
		return nil, "", ops.OpErr("Expand needs an input and a shape")
	}
	shape, ok := staticInts(in, 1)
	if !ok {
		return nil, "host: Expand's shape must be known before the run", nil
	}
	out, err := ops.BroadcastShapes(in[0].Shape, shape)
	if err != nil {
		return nil, "", err
	}
	axes, err := broadcastCopyAxes(in[0].Shape, out)
	if err != nil {
		return nil, "", err
	}
	p, reason := copyPlan(in[0], out, axes, 0, "Loom kernel: broadcast copy")
	return p, reason, nil
}

func PlanTile(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) {
		return nil, "", ops.OpErr("Tile needs an input and repeats")
	}
	reps, ok := staticInts(in, 1)
	if !ok {
		return nil, "host: Tile's repeats must be known before the run", nil
	}
	x := in[0]
	if len(reps) != len(x.Shape) {
		return nil, "", ops.OpErr("Tile: repeats %v for rank %d", reps, len(x.Shape))
	}
	out := make([]int64, len(reps))
	// Output axis k of size reps[k]·d[k] is [reps[k], d[k]] in row-major order: the tile
	// index with source stride 0, then the position in x.
	split := make([]int64, 0, 2*len(reps))
	for k, r := range reps {
		if r < 0 {
			return nil, "", ops.OpErr("Tile: negative repeat %d", r)
		}
		if r > 0 && x.Shape[k] > math.MaxInt64/r {
			return nil, "", ops.OpErr("Tile: axis %d of %d repeated %d times overflows 64 bits", k, x.Shape[k], r)
		}
		out[k] = x.Shape[k] * r
		split = append(split, r, x.Shape[k])
	}
	xst, yst := contiguousStrides(x.Shape), contiguousStrides(split)
	axes := make([]copyAxis, 0, len(split))
	for k := range reps {
		axes = append(axes, copyAxis{n: reps[k], xs: 0, ys: yst[2*k]}, copyAxis{n: x.Shape[k], xs: xst[k], ys: yst[2*k+1]})
	}
	p, reason := copyPlan(x, out, axes, 0, "Loom kernel: broadcast copy")
	return p, reason, nil
}

// broadcastAxes coalesces the axes of an elementwise op over out whose operands are read
// with the given strides (one set per operand, 0 along broadcast axes), and pads them to
// rank 6; ok is false when more than six axes remain.
func broadcastAxes(out []int64, strides ...[]int) (dims [movementRank]int64, st [][movementRank]int64, ok bool) {
	type axis struct {
		n  int64
		st []int64
	}
	var ax []axis
	for k, d := range out {
		if d == 1 {
			continue
		}
		s := make([]int64, len(strides))
		for j := range strides {
			s[j] = int64(strides[j][k])
		}
		if m := len(ax) - 1; m >= 0 {
			merge := true
			for j := range s {
				merge = merge && ax[m].st[j] == s[j]*d
			}
			if merge {
				ax[m] = axis{n: ax[m].n * d, st: s}
				continue
			}
		}
		ax = append(ax, axis{n: d, st: s})
	}
	if len(ax) > movementRank {
		return dims, nil, false
	}
	st = make([][movementRank]int64, len(strides))
	for k := range dims {
		dims[k] = 1
	}
	for i, a := range ax {
		k := movementRank - len(ax) + i
		dims[k] = a.n
		for j := range strides {
			st[j][k] = a.st[j]
		}
	}
	return dims, st, true
}

// innerStrides sets in cfg, under names[k], operand k's inner stride from broadcastAxes (the
// AS5, BS5 and CS5 specializations of binary, compare and where), skipping empty names. After
// the merging it is 0 (broadcast along the inner axis) or 1 (the operands are contiguous); an
// inner axis of one element takes 1 for every operand (the stride never multiplies), so that
// no variant has them all 0. A stride of any other value is left to run time.
func innerStrides(cfg map[string]string, dims [movementRank]int64, st [][movementRank]int64, names ...string) map[string]string {
	for k, name := range names {
		v := st[k][movementRank-1]
		if dims[movementRank-1] == 1 {
			v = 1
		}
		if name != "" && (v == 0 || v == 1) {
			cfg[name] = strconv.FormatInt(v, 10)
		}
	}
	return cfg
}

func PlanWhere(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) || !needInput(in, 2) {
		return nil, "", ops.OpErr("Where needs a condition and two values")
	}
	c, a, b := in[0], in[1], in[2]
	if c.Dtype != graph.Bool {
		return nil, "", ops.OpErr("Where: condition of type %s, want bool", c.Dtype)
	}
	if a.Dtype != b.Dtype {
		return nil, "", ops.OpErr("Where: values of types %s and %s", a.Dtype, b.Dtype)
	}
	width, ok := widthType(a.Dtype)
	if !ok {
		return nil, declineWidth(a.Dtype), nil
	}
	s1, err := ops.BroadcastShapes(c.Shape, a.Shape)
	if err != nil {
		return nil, "", err
	}
	out, err := ops.BroadcastShapes(s1, b.Shape)
	if err != nil {
		return nil, "", err
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: a.Dtype, Shape: out}}, Reason: "Loom kernel: broadcast select"}
	if ops.Numel(out) == 0 {
		return p, "", nil
	}
	cs, _ := ops.BroadcastStrides(c.Shape, out)
	as, _ := ops.BroadcastStrides(a.Shape, out)
	bs, _ := ops.BroadcastStrides(b.Shape, out)
	dims, st, ok := broadcastAxes(out, cs, as, bs)
	if !ok {
		return nil, "host: the where kernel covers 6 axes after merging", nil
	}
	args := make([]uint64, 0, 24)
	for _, d := range dims {
		args = append(args, bits64(d))
	}
	for _, s := range st {
		for _, v := range s {
			args = append(args, bits64(v))
		}
	}
	t := pickTile(dims[4], dims[5])
	args = blockSplitArgs(args, dims, t.bx, t.by)
	p.Calls = []ops.KernelCall{{File: movementFile, Symbol: "where", Config: t.config(innerStrides(map[string]string{"T": width}, dims, st, "CS5", "AS5", "BS5")),
		Args: args, Workload: args[:6],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(ops.InputOperand(2)), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}

// padModes maps Pad's mode attribute to the pad kernel's MODE.
var padModes = map[string]string{"constant": kernels.PadConstant, "reflect": kernels.PadReflect, "edge": kernels.PadEdge}

func PlanPad(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("Pad needs an input")
	}
	x := in[0]
	r := len(x.Shape)
	mode := n.AttrString("mode", "constant")
	code, ok := padModes[mode]
	if !ok {
		return nil, "host: the pad kernel covers constant, reflect and edge, not " + mode, nil
	}
	width, ok := widthType(x.Dtype)
	if !ok {
		return nil, declineWidth(x.Dtype), nil
	}
	var pads []int64
	hasValue := false
	if opset < 11 {
		pads = n.AttrInts("pads")
		if opset < 2 {
			pads = n.AttrInts("paddings")
		}
		if n.AttrFloat("value", 0) != 0 {
			return nil, "host: the pad kernel reads a constant value from an input (opset 11)", nil
		}
	} else {
		if pads, ok = staticInts(in, 1); !ok {
			return nil, "host: Pad's pads must be known before the run", nil
		}
		if needInput(in, 2) {
			if in[2].Dtype != x.Dtype {
				return nil, "", ops.OpErr("Pad: constant value of type %s for %s data", in[2].Dtype, x.Dtype)
			}
			if ops.Numel(in[2].Shape) != 1 {
				return nil, "", ops.OpErr("Pad: constant value of shape %v, want one element", in[2].Shape)
			}
			hasValue = mode == "constant"
		}
	}
	full := make([]int64, 2*r)
	if needInput(in, 3) && opset >= 18 {
		axes, ok := staticInts(in, 3)
		if !ok {
			return nil, "host: Pad's axes must be known before the run", nil
		}
		if len(pads) != 2*len(axes) {
			return nil, "", ops.OpErr("Pad: pads %v for axes %v", pads, axes)
		}
		for i, a := range axes {
			ax, err := ops.NormAxis(a, r)
			if err != nil {
				return nil, "", err
			}
			full[ax], full[ax+r] = pads[i], pads[i+len(axes)]
		}
	} else if len(pads) == 2*r {
		copy(full, pads)
	} else {
		return nil, "", ops.OpErr("Pad: pads %v for rank %d", pads, r)
	}
	if r > movementRank {
		return nil, "host: the pad kernel covers rank <= 6", nil
	}
	out := make([]int64, r)
	for k := range out {
		out[k] = x.Shape[k] + full[k] + full[k+r]
		if out[k] < 0 {
			return nil, "", ops.OpErr("Pad: pads %v crop axis %d of size %d below zero", pads, k, x.Shape[k])
		}
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: x.Dtype, Shape: out}}, Reason: "Loom kernel: pad (" + mode + ")"}
	if ops.Numel(out) == 0 {
		return p, "", nil
	}
	if mode != "constant" && ops.Numel(x.Shape) == 0 {
		return nil, "host: " + mode + " padding of an empty tensor", nil
	}
	var d, e, pb [movementRank]int64
	for k := range d {
		d[k], e[k] = 1, 1
	}
	for k := 0; k < r; k++ {
		j := movementRank - r + k
		d[j], e[j], pb[j] = out[k], x.Shape[k], full[k]
	}
	args := make([]uint64, 0, 18)
	for _, v := range [][movementRank]int64{d, e, pb} {
		for _, a := range v {
			args = append(args, bits64(a))
		}
	}
	cv := ops.InputOperand(0) // not read without HASV
	if hasValue {
		cv = ops.InputOperand(2)
	}
	p.Calls = []ops.KernelCall{{File: movementFile, Symbol: "pad",
		Config: pickTile(d[4], d[5]).config(map[string]string{"T": width, "MODE": code, "HASV": strconv.FormatBool(hasValue)}),
		Args:   args, Workload: args[:6],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(cv), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}

// castTypes are the element types the cast kernel converts between, by Loom name.
var castTypes = map[tensor.DType]string{
	graph.Float: "f32", graph.Double: "f64", graph.Int8: "i8", graph.Int16: "i16", graph.Int32: "i32",
	graph.Int64: "i64", graph.Uint8: "u8", graph.Uint16: "u16", graph.Uint32: "u32", graph.Uint64: "u64",
	graph.Bool: "i1",
}

func PlanCast(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("Cast needs an input")
	}
	x := in[0]
	to := tensor.DType(n.AttrInt("to", 0))
	if to == x.Dtype {
		p, reason := identityCopyPlan(x, "Loom kernel: copy (cast to the same type)")
		return p, reason, nil
	}
	src, ok1 := castTypes[x.Dtype]
	dst, ok2 := castTypes[to]
	if !ok1 || !ok2 {
		return nil, fmt.Sprintf("host: the cast kernel does not convert %s to %s", x.Dtype, to), nil
	}
	if x.Dtype.IsFloat() && (to == graph.Uint8 || to == graph.Uint16 || to == graph.Uint32 || to == graph.Uint64) {
		// The host wraps negative values through int64; Loom saturates them.
		return nil, fmt.Sprintf("host: %s to unsigned %s keeps the host's wrap-around", x.Dtype, to), nil
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: to, Shape: append([]int64{}, x.Shape...)}}, Reason: "Loom kernel: elementwise conversion"}
	count := ops.Numel(x.Shape)
	if count == 0 {
		return p, "", nil
	}
	symbol, cfg := "cast", map[string]string{"S": src, "D": dst}
	switch {
	case to == graph.Bool:
		symbol, cfg = "cast_to_bool", map[string]string{"S": src}
	case x.Dtype == graph.Bool:
		symbol, cfg = "cast_from_bool", map[string]string{"D": dst}
	}
	p.Calls = []ops.KernelCall{{File: movementFile, Symbol: symbol, Config: cfg,
		Args: []uint64{U(count)}, Workload: []uint64{U(count)},
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}
