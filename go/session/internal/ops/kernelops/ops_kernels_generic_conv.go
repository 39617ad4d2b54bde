package kernelops

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// The shape-generic convolution (see kernel_generic.go): the conv kernels specialize on the
// kernel's extents, strides and dilations, so without a C compiler a convolution the corpus
// did not record runs as kernels that specialize on none of them: the input zero-padded
// (movement.loom pad), its receptive fields copied out as columns (strided_copy: one rank-6
// strided view [N, C, KH, KW, OH, OW] of the padded input) and one matrix product per image
// and group (gemm_nn, in its generic tile).

func init() {
	genericPlanners["Conv"] = genericConvPlanner(false)
	genericPlanners[graph.LoomDomain+":FusedConv"] = genericConvPlanner(true)
}

func genericConvPlanner(fused bool) ops.KernelPlanner {
	return func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		return genericConvPlan(nd, in, fused)
	}
}

func genericConvPlan(nd *graph.Node, in []ops.ValueInfo, fused bool) (*ops.KernelPlan, string, error) {
	cs, why, err := convShapeOf(nd, in, fused)
	if cs == nil {
		return nil, why, err
	}
	act, p0, p1, affine, scale, shift, hasBias := cs.act, cs.p0, cs.p1, cs.affine, cs.scale, cs.shift, cs.hasBias
	kern, str, dil, pad, padEnd, out := cs.kern, cs.str, cs.dil, cs.pad, cs.padEnd, cs.out
	nb, c, h, wd, m, groups := cs.nb, cs.c, cs.h, cs.wd, cs.m, cs.groups
	oh, ow, outShape := out[0], out[1], cs.outShape
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: outShape}},
		Reason: reasonFloat32 + ", convolution as padding, im2col copy and matrix products"}
	if nb*m*oh*ow == 0 {
		return p, "", nil
	}
	cg, mg := c/groups, m/groups
	kd, px := cg*kern[0]*kern[1], oh*ow
	if kd == 0 {
		return nil, "host: a convolution over no input channels", nil
	}
	src, hp, wp := ops.InputOperand(0), h, wd
	if pad != [2]int{} || padEnd != [2]int{} {
		hp, wp = h+pad[0]+padEnd[0], wd+pad[1]+padEnd[1]
		s := len(p.Scratch)
		p.Scratch = append(p.Scratch, int64(4*nb*c*hp*wp))
		d := [movementRank]int64{1, 1, 1, int64(nb * c), int64(hp), int64(wp)}
		e := [movementRank]int64{1, 1, 1, int64(nb * c), int64(h), int64(wd)}
		pb := [movementRank]int64{0, 0, 0, 0, int64(pad[0]), int64(pad[1])}
		args := make([]uint64, 0, 18)
		for _, v := range [][movementRank]int64{d, e, pb} {
			for _, a := range v {
				args = append(args, bits64(a))
			}
		}
		p.Calls = append(p.Calls, ops.KernelCall{File: movementFile, Symbol: "pad",
			Config: pickTile(d[4], d[5]).config(map[string]string{"T": "u32", "MODE": "0", "HASV": "false"}),
			Args:   args, Workload: args[:6],
			Bind: []ops.KernelBinding{ops.ReadOf(src), ops.ReadOf(src), ops.WriteOf(ops.ScratchOperand(s))}})
		src = ops.ScratchOperand(s)
	}
	// The columns: cols[n, ch, i, j, y, x] = xp[n, ch, y·SH + i·DH, x·SW + j·DW], contiguous,
	// which is [N, groups, kd, px] for the products.
	cols := len(p.Scratch)
	p.Scratch = append(p.Scratch, int64(4*nb*c*kern[0]*kern[1]*px))
	dims := []int64{int64(nb), int64(c), int64(kern[0]), int64(kern[1]), int64(oh), int64(ow)}
	ys := contiguousStrides(dims)
	xs := []int64{int64(c * hp * wp), int64(hp * wp), int64(dil[0] * wp), int64(dil[1]), int64(str[0] * wp), int64(str[1])}
	axes := make([]copyAxis, len(dims))
	for i := range dims {
		axes[i] = copyAxis{n: dims[i], xs: xs[i], ys: ys[i]}
	}
	call, ok := stridedCopyCall("u32", axes, 0, 0, src, ops.ScratchOperand(cols))
	if !ok {
		return nil, "host: the receptive fields do not fit one rank-6 copy", nil
	}
	p.Calls = append(p.Calls, call)
	g := gemmSpec{m: mg, n: px, k: kd, nb0: nb, nb1: groups, a: ops.InputOperand(1), b: ops.ScratchOperand(cols),
		as: [4]int{0, mg * kd, kd, 1}, bs: [4]int{c * kern[0] * kern[1] * px, kd * px, px, 1}, alpha: 1,
		act: act, p0: p0, p1: p1, affine: affine, p2: scale, p3: shift}
	if hasBias {
		g.hasC, g.c, g.beta, g.cs = true, ops.InputOperand(2), 1, [4]int{0, mg, 1, 0}
	}
	g.emit(p, ops.OutputOperand(0)) // genericPlan gives the product its generic tile
	return p, "", nil
}
