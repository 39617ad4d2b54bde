package mskernels

import (
	"math"
	"slices"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels"
)

// ONNX Runtime's transformer contrib ops (com.microsoft) on the shipped kernels, float32:
//
//   - SkipLayerNormalization: elementwise.loom's binary add (input + skip, then + bias) into
//     input_skip_bias_sum (or scratch), then norm.loom's norm_rows (gamma, beta) writing the
//     mean and 1/stddev to their outputs (or scratch).
//   - SkipSimplifiedLayerNormalization and SimplifiedLayerNormalization (RMS norms): the same
//     sum, then reduce.loom's ReduceSumSquare over each row, binary (ss + eps·n)/n, the
//     activation x^-0.5 (the inv_std_var output or scratch), binary x · inv and · gamma.
//   - FastGelu and BiasGelu: binary add of the bias (when given) into scratch, then norm.loom's
//     activation, GELU's tanh approximation or its erf form.
//   - MultiHeadAttention: bmm_nt, attn_softmax and bmm per (batch, head), reading the operands
//     by strides, then a transpose; with past KV or present outputs, the present buffers first
//     written by strided copies; the masks summed by binary adds, a (batch, total)
//     key_padding_mask made additive by cast and where (planMultiHeadAttention).
//   - RotaryEmbedding: gather, strided copies, binary and concatenation (planMSRotary).
//   - GroupQueryAttention: gqa.loom's gqa_kv (present KV: each sequence's past, then its new
//     keys, rotated, and values; the rotated query) and gqa_attn (the attention of each query
//     row over the keys its position sees), reading seqlens_k and total_sequence_length from
//     their buffers when they run and checking them (planGroupQueryAttention,
//     ops_kernels_gqa.go). A compiled plan specializes on total_sequence_length, which sets the
//     present outputs' length; seqlens_k stays a run-time value.
//
// The block-quantized ops (MatMulNBits, GatherBlockQuantized) are ops_kernels_msquant.go's.
//
// Inputs these shapes do not cover (or that are invalid) make the planners decline, and the
// host functions (go/session/internal/ops/nn/ops_ms.go) run, refusing bad inputs with their
// errors.

func init() {
	ms := graph.MSDomain + ":"
	ops.RegisterKernelOp(ms+"SkipLayerNormalization", skipNormPlanner(false), kernelops.HostFallback(ms+"SkipLayerNormalization"))
	ops.RegisterKernelOp(ms+"SkipSimplifiedLayerNormalization", skipNormPlanner(true), kernelops.HostFallback(ms+"SkipSimplifiedLayerNormalization"))
	ops.RegisterKernelOp("SimplifiedLayerNormalization", planSimplifiedLayerNorm, kernelops.HostFallback("SimplifiedLayerNormalization"))
	ops.RegisterKernelOp(ms+"FastGelu", biasGeluPlanner(kernels.ActivationGeluTanh), kernelops.HostFallback(ms+"FastGelu"))
	ops.RegisterKernelOp(ms+"BiasGelu", biasGeluPlanner(kernels.ActivationGeluErf), kernelops.HostFallback(ms+"BiasGelu"))
	ops.RegisterKernelOp(ms+"MultiHeadAttention", planMultiHeadAttention, kernelops.HostFallback(ms+"MultiHeadAttention"))
	ops.RegisterKernelOp(ms+"RotaryEmbedding", planMSRotary, kernelops.HostFallback(ms+"RotaryEmbedding"))
}

// The op library's files the planners here launch kernels of.
const (
	normFile   = "norm.loom"
	reduceFile = "reduce.loom"
)

// bits64 is an integer scalar argument of a launch, as its bits.
func bits64(v int64) uint64 { return uint64(v) }

// f32bits is a float32 scalar argument of a launch, as its bits.
func f32bits(v float32) uint64 { return uint64(math.Float32bits(v)) }

// named reports whether node n names output j.
func named(n *graph.Node, j int) bool { return j < len(n.Outputs) && n.Outputs[j] != "" }

// isVector reports whether input i is given as a float32 vector of h elements.
func isVector(in []ops.ValueInfo, i int, h int64) bool {
	return kernelops.NeedInput(in, i) && in[i].Dtype == graph.Float && len(in[i].Shape) == 1 && in[i].Shape[0] == h
}

// plannerScratch adds a scratch buffer of count float32s to p and returns its operand.
func plannerScratch(p *ops.KernelPlan, count int) ops.Operand {
	p.Scratch = append(p.Scratch, int64(count)*4)
	return ops.ScratchOperand(len(p.Scratch) - 1)
}

// binaryInto is binaryCall writing into dst instead of output 0.
func binaryInto(code string, out, a, b []int64, acc, scaled bool, scale float32, opA, opB, dst ops.Operand) (ops.KernelCall, bool) {
	c, ok := kernelops.BinaryCall(code, out, a, b, acc, scaled, scale, opA, opB)
	if ok {
		c.Bind[2] = ops.ReadWriteOf(dst)
	}
	return c, ok
}

// rmsCalls appends to p the launches of an RMS normalization of src [rows, cols] into dst:
// ss = Σx² per row, inv = ((ss + eps·cols) / cols)^-½ (into invOp), dst = (src · inv) · gamma.
func rmsCalls(p *ops.KernelPlan, rows, cols int, eps float32, src, gamma, invOp, dst ops.Operand) bool {
	rc := []int64{int64(rows), int64(cols)}
	r1 := []int64{int64(rows), 1}
	ss := plannerScratch(p, rows)
	f, ok := kernelops.ReduceFormOf(rc, []bool{false, true})
	if !ok || f[4] > 1 {
		return false
	}
	args := []uint64{bits64(f[0] * f[2]), bits64(f[0]), bits64(f[2]), bits64(f[1]), bits64(f[3]), uint64(math.Float32bits(1))}
	p.Calls = append(p.Calls, ops.KernelCall{File: reduceFile, Symbol: "reduce_rows", Config: map[string]string{"OP": kernels.ReduceSumSquare},
		Args: args, Workload: args[:1], Bind: []ops.KernelBinding{ops.ReadOf(src), ops.WriteOf(ss)}})
	p.Consts = append(p.Consts, tensor.MustTensor([]int64{}, []float32{eps * float32(cols)}))
	epsOp := ops.ConstOperand(len(p.Consts) - 1)
	ms := plannerScratch(p, rows)
	c1, ok1 := binaryInto(kernels.BinaryAdd, r1, r1, []int64{}, false, true, float32(1/float64(cols)), ss, epsOp, ms)
	c2 := ops.KernelCall{File: normFile, Symbol: "activation", Config: map[string]string{"OP": kernels.ActivationPow},
		Args: []uint64{f32bits(-0.5), 0, kernelops.U(rows)}, Workload: []uint64{kernelops.U(rows)},
		Bind: []ops.KernelBinding{ops.ReadOf(ms), ops.WriteOf(invOp)}}
	// (Two launches through scratch: the binary kernel ships ACC chaining for Add, Max and Min
	// only.)
	scaled := plannerScratch(p, rows*cols)
	c3, ok3 := binaryInto(kernels.BinaryMul, rc, rc, r1, false, false, 1, src, invOp, scaled)
	c4, ok4 := binaryInto(kernels.BinaryMul, rc, rc, []int64{int64(cols)}, false, false, 1, scaled, gamma, dst)
	if !ok1 || !ok3 || !ok4 {
		return false
	}
	p.Calls = append(p.Calls, c1, c2, c3, c4)
	return true
}

// skipNormPlanner plans SkipLayerNormalization (rms false) or SkipSimplifiedLayerNormalization.
func skipNormPlanner(rms bool) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if !kernelops.AllFloat32(in, 0, 1, 2) {
			return nil, kernelops.DeclineType(in), nil
		}
		x := in[0].Shape
		if len(x) != 2 && len(x) != 3 {
			return nil, "host: the input's rank is not 2 or 3", nil
		}
		h := x[len(x)-1]
		if _, err := ops.BroadcastStrides(in[1].Shape, x); err != nil || len(in[1].Shape) < 2 || in[1].Shape[len(in[1].Shape)-1] != h || !isVector(in, 2, h) {
			return nil, "host: skip or gamma do not fit the input", nil
		}
		beta, bias := -1, 4
		if rms {
			bias = 3
		} else if kernelops.NeedInput(in, 3) {
			beta = 3
		}
		if beta >= 0 && !isVector(in, beta, h) {
			return nil, "host: beta does not fit the input", nil
		}
		hasBias := kernelops.NeedInput(in, bias)
		if hasBias && !isVector(in, bias, h) {
			return nil, "host: bias does not fit the input", nil
		}
		rows, cols := ops.Numel(x[:len(x)-1]), int(h)
		stat := append([]int64{}, x...)
		stat[len(stat)-1] = 1
		p := &ops.KernelPlan{Reason: kernelops.ReasonFloat32 + ", skip and bias added, then normalized by rows"}
		for j, shape := range [][]int64{x, stat, stat, x} {
			if j == 0 || named(n, j) {
				p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: append([]int64{}, shape...)})
			} else {
				p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: []int64{0}})
			}
		}
		if rows*cols == 0 {
			return p, "", nil
		}
		out := func(j, count int) ops.Operand {
			if named(n, j) {
				return ops.OutputOperand(j)
			}
			return plannerScratch(p, count)
		}
		sum := out(3, rows*cols)
		c, ok := binaryInto(kernels.BinaryAdd, x, x, in[1].Shape, false, false, 1, ops.InputOperand(0), ops.InputOperand(1), sum)
		if !ok {
			return nil, "host: the binary kernel covers 6 axes after merging", nil
		}
		p.Calls = append(p.Calls, c)
		if hasBias {
			c, ok := binaryInto(kernels.BinaryAdd, x, []int64{}, []int64{h}, true, false, 1, ops.InputOperand(bias), ops.InputOperand(bias), sum)
			if !ok {
				return nil, "host: the binary kernel covers 6 axes after merging", nil
			}
			p.Calls = append(p.Calls, c)
		}
		eps := n.AttrFloat("epsilon", 1e-12)
		if rms {
			if named(n, 1) {
				return nil, "host: SkipSimplifiedLayerNormalization's mean output", nil
			}
			if !rmsCalls(p, rows, cols, eps, sum, ops.InputOperand(2), out(2, rows), ops.OutputOperand(0)) {
				return nil, "host: the reduce kernels do not cover the rows", nil
			}
			return p, "", nil
		}
		meanOp, invOp := out(1, rows), out(2, rows)
		betaMode, betaOp := "0", ops.InputOperand(0)
		if beta >= 0 {
			betaMode, betaOp = "1", ops.InputOperand(beta)
		}
		args := []uint64{kernelops.U(rows), kernelops.U(cols), 1, 1, f32bits(eps)}
		p.Calls = append(p.Calls, ops.KernelCall{File: normFile, Symbol: "norm_rows",
			Config: map[string]string{"SCOL": "true", "BIAS": betaMode}, Args: args, Workload: args[:1],
			Bind: []ops.KernelBinding{ops.ReadOf(sum), ops.ReadOf(ops.InputOperand(2)), ops.ReadOf(betaOp), ops.WriteOf(ops.OutputOperand(0)),
				ops.WriteOf(meanOp), ops.WriteOf(invOp)}})
		return p, "", nil
	}
}

// planSimplifiedLayerNorm plans SimplifiedLayerNormalization: the RMS norm over the axes from
// axis on, scale one value per normalized element.
func planSimplifiedLayerNorm(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !kernelops.AllFloat32(in, 0, 1) {
		return nil, kernelops.DeclineType(in), nil
	}
	x := in[0].Shape
	ax, err := ops.NormAxis(n.AttrInt("axis", -1), len(x))
	if err != nil {
		return nil, "host: axis out of range", nil
	}
	rows, cols := ops.Numel(x[:ax]), ops.Numel(x[ax:])
	if ops.Numel(in[1].Shape) != cols || (len(in[1].Shape) != 1 && !ops.SameShape(in[1].Shape, x[ax:])) {
		return nil, "host: the scale does not fit the normalized axes", nil
	}
	stat := append([]int64{}, x...)
	for k := ax; k < len(stat); k++ {
		stat[k] = 1
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x...)}}, Reason: kernelops.ReasonFloat32 + ", normalized by rows"}
	invOp := ops.OutputOperand(1)
	if named(n, 1) {
		p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: stat})
	}
	if rows*cols == 0 {
		return p, "", nil
	}
	if !named(n, 1) {
		invOp = plannerScratch(p, rows)
	}
	if !rmsCalls(p, rows, cols, n.AttrFloat("epsilon", 1e-5), ops.InputOperand(0), ops.InputOperand(1), invOp, ops.OutputOperand(0)) {
		return nil, "host: the reduce kernels do not cover the rows", nil
	}
	return p, "", nil
}

// biasGeluPlanner plans GELU (activation code) of X plus an optional bias over X's last axis.
func biasGeluPlanner(code string) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if !kernelops.AllFloat32(in, 0) {
			return nil, kernelops.DeclineType(in), nil
		}
		x := in[0].Shape
		hasBias := kernelops.NeedInput(in, 1)
		if hasBias && (len(x) == 0 || !isVector(in, 1, x[len(x)-1])) {
			return nil, "host: the bias does not fit the input", nil
		}
		if !hasBias && n.OpType == "BiasGelu" {
			return nil, "host: BiasGelu without a bias", nil
		}
		p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x...)}}, Reason: kernelops.ReasonFloat32}
		count := ops.Numel(x)
		if count == 0 {
			return p, "", nil
		}
		src := ops.InputOperand(0)
		if hasBias {
			src = plannerScratch(p, count)
			c, ok := binaryInto(kernels.BinaryAdd, x, x, in[1].Shape, false, false, 1, ops.InputOperand(0), ops.InputOperand(1), src)
			if !ok {
				return nil, "host: the binary kernel covers 6 axes after merging", nil
			}
			p.Calls = append(p.Calls, c)
			p.Reason += ", bias added, then GELU"
		}
		c := kernelops.ActivationCall(code, 0, 0, count)
		c.Bind[0] = ops.ReadOf(src)
		p.Calls = append(p.Calls, c)
		return p, "", nil
	}
}

// embedPlan appends sub's launches to p, its inputs bound to ins, its outputs to outs, its
// scratch areas and constants appended to p's.
func embedPlan(p, sub *ops.KernelPlan, ins, outs []ops.Operand) {
	sBase, cBase := len(p.Scratch), len(p.Consts)
	p.Scratch = append(p.Scratch, sub.Scratch...)
	p.Consts = append(p.Consts, sub.Consts...)
	for _, c := range sub.Calls {
		c.Bind = append([]ops.KernelBinding{}, c.Bind...)
		for i, b := range c.Bind {
			switch b.Operand.Kind {
			case ops.OperandInput:
				c.Bind[i].Operand = ins[b.Operand.Index]
			case ops.OperandOutput:
				c.Bind[i].Operand = outs[b.Operand.Index]
			case ops.OperandScratch:
				c.Bind[i].Operand = ops.ScratchOperand(sBase + b.Operand.Index)
			case ops.OperandConst:
				c.Bind[i].Operand = ops.ConstOperand(cBase + b.Operand.Index)
			}
		}
		p.Calls = append(p.Calls, c)
	}
}

// planMultiHeadAttention plans com.microsoft MultiHeadAttention as bmm.loom and
// attention.loom's kernels: S = Q·Kᵀ per (batch, head) (bmm_nt), softmax(S·scale + mask) in
// place (attn_softmax), O = P·V (bmm), then O transposed to (batch, seq, heads·v_size). Q is
// read in its (batch, seq, heads, size) layout by strides. The bias is added first (binary),
// its parts constants when it is known before the run (a weight), else copied out of it.
//
// K and V are read where they are, by strides, unless the node has past_key and past_value or
// names the present outputs: then present_key and present_value (the outputs, or scratch) get
// the past rows and then the new keys and values of each (batch, head), transposed to (batch,
// heads, total, size) by strided copies, and the products read them there.
//
// The additive mask is the sum (binary adds) of what the node has of: attention_bias; the
// causal mask of unidirectional (query i sees keys 0..past+i), a constant of
// mask_filter_value; and a key_padding_mask, made mask_filter_value where it masks by a where
// over which keys it keeps: a (batch, total) mask's nonzero elements (a cast to bool), or the
// first length[b] keys for lengths (batch) (a Less of the positions against the lengths).
// past_sequence_length and cache_indirection run as the host function.
func planMultiHeadAttention(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !kernelops.AllFloat32(in, 0, 1, 2) {
		return nil, kernelops.DeclineType(in), nil
	}
	for i := 8; i < len(in); i++ {
		if kernelops.NeedInput(in, i) {
			return nil, "host: past_sequence_length and cache_indirection", nil
		}
	}
	nh := int(n.AttrInt("num_heads", 0))
	q, k, v := in[0].Shape, in[1].Shape, in[2].Shape
	if nh <= 0 || len(q) != 3 || int(q[2])%nh != 0 {
		return nil, "host: the query does not split into num_heads", nil
	}
	B, S, D := int(q[0]), int(q[1]), int(q[2])
	H := D / nh
	var T, Hv int
	split := len(k) == 4
	switch {
	case len(k) == 3 && len(v) == 3 && int(k[0]) == B && int(v[0]) == B && k[1] == v[1] && int(k[2]) == D && int(v[2])%nh == 0:
		T, Hv = int(k[1]), int(v[2])/nh
	case split && len(v) == 4 && int(k[0]) == B && int(k[1]) == nh && int(k[3]) == H && int(v[0]) == B && int(v[1]) == nh && v[2] == k[2]:
		T, Hv = int(k[2]), int(v[3])
	default:
		return nil, "host: key and value do not fit the query", nil
	}
	// The past: (batch, heads, past, size) each, before the new keys and values.
	past := 0
	hasPast := kernelops.NeedInput(in, 6) || kernelops.NeedInput(in, 7)
	if hasPast {
		if !kernelops.NeedInput(in, 6) || !kernelops.NeedInput(in, 7) || split {
			return nil, "host: past_key and past_value not both given, or with key and value split into heads (the host function reports it)", nil
		}
		if !kernelops.AllFloat32(in, 6, 7) {
			return nil, kernelops.DeclineType(in), nil
		}
		pk, pv := in[6].Shape, in[7].Shape
		if len(pk) != 4 || len(pv) != 4 || int(pk[0]) != B || int(pk[1]) != nh || int(pk[3]) != H ||
			int(pv[0]) != B || int(pv[1]) != nh || pv[2] != pk[2] || int(pv[3]) != Hv {
			return nil, "host: past_key and past_value do not fit the key and value (the host function reports it)", nil
		}
		past = int(pk[2])
	}
	total := past + T
	presentNamed := named(n, 1) || named(n, 2)
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: []int64{int64(B), int64(S), int64(nh * Hv)}}},
		Reason: kernelops.ReasonFloat32 + ", bmm + masked softmax + bmm per head, read by strides"}
	presShape := [2][]int64{{int64(B), int64(nh), int64(total), int64(H)}, {int64(B), int64(nh), int64(total), int64(Hv)}}
	for j := 1; j <= 2 && j < len(n.Outputs); j++ {
		if named(n, j) {
			p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: presShape[j-1]})
		} else {
			p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: []int64{0}})
		}
	}
	if B*S*nh*Hv == 0 || total == 0 {
		if B*S*nh*Hv == 0 && !presentNamed {
			return p, "", nil
		}
		return nil, "host: an empty query, or no keys", nil
	}
	qOp, kOp, vOp := ops.InputOperand(0), ops.InputOperand(1), ops.InputOperand(2)
	if kernelops.NeedInput(in, 3) {
		// The bias's query, key and value parts: constants when it is known before the run (a
		// weight), else copied out of it when it runs.
		b := in[3]
		if split || b.Dtype != graph.Float || len(b.Shape) != 1 || int(b.Shape[0]) != 2*D+nh*Hv {
			return nil, "host: a bias with split key and value, or not of 2·hidden + the value's hidden floats", nil
		}
		for i, part := range []struct {
			op         *ops.Operand
			off, width int
			shape      []int64
		}{{&qOp, 0, D, q}, {&kOp, D, D, k}, {&vOp, 2 * D, nh * Hv, v}} {
			var biasOp ops.Operand
			if b.Static.IsValid() {
				bv := b.Static.Data().([]float32)
				p.Consts = append(p.Consts, tensor.MustTensor([]int64{int64(part.width)}, append([]float32{}, bv[part.off:part.off+part.width]...)))
				biasOp = ops.ConstOperand(len(p.Consts) - 1)
			} else {
				biasOp = plannerScratch(p, part.width)
				c, ok := kernelops.StridedCopyCall(graph.Float, []int64{int64(part.width)}, []int64{1}, []int64{1}, int64(part.off), 0, ops.InputOperand(3), biasOp)
				if !ok {
					return nil, "host: the copy of the bias", nil
				}
				p.Calls = append(p.Calls, c)
			}
			dst := plannerScratch(p, ops.Numel(part.shape))
			c, ok := binaryInto(kernels.BinaryAdd, part.shape, part.shape, []int64{int64(part.width)}, false, false, 1, ops.InputOperand(i), biasOp, dst)
			if !ok {
				return nil, "host: the binary kernel covers 6 axes after merging", nil
			}
			p.Calls = append(p.Calls, c)
			*part.op = dst
		}
	}
	// Where the products read K and V: (batch, kv_seq, heads, size) as given, (batch, heads,
	// kv_seq, size) when split or when they are the present buffers.
	keys := T
	kBatch, kRow := []int{T * D, H}, D
	vBatch, vRow := []int{T * nh * Hv, Hv}, nh*Hv
	if split {
		kBatch, kRow = []int{nh * T * H, T * H}, H
		vBatch, vRow = []int{nh * T * Hv, T * Hv}, Hv
	}
	if hasPast || presentNamed {
		var present [2]ops.Operand
		for j := 1; j <= 2; j++ {
			present[j-1] = ops.OutputOperand(j)
			if !named(n, j) {
				present[j-1] = plannerScratch(p, ops.Numel(presShape[j-1]))
			}
		}
		for j, part := range []struct {
			src, past ops.Operand
			size      int
			batch     []int
			row       int
		}{{kOp, ops.InputOperand(6), H, kBatch, kRow}, {vOp, ops.InputOperand(7), Hv, vBatch, vRow}} {
			dims := []int64{int64(B), int64(nh), int64(T), int64(part.size)}
			ys := []int64{int64(nh * total * part.size), int64(total * part.size), int64(part.size), 1}
			if past > 0 {
				c, ok := kernelops.StridedCopyCall(graph.Float, []int64{int64(B), int64(nh), int64(past), int64(part.size)},
					[]int64{int64(nh * past * part.size), int64(past * part.size), int64(part.size), 1}, ys, 0, 0, part.past, present[j])
				if !ok {
					return nil, "host: the copy of the past covers 6 axes after merging", nil
				}
				p.Calls = append(p.Calls, c)
			}
			if T > 0 {
				c, ok := kernelops.StridedCopyCall(graph.Float, dims,
					[]int64{int64(part.batch[0]), int64(part.batch[1]), int64(part.row), 1}, ys, 0, int64(past*part.size), part.src, present[j])
				if !ok {
					return nil, "host: the copy of the new keys and values covers 6 axes after merging", nil
				}
				p.Calls = append(p.Calls, c)
			}
		}
		keys = total
		kOp, vOp = present[0], present[1]
		kBatch, kRow = []int{nh * total * H, total * H}, H
		vBatch, vRow = []int{nh * total * Hv, total * Hv}, Hv
		p.Reason += ", present KV written by strided copies"
	}
	scores := plannerScratch(p, B*nh*S*keys)
	heads := []int{B, nh}
	dims, st, ok := kernelops.FoldBatch(heads, []int{S * D, H}, kBatch, []int{nh * S * keys, S * keys})
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	p.Calls = append(p.Calls, kernelops.BMMSpec{M: S, N: keys, K: H, Dims: dims, AS0: D, AS1: 1, BS0: kRow,
		ABatch: st[0], BBatch: st[1], CBatch: st[2], A: qOp, B: kOp, C: scores}.CallNT())
	maskOp, maskShape, reason := mhaMask(p, n, opset, in, B, nh, S, past, keys)
	if reason != "" {
		return nil, reason, nil
	}
	scoreShape := []int64{int64(B), int64(nh), int64(S), int64(keys)}
	mode := "0"
	ms := make([]int, 2)
	msq, msk := 0, 0
	if maskShape != nil {
		mode = "1"
		mst, err := ops.BroadcastStrides(maskShape, scoreShape)
		if err != nil {
			return nil, "host: the mask does not broadcast to the scores", nil
		}
		copy(ms, mst[:2])
		msq, msk = mst[2], mst[3]
	} else {
		maskOp = ops.InputOperand(0)
	}
	sdims, sst, ok := kernelops.FoldBatch(heads, ops.StridesOf([]int64{int64(B), int64(nh)}), ms)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	scale := n.AttrFloat("scale", 0)
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(H)))
	}
	args := []uint64{kernelops.U(S), kernelops.U(sdims[2]), kernelops.U(sdims[0] * sdims[1]), kernelops.U(sdims[1]), kernelops.U(keys), kernelops.U(sst[1][0]), kernelops.U(sst[1][1]), kernelops.U(sst[1][2]),
		kernelops.U(msq), kernelops.U(msk), uint64(math.Float32bits(scale)), 0}
	p.Calls = append(p.Calls, ops.KernelCall{File: "attention.loom", Symbol: "attn_softmax", Config: map[string]string{"MASK": mode},
		Args: args, Workload: args[:3], Bind: []ops.KernelBinding{ops.ReadWriteOf(scores), ops.ReadOf(maskOp), ops.ReadOf(ops.InputOperand(0))}})
	// O = P·V per (batch, head), then (batch, heads, seq, v) -> (batch, seq, heads, v).
	o := plannerScratch(p, B*nh*S*Hv)
	dims, st, ok = kernelops.FoldBatch(heads, []int{nh * S * keys, S * keys}, vBatch, []int{nh * S * Hv, S * Hv})
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	p.Calls = append(p.Calls, kernelops.BMMSpec{M: S, N: Hv, K: keys, Dims: dims, AS0: keys, AS1: 1, BS0: vRow,
		ABatch: st[0], BBatch: st[1], CBatch: st[2], A: scores, B: vOp, C: o}.Call())
	tn := graph.NewNode("", "Transpose", nil, nil)
	tn.Attrs = []*graph.Attribute{graph.IntsAttr("perm", 0, 2, 1, 3)}
	sub, reason, err := kernelops.PlanTranspose(tn, opset, []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{int64(B), int64(nh), int64(S), int64(Hv)}}, Present: true}})
	if err != nil || sub == nil {
		return nil, "host: the transpose of the heads: " + reason, nil
	}
	embedPlan(p, sub, []ops.Operand{o}, []ops.Operand{ops.OutputOperand(0)})
	return p, "", nil
}

// mhaMask appends to p the launches that make MultiHeadAttention's additive mask over its
// (batch, heads, seq, total) scores, and returns its operand and shape (rank 4, broadcast to
// the scores; nil: no mask): the sum of attention_bias, the causal mask of unidirectional
// (keys after past+i masked for query i) and the key_padding_mask's ((batch, total), or
// lengths (batch)), the last two mask_filter_value where masked. reason is a decline's.
func mhaMask(p *ops.KernelPlan, n *graph.Node, opset int64, in []ops.ValueInfo, B, nh, S, past, total int) (ops.Operand, []int64, string) {
	filter := n.AttrFloat("mask_filter_value", -10000)
	type term struct {
		op    ops.Operand
		shape []int64
	}
	var terms []term
	if kernelops.NeedInput(in, 5) {
		ab := in[5]
		scoreShape := []int64{int64(B), int64(nh), int64(S), int64(total)}
		if ab.Dtype != graph.Float || len(ab.Shape) != 4 {
			return ops.Operand{}, nil, "host: attention_bias is not a float32 tensor of rank 4"
		}
		if full, err := ops.BroadcastShapes(scoreShape, ab.Shape); err != nil || !slices.Equal(full, scoreShape) {
			return ops.Operand{}, nil, "host: attention_bias does not broadcast to the scores"
		}
		terms = append(terms, term{ops.InputOperand(5), ab.Shape})
	}
	if n.AttrInt("unidirectional", 0) != 0 {
		m := make([]float32, S*total)
		for i := 0; i < S; i++ {
			for j := past + i + 1; j < total; j++ {
				m[i*total+j] = filter
			}
		}
		p.Consts = append(p.Consts, tensor.MustTensor([]int64{1, 1, int64(S), int64(total)}, m))
		terms = append(terms, term{ops.ConstOperand(len(p.Consts) - 1), []int64{1, 1, int64(S), int64(total)}})
	}
	if kernelops.NeedInput(in, 4) {
		kpm := in[4]
		if kpm.Dtype != graph.Int32 && kpm.Dtype != graph.Int64 {
			return ops.Operand{}, nil, "host: a key_padding_mask that is not int32 or int64"
		}
		keep := plannerScratch(p, (B*total+3)/4)
		switch {
		case len(kpm.Shape) == 2 && int(kpm.Shape[0]) == B && int(kpm.Shape[1]) == total:
			// keep = mask != 0 (Cast to bool).
			cast := graph.NewNode("", "Cast", nil, nil)
			cast.Attrs = []*graph.Attribute{graph.IntAttr("to", int64(graph.Bool))}
			if reason, ok := embedPlanner(p, kernelops.PlanCast, cast, opset, []ops.ValueInfo{kpm}, []ops.Operand{ops.InputOperand(4)}, []ops.Operand{keep}); !ok {
				return ops.Operand{}, nil, "host: the key_padding_mask's cast: " + reason
			}
		case len(kpm.Shape) == 1 && int(kpm.Shape[0]) == B:
			// Lengths: keep = j < length[b], the positions 0..total-1 (a constant of the
			// lengths' type) against the lengths as a column (Less).
			pos := make([]float64, total)
			for j := range pos {
				pos[j] = float64(j)
			}
			t, err := tensor.FromFloat64s(kpm.Dtype, []int64{1, int64(total)}, pos)
			if err != nil {
				return ops.Operand{}, nil, "host: " + err.Error()
			}
			p.Consts = append(p.Consts, t)
			less := graph.NewNode("", "Less", nil, nil)
			lessIn := []ops.ValueInfo{
				{ValueType: ops.ValueType{Dtype: kpm.Dtype, Shape: []int64{1, int64(total)}}, Present: true},
				{ValueType: ops.ValueType{Dtype: kpm.Dtype, Shape: []int64{int64(B), 1}}, Present: true},
			}
			if reason, ok := embedPlanner(p, ops.KernelPlanners["Less"], less, opset, lessIn, []ops.Operand{ops.ConstOperand(len(p.Consts) - 1), ops.InputOperand(4)}, []ops.Operand{keep}); !ok {
				return ops.Operand{}, nil, "host: the key_padding_mask's comparison: " + reason
			}
		default:
			return ops.Operand{}, nil, "host: a key_padding_mask other than (batch, total) or (batch) (the host function reports it)"
		}
		p.Consts = append(p.Consts, tensor.MustTensor([]int64{}, []float32{0}), tensor.MustTensor([]int64{}, []float32{filter}))
		zero, masked := ops.ConstOperand(len(p.Consts)-2), ops.ConstOperand(len(p.Consts)-1)
		padShape := []int64{int64(B), 1, 1, int64(total)}
		pad := plannerScratch(p, B*total)
		where := graph.NewNode("", "Where", nil, nil)
		whereIn := []ops.ValueInfo{
			{ValueType: ops.ValueType{Dtype: graph.Bool, Shape: padShape}, Present: true},
			{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{}}, Present: true},
			{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{}}, Present: true},
		}
		if reason, ok := embedPlanner(p, kernelops.PlanWhere, where, opset, whereIn, []ops.Operand{keep, zero, masked}, []ops.Operand{pad}); !ok {
			return ops.Operand{}, nil, "host: the key_padding_mask's where: " + reason
		}
		terms = append(terms, term{pad, padShape})
	}
	if len(terms) == 0 {
		return ops.Operand{}, nil, ""
	}
	sum := terms[0]
	for _, t := range terms[1:] {
		shape, err := ops.BroadcastShapes(sum.shape, t.shape)
		if err != nil {
			return ops.Operand{}, nil, "host: the masks do not broadcast together"
		}
		dst := plannerScratch(p, ops.Numel(shape))
		c, ok := binaryInto(kernels.BinaryAdd, shape, sum.shape, t.shape, false, false, 1, sum.op, t.op, dst)
		if !ok {
			return ops.Operand{}, nil, "host: the binary kernel covers 6 axes after merging"
		}
		p.Calls = append(p.Calls, c)
		sum = term{dst, shape}
	}
	return sum.op, sum.shape, ""
}

// staticI64 describes a small int64 vector known before the run.
func staticI64(v ...int64) ops.ValueInfo {
	return ops.ValueInfo{ValueType: ops.ValueType{Dtype: graph.Int64, Shape: []int64{int64(len(v))}}, Present: true,
		Static: tensor.MustTensor([]int64{int64(len(v))}, append([]int64{}, v...))}
}

func f32Info(shape ...int64) ops.ValueInfo {
	return ops.ValueInfo{ValueType: ops.ValueType{Dtype: graph.Float, Shape: shape}, Present: true}
}

// embedPlanner plans the op planner plans for in (with node n) and embeds it in p.
func embedPlanner(p *ops.KernelPlan, planner ops.KernelPlanner, n *graph.Node, opset int64, in []ops.ValueInfo, ins, outs []ops.Operand) (string, bool) {
	sub, reason, err := planner(n, opset, in)
	if err != nil {
		return err.Error(), false
	}
	if sub == nil {
		return reason, false
	}
	embedPlan(p, sub, ins, outs)
	return "", true
}

// planMSRotary plans com.microsoft RotaryEmbedding on shipped kernels: the caches' rows of each
// token's position gathered (movement.loom gather), the two rotated parts of every head sliced
// out (halves, or even and odd features when interleaved; strided copies), x1·cos - x2·sin and
// x2·cos + x1·sin (elementwise.loom binary, the gathered rows broadcast over the heads), then
// the parts and the features past the rotary dimension concatenated back in place (a
// (…, half, 2) concatenation interleaves). position_ids must be (batch, seq), or the one start
// position known before the run; other cases run as the host function, which checks the
// positions against the caches. Positions known when planning (the interpreter's) are checked
// here; fed to a compiled plan, a position past the caches fails the gather kernel's bounds
// check (an error naming the node), and a negative one counts from the end, as Gather's
// indices do.
func planMSRotary(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !kernelops.AllFloat32(in, 0, 2, 3) || !kernelops.NeedInput(in, 1) {
		return nil, kernelops.DeclineType(in), nil
	}
	if n.AttrInt("is_packed_batching", 0) != 0 || n.AttrFloat("scale", 1) != 1 {
		return nil, "host: is_packed_batching or scale", nil
	}
	x, pos, cs := in[0].Shape, in[1], in[2].Shape
	if len(cs) != 2 || !slices.Equal(cs, in[3].Shape) || cs[1] <= 0 {
		return nil, "host: the caches' shapes", nil
	}
	half := cs[1]
	var B, S, N, H int64
	four := len(x) == 4
	switch {
	case four:
		B, N, S, H = x[0], x[1], x[2], x[3]
	case len(x) == 3:
		nh := n.AttrInt("num_heads", 0)
		if nh == 0 && n.AttrInt("rotary_embedding_dim", 0) == 0 {
			nh = x[2] / (2 * half)
		}
		if nh <= 0 || x[2]%nh != 0 {
			return nil, "host: num_heads does not divide the hidden size", nil
		}
		B, S, N, H = x[0], x[1], nh, x[2]/nh
	default:
		return nil, "host: the input's rank", nil
	}
	rd := n.AttrInt("rotary_embedding_dim", 0)
	if rd == 0 {
		rd = 2 * half
	}
	if rd != 2*half || rd > H {
		return nil, "host: the rotary dimension does not fit the caches or the head", nil
	}
	if pos.Dtype != graph.Int64 && pos.Dtype != graph.Int32 {
		return nil, "host: position_ids' type", nil
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x...)}},
		Reason: kernelops.ReasonFloat32 + ", cache rows gathered, rotated parts sliced, multiplied and concatenated back"}
	if B*S*N*H == 0 {
		return p, "", nil
	}
	posOp, posInfo := ops.InputOperand(1), pos
	switch {
	case len(pos.Shape) == 2 && pos.Shape[0] == B && pos.Shape[1] == S:
		if pos.Static.IsValid() {
			for _, v := range tensor.Int64s(pos.Static) {
				if v < 0 || v >= cs[0] {
					return nil, "host: a position outside the caches", nil
				}
			}
		}
	case ops.Numel(pos.Shape) == 1 && len(pos.Shape) <= 1 && pos.Static.IsValid():
		p0 := tensor.Int64s(pos.Static)[0]
		idx := make([]int64, B*S)
		for i := range idx {
			idx[i] = p0 + int64(i)%S
			if idx[i] < 0 || idx[i] >= cs[0] {
				return nil, "host: a position outside the caches", nil
			}
		}
		p.Consts = append(p.Consts, tensor.MustTensor([]int64{B, S}, idx))
		posOp = ops.ConstOperand(len(p.Consts) - 1)
		posInfo = ops.ValueInfo{ValueType: ops.ValueType{Dtype: graph.Int64, Shape: []int64{B, S}}, Present: true}
	default:
		return nil, "host: position_ids is neither (batch, seq) nor a start position known before the run", nil
	}
	// The rows of each token's angles: [B, S, half].
	gather := graph.NewNode("", "Gather", nil, nil)
	rows := B * S * half
	cg, sg := plannerScratch(p, int(rows)), plannerScratch(p, int(rows))
	for i, dst := range []ops.Operand{cg, sg} {
		if reason, ok := embedPlanner(p, kernelops.PlanGather, gather, 21, []ops.ValueInfo{in[2+i], posInfo}, []ops.Operand{ops.InputOperand(2 + i), posOp}, []ops.Operand{dst}); !ok {
			return nil, "host: gathering the caches: " + reason, nil
		}
	}
	// x in heads: [B, S, N, H] (rank 3) or [B, N, S, H]; the parts [..., half].
	xh := []int64{B, S, N, H}
	part := []int64{B, S, N, half}
	angles := []int64{B, S, 1, half}
	if four {
		xh, part, angles = []int64{B, N, S, H}, []int64{B, N, S, half}, []int64{B, 1, S, half}
	}
	interleaved := n.AttrInt("interleaved", 0) != 0
	slice := graph.NewNode("", "Slice", nil, nil)
	count := int(ops.Numel(part))
	xp := [2]ops.Operand{plannerScratch(p, count), plannerScratch(p, count)}
	for i := range 2 {
		start, end, step := int64(i)*half, int64(i+1)*half, int64(1)
		if interleaved {
			start, end, step = int64(i), rd, 2
		}
		in := []ops.ValueInfo{f32Info(xh...), staticI64(start), staticI64(end), staticI64(3), staticI64(step)}
		if reason, ok := embedPlanner(p, kernelops.PlanSlice, slice, 21, in, []ops.Operand{ops.InputOperand(0)}, []ops.Operand{xp[i]}); !ok {
			return nil, "host: slicing the rotated parts: " + reason, nil
		}
	}
	// y1 = x1·cos - x2·sin, y2 = x2·cos + x1·sin.
	var y [2]ops.Operand
	for i := range 2 {
		t1, t2 := plannerScratch(p, count), plannerScratch(p, count)
		y[i] = plannerScratch(p, count)
		a, b, code := xp[0], xp[1], kernels.BinarySub
		if i == 1 {
			a, b, code = xp[1], xp[0], kernels.BinaryAdd
		}
		c1, ok1 := binaryInto(kernels.BinaryMul, part, part, angles, false, false, 1, a, cg, t1)
		c2, ok2 := binaryInto(kernels.BinaryMul, part, part, angles, false, false, 1, b, sg, t2)
		c3, ok3 := binaryInto(code, part, part, part, false, false, 1, t1, t2, y[i])
		if !ok1 || !ok2 || !ok3 {
			return nil, "host: the binary kernel covers 6 axes after merging", nil
		}
		p.Calls = append(p.Calls, c1, c2, c3)
	}
	// Back in place: [y1 y2] (halves) or [y1 y2] along a new last axis (interleaved), then the
	// features past rd.
	concat := graph.NewNode("", "Concat", nil, nil)
	concat.Attrs = []*graph.Attribute{graph.IntAttr("axis", -1)}
	rot := append(append([]int64{}, part[:3]...), rd)
	rotOp := ops.OutputOperand(0)
	if rd < H {
		rotOp = plannerScratch(p, int(ops.Numel(rot)))
	}
	pieces := []ops.ValueInfo{f32Info(part...), f32Info(part...)}
	if interleaved {
		pair := append(append([]int64{}, part...), 1)
		pieces = []ops.ValueInfo{f32Info(pair...), f32Info(pair...)}
	}
	if reason, ok := embedPlanner(p, kernelops.PlanConcat, concat, 21, pieces, y[:], []ops.Operand{rotOp}); !ok {
		return nil, "host: concatenating the parts: " + reason, nil
	}
	if rd < H {
		tail := append(append([]int64{}, part[:3]...), H-rd)
		tailOp := plannerScratch(p, int(ops.Numel(tail)))
		in := []ops.ValueInfo{f32Info(xh...), staticI64(rd), staticI64(H), staticI64(3), staticI64(1)}
		if reason, ok := embedPlanner(p, kernelops.PlanSlice, slice, 21, in, []ops.Operand{ops.InputOperand(0)}, []ops.Operand{tailOp}); !ok {
			return nil, "host: slicing the unrotated features: " + reason, nil
		}
		if reason, ok := embedPlanner(p, kernelops.PlanConcat, concat, 21, []ops.ValueInfo{f32Info(rot...), f32Info(tail...)}, []ops.Operand{rotOp, tailOp}, []ops.Operand{ops.OutputOperand(0)}); !ok {
			return nil, "host: concatenating the unrotated features: " + reason, nil
		}
	}
	return p, "", nil
}
