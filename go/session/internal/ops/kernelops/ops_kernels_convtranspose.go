package kernelops

import (
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
)

// ConvTranspose as Loom kernels (kernels/convtranspose.loom) for 1-D and 2-D float32
// inputs: one bmm of every group's kernel (transposed) with the input into a column buffer,
// then col2im, which gathers the taps of every output element (no atomics), plus the bias.

func init() {
	ops.RegisterKernelOp("ConvTranspose", PlanConvTranspose, hostFallback("ConvTranspose"))
}

// convTransposeMaxCols bounds the column buffer (bytes); larger products run on the host.
const convTransposeMaxCols = 1 << 30

func PlanConvTranspose(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if len(in) < 2 || !allFloat32(in, 0, 1) || (len(in) > 2 && in[2].Present && in[2].Dtype != graph.Float) {
		return nil, declineType(in), nil
	}
	x, w := in[0].Shape, in[1].Shape
	if len(x) != 3 && len(x) != 4 {
		return nil, "host: the kernels cover 1-D and 2-D transposed convolutions", nil
	}
	if len(w) != len(x) {
		return nil, "", ops.OpErr("ConvTranspose: input %v and weight %v must be (N, C, spatial...) of one rank", x, w)
	}
	group := int(nd.AttrInt("group", 1))
	nb, c := int(x[0]), int(x[1])
	if group <= 0 || c%group != 0 || int(w[0]) != c {
		return nil, "", ops.OpErr("ConvTranspose: input channels %d, weight %v and group %d disagree", c, w, group)
	}
	mg := int(w[1])
	m, cg := mg*group, c/group
	kernel := make([]int, len(x)-2)
	for i := range kernel {
		kernel[i] = int(w[i+2])
	}
	if ks := nd.AttrInts("kernel_shape"); len(ks) == len(kernel) {
		for i := range kernel {
			if int(ks[i]) != kernel[i] {
				return nil, "", ops.OpErr("ConvTranspose: kernel_shape %v disagrees with weight %v", ks, w)
			}
		}
	}
	strides, dil, padBegin, osp, err := nn.ConvTransposeGeometry(nd, x[2:], kernel)
	if err != nil {
		return nil, "", err
	}
	hasBias := len(in) > 2 && in[2].Present
	if hasBias && ops.Numel(in[2].Shape) != m {
		return nil, "", ops.OpErr("ConvTranspose: bias has %d elements for %d output channels", ops.Numel(in[2].Shape), m)
	}
	outShape := []int64{int64(nb), int64(m)}
	for _, o := range osp {
		outShape = append(outShape, int64(o))
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: outShape}}, Reason: reasonFloat32 + ", 1-D/2-D, bmm + col2im"}
	if ops.Numel(outShape) == 0 {
		return p, "", nil
	}
	// 1-D is 2-D with a unit height.
	ih, iw, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow := 1, int(x[2]), 1, kernel[0], 1, strides[0], 1, dil[0], 0, padBegin[0], 1, osp[0]
	if len(x) == 4 {
		ih, iw, kh, kw = int(x[2]), int(x[3]), kernel[0], kernel[1]
		sh, sw, dh, dw = strides[0], strides[1], dil[0], dil[1]
		ph, pw, oh, ow = padBegin[0], padBegin[1], osp[0], osp[1]
	}
	taps, pixels := mg*kh*kw, ih*iw
	colsBytes := int64(4) * int64(nb) * int64(m) * int64(kh*kw) * int64(pixels)
	if colsBytes > convTransposeMaxCols {
		return nil, "host: the column buffer would exceed 1 GiB", nil
	}
	p.Scratch = []int64{colsBytes}
	if pixels > 0 && taps > 0 {
		p.Calls = append(p.Calls, bmmSpec{m: taps, n: pixels, k: cg, dims: [3]int{1, nb, group}, as0: 1, as1: taps, bs0: pixels,
			aBatch: [3]int{0, 0, cg * taps}, bBatch: [3]int{0, c * pixels, cg * pixels}, cBatch: [3]int{0, group * taps * pixels, taps * pixels},
			a: ops.InputOperand(1), b: ops.InputOperand(0), c: ops.ScratchOperand(0)}.call())
	}
	bias := ops.InputOperand(0) // not read without BIAS
	if hasBias {
		bias = ops.InputOperand(2)
	}
	if pixels == 0 {
		kh, kw = 0, 0 // no taps: col2im reads no column (and the view of the empty buffer is empty)
	}
	args := []uint64{U(ow), U(oh), U(nb * m), U(m), U(kh), U(kw), U(ih), U(iw), U(sh), U(sw), U(ph), U(pw), U(dh), U(dw)}
	p.Calls = append(p.Calls, ops.KernelCall{File: "convtranspose.loom", Symbol: "col2im", Config: map[string]string{"BIAS": strconv.FormatBool(hasBias), "DIL1": strconv.FormatBool(dh == 1 && dw == 1)},
		Args: args, Workload: args[:3], Bind: []ops.KernelBinding{ops.ReadOf(ops.ScratchOperand(0)), ops.ReadOf(bias), ops.WriteOf(ops.OutputOperand(0))}})
	return p, "", nil
}
