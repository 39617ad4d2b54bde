package kernelops

import (
	"math"
	"strconv"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// RNN, GRU and LSTM as Loom kernels (kernels/rnn.loom) for float32 operands with the
// default activations: the biases are combined once per run, X·Wᵀ is one bmm_nt over all
// time steps, then each time step is one fused launch (H·Rᵀ, gates, state update; two for a
// GRU without linear_before_reset), so a plan has O(seq_len) launches, which the compiled
// run plan replays. W and R are read in their ONNX layout.

func init() {
	ops.RegisterKernelOp("RNN", rnnPlanner(rnnCellRNN), hostFallback("RNN"))
	ops.RegisterKernelOp("GRU", rnnPlanner(rnnCellGRU), hostFallback("GRU"))
	ops.RegisterKernelOp("LSTM", rnnPlanner(rnnCellLSTM), hostFallback("LSTM"))
}

type rnnCell int

const (
	rnnCellRNN rnnCell = iota
	rnnCellGRU
	rnnCellLSTM
)

// gates and defaults give the cell's gate count and default activation list.
func (c rnnCell) gates() int { return [...]int{1, 3, 4}[c] }

func (c rnnCell) defaults() []string {
	return [...][]string{{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}}[c]
}

// rnnDefaultActivations reports whether the node's activations are the cell's defaults for
// every direction (given once, or once per direction).
func rnnDefaultActivations(n *graph.Node, dirs int, defaults []string) bool {
	a := n.Attr("activations")
	if a == nil || len(a.Strings) == 0 {
		return true
	}
	if len(a.Strings) != len(defaults) && len(a.Strings) != len(defaults)*dirs {
		return false
	}
	for i, s := range a.Strings {
		if !strings.EqualFold(string(s), defaults[i%len(defaults)]) {
			return false
		}
	}
	return true
}

func rnnPlanner(cell rnnCell) ops.KernelPlanner {
	return func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		return planRNN(cell, nd, in)
	}
}

func planRNN(cell rnnCell, nd *graph.Node, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	present := func(i int) bool { return i < len(in) && in[i].Present }
	if len(in) < 3 || !allFloat32(in, 0, 1, 2) {
		return nil, declineType(in), nil
	}
	for _, i := range []int{3, 5, 6, 7} {
		if present(i) && in[i].Dtype != graph.Float {
			return nil, declineType(in), nil
		}
	}
	if cell != rnnCellLSTM && (present(6) || present(7)) {
		return nil, "", ops.OpErr("%s has no inputs initial_c and P", nd.OpType)
	}
	x, w, r := in[0].Shape, in[1].Shape, in[2].Shape
	if len(x) != 3 || len(w) != 3 || len(r) != 3 {
		return nil, "", ops.OpErr("X %v, W %v and R %v must all be rank 3", x, w, r)
	}
	layout := nd.AttrInt("layout", 0)
	if layout != 0 && layout != 1 {
		return nil, "", ops.OpErr("layout %d is not 0 or 1", layout)
	}
	seq, batch, inSize := int(x[0]), int(x[1]), int(x[2])
	if layout == 1 {
		seq, batch = batch, seq
	}
	dirs, rev0 := 1, 0
	switch dir := nd.AttrString("direction", "forward"); dir {
	case "forward":
	case "reverse":
		rev0 = 1
	case "bidirectional":
		dirs = 2
	default:
		return nil, "", ops.OpErr("direction %q is not forward, reverse or bidirectional", dir)
	}
	gates := cell.gates()
	hidden := int(nd.AttrInt("hidden_size", r[2]))
	gh := gates * hidden
	if int(w[0]) != dirs || int(w[1]) != gh || int(w[2]) != inSize {
		return nil, "", ops.OpErr("W shape %v, want [%d %d %d]", w, dirs, gh, inSize)
	}
	if int(r[0]) != dirs || int(r[1]) != gh || int(r[2]) != hidden {
		return nil, "", ops.OpErr("R shape %v, want [%d %d %d]", r, dirs, gh, hidden)
	}
	if present(3) && ops.Numel(in[3].Shape) != dirs*2*gh {
		return nil, "", ops.OpErr("B has %d elements, want %d", ops.Numel(in[3].Shape), dirs*2*gh)
	}
	state := []int64{int64(dirs), int64(batch), int64(hidden)}
	if layout == 1 {
		state = []int64{int64(batch), int64(dirs), int64(hidden)}
	}
	for _, i := range []int{5, 6} {
		if present(i) && ops.Numel(in[i].Shape) != dirs*batch*hidden {
			return nil, "", ops.OpErr("initial state (input %d) shape %v, want %v", i, in[i].Shape, state)
		}
	}
	if present(7) && ops.Numel(in[7].Shape) != dirs*3*hidden {
		return nil, "", ops.OpErr("P has %d elements, want %d", ops.Numel(in[7].Shape), dirs*3*hidden)
	}
	if !rnnDefaultActivations(nd, dirs, cell.defaults()) {
		return nil, "host: the kernels cover the default activations only", nil
	}
	if cell == rnnCellLSTM && nd.AttrInt("input_forget", 0) != 0 {
		return nil, "host: input_forget is not covered", nil
	}
	lens := false
	if present(4) {
		l := in[4]
		if l.Dtype != graph.Int32 {
			return nil, "host: the kernels read sequence_lens as int32", nil
		}
		if !l.Static.IsValid() {
			return nil, "host: sequence_lens is not known before the run", nil
		}
		if l.Static.Len() != batch {
			return nil, "", ops.OpErr("sequence_lens has %d elements for batch %d", l.Static.Len(), batch)
		}
		for _, v := range tensor.Int64s(l.Static) {
			if v < 0 || v > int64(seq) {
				return nil, "", ops.OpErr("sequence length %d outside [0, %d]", v, seq)
			}
			if v != int64(seq) {
				lens = true
			}
		}
	}
	if seq == 0 && batch*hidden > 0 {
		return nil, "host: an empty sequence", nil
	}

	// Outputs the node does not produce are declared empty and not written: the compiled
	// run plan has no memory for them.
	produced := func(j int) bool { return j < len(nd.Outputs) && nd.Outputs[j] != "" }
	y := []int64{int64(seq), int64(dirs), int64(batch), int64(hidden)}
	if layout == 1 {
		y = []int64{int64(batch), int64(seq), int64(dirs), int64(hidden)}
	}
	outs := [][]int64{y, state}
	if cell == rnnCellLSTM {
		outs = append(outs, state)
	}
	p := &ops.KernelPlan{Reason: reasonFloat32 + ", default activations, one launch per step"}
	for j, shape := range outs {
		if !produced(j) {
			shape = []int64{0}
		}
		p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: append([]int64{}, shape...)})
	}
	if batch*hidden == 0 {
		return p, "", nil
	}

	rowsN := seq * batch
	const f32 = 4
	const (
		sBias = iota
		sXW
		sState
		sY
	)
	p.Scratch = []int64{
		f32 * int64(dirs*(gates+1)*hidden),
		f32 * int64(dirs*rowsN*gh),
		f32 * int64(4*dirs*batch*hidden),
	}
	yOp := ops.OutputOperand(0)
	if !produced(0) {
		// rnn_step's Y view must fit its binding even when HAS_Y leaves it unwritten.
		p.Scratch = append(p.Scratch, f32*int64(hidden))
		yOp = ops.ScratchOperand(sY)
	}
	hasPeep := present(7)
	peep := ops.ScratchOperand(sBias) // bound but not read without peepholes
	if hasPeep {
		peep = ops.InputOperand(7)
	}

	// The combined biases.
	fold := gates
	if cell == rnnCellGRU {
		fold = 2 // the hidden gate's Rb goes inside (linear_before_reset) or after r ⊙ H
	}
	bsrc := ops.InputOperand(0)
	if present(3) {
		bsrc = ops.InputOperand(3)
	}
	cols := (gates + 1) * hidden
	biasArgs := []uint64{U(cols), U(dirs), U(hidden), U(gates), U(fold)}
	p.Calls = append(p.Calls, ops.KernelCall{File: "rnn.loom", Symbol: "rnn_bias", Config: map[string]string{"HAS_B": strconv.FormatBool(present(3))},
		Args: biasArgs, Workload: biasArgs[:2], Bind: []ops.KernelBinding{ops.ReadOf(bsrc), ops.WriteOf(ops.ScratchOperand(sBias))}})

	// X·Wᵀ for every step, rows in X's order.
	p.Calls = append(p.Calls, bmmSpec{m: rowsN, n: gh, k: inSize, dims: [3]int{1, 1, dirs}, as0: inSize, bs0: inSize,
		bBatch: [3]int{0, 0, gh * inSize}, cBatch: [3]int{0, 0, rowsN * gh},
		a: ops.InputOperand(0), b: ops.InputOperand(1), c: ops.ScratchOperand(sXW)}.callNT())

	// Initial states into slots 0 (H) and 2 (C).
	stateStrides := [2]int{batch * hidden, hidden}
	if layout == 1 {
		stateStrides = [2]int{hidden, dirs * hidden}
	}
	slot := dirs * batch * hidden
	p.Calls = append(p.Calls, rnnRowsIn(in, 5, ops.ScratchOperand(sState), stateStrides, dirs, batch, hidden, 0))
	if cell == rnnCellLSTM {
		p.Calls = append(p.Calls, rnnRowsIn(in, 6, ops.ScratchOperand(sState), stateStrides, dirs, batch, hidden, 2*slot))
	}

	// The steps.
	xd, xt, xb := rowsN*gh, batch*gh, gh
	yt, yd, yb := dirs*batch*hidden, batch*hidden, hidden
	if layout == 1 {
		xt, xb = gh, seq*gh
		yt, yd, yb = dirs*hidden, hidden, seq*dirs*hidden
	}
	if !produced(0) {
		yt, yd, yb = 0, 0, 0
	}
	clip := nd.AttrFloat("clip", 0)
	lensOp := ops.InputOperand(0)
	if lens {
		lensOp = ops.InputOperand(4)
	}
	type stepKernel struct{ cell, ng, g0 int }
	var kernels []stepKernel
	switch {
	case cell == rnnCellRNN:
		kernels = []stepKernel{{0, 1, 0}}
	case cell == rnnCellLSTM:
		kernels = []stepKernel{{1, 4, 0}}
	case nd.AttrInt("linear_before_reset", 0) != 0:
		kernels = []stepKernel{{2, 3, 0}}
	default:
		kernels = []stepKernel{{3, 2, 0}, {4, 1, 2}}
	}
	for step := range seq {
		cur := step % 2
		for _, k := range kernels {
			cfg := map[string]string{"CELL": strconv.Itoa(k.cell), "GATES": strconv.Itoa(gates), "NG": strconv.Itoa(k.ng),
				"G0": strconv.Itoa(k.g0), "CLIP": strconv.FormatBool(clip > 0), "PEEP": strconv.FormatBool(hasPeep), "LENS": strconv.FormatBool(lens),
				"HAS_Y": strconv.FormatBool(produced(0))}
			args := []uint64{U(hidden), U(batch), U(dirs), U(seq), U(step), U(cur), U(rev0), U(xd), U(xt), U(xb),
				U(yt), U(yd), U(yb), uint64(math.Float32bits(clip))}
			p.Calls = append(p.Calls, ops.KernelCall{File: "rnn.loom", Symbol: "rnn_step", Config: cfg, Args: args, Workload: args[:3],
				Bind: []ops.KernelBinding{ops.ReadOf(ops.ScratchOperand(sXW)), ops.ReadOf(ops.InputOperand(2)), ops.ReadOf(ops.ScratchOperand(sBias)),
					ops.ReadOf(peep), ops.ReadOf(lensOp), ops.ReadWriteOf(ops.ScratchOperand(sState)), ops.WriteOf(yOp)}})
		}
	}

	// Final states.
	last := seq % 2
	if produced(1) {
		p.Calls = append(p.Calls, rowsCall(ops.ScratchOperand(sState), ops.OutputOperand(1), dirs, batch, hidden, hidden,
			[3]int{batch * hidden, hidden, last * slot}, [3]int{stateStrides[0], stateStrides[1], 0}))
	}
	if cell == rnnCellLSTM && produced(2) {
		p.Calls = append(p.Calls, rowsCall(ops.ScratchOperand(sState), ops.OutputOperand(2), dirs, batch, hidden, hidden,
			[3]int{batch * hidden, hidden, 2 * slot}, [3]int{stateStrides[0], stateStrides[1], 0}))
	}
	return p, "", nil
}

// rowsCall copies src [r0, r1, n] (strides and offset s) to dst [r0, r1, w] (strides and
// offset t), zero-filling columns n..w-1 (rnn.loom:rows).
func rowsCall(src, dst ops.Operand, r0, r1, n, w int, s, t [3]int) ops.KernelCall {
	args := []uint64{U(w), U(r1), U(r0), U(n), U(s[0]), U(s[1]), U(s[2]), U(t[0]), U(t[1]), U(t[2])}
	return ops.KernelCall{File: "rnn.loom", Symbol: "rows", Args: args, Workload: args[:3], Bind: []ops.KernelBinding{ops.ReadOf(src), ops.WriteOf(dst)}}
}

// rnnRowsIn loads the initial state input i (zeros when absent) into dst at element offset
// off, as [dirs, batch, hidden].
func rnnRowsIn(in []ops.ValueInfo, i int, dst ops.Operand, strides [2]int, dirs, batch, hidden, off int) ops.KernelCall {
	if i < len(in) && in[i].Present {
		return rowsCall(ops.InputOperand(i), dst, dirs, batch, hidden, hidden, [3]int{strides[0], strides[1], 0}, [3]int{batch * hidden, hidden, off})
	}
	return rowsCall(ops.InputOperand(0), dst, dirs, batch, 0, hidden, [3]int{}, [3]int{batch * hidden, hidden, off})
}
