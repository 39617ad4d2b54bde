package session

import "github.com/loomrt/loom/go/graph"

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

func genericConvPlanner(fused bool) kernelPlanner {
	return func(nd *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
		return genericConvPlan(nd, in, fused)
	}
}

func genericConvPlan(nd *graph.Node, in []valueInfo, fused bool) (*kernelPlan, string, error) {
	if len(in) < 2 || !allFloat32(in, 0, 1) || (len(in) > 2 && in[2].present && in[2].dtype != graph.Float) {
		return nil, declineType(in), nil
	}
	x, w := in[0], in[1]
	if len(x.shape) != 3 && len(x.shape) != 4 {
		return nil, "host: the conv kernels cover 1-D and 2-D convolutions", nil
	}
	pr, err := convParamsOf(nd, x.shape, w.shape)
	if err != nil {
		return nil, "", err
	}
	act, p0, p1, err := actParams(nd, fused)
	if err != nil {
		return nil, "", err
	}
	affine, scale, shift := outputAffine(nd, fused)
	hasBias := len(in) > 2 && in[2].present
	if hasBias && (len(in[2].shape) != 1 || in[2].shape[0] != w.shape[0]) {
		return nil, "", opErr("Conv: bias of shape %v for %d output channels", in[2].shape, w.shape[0])
	}
	two := func(v []int, one int) [2]int {
		if len(v) == 1 {
			return [2]int{one, v[0]}
		}
		return [2]int{v[0], v[1]}
	}
	kern, str, dil := two(pr.kernel, 1), two(pr.strides, 1), two(pr.dilations, 1)
	pad, padEnd, out := two(pr.padBegin, 0), two(pr.padEnd, 0), two(pr.out, 1)
	for i := range 2 {
		if pad[i] < 0 || padEnd[i] < 0 || str[i] < 1 || dil[i] < 1 || kern[i] < 1 {
			return nil, "host: the conv kernels cover non-negative padding and positive strides and dilations", nil
		}
	}
	nb, c := int(x.shape[0]), int(x.shape[1])
	h, wd := 1, int(x.shape[2])
	if len(x.shape) == 4 {
		h, wd = int(x.shape[2]), int(x.shape[3])
	}
	m, groups := int(w.shape[0]), pr.group
	oh, ow := out[0], out[1]
	outShape := []int64{int64(nb), int64(m)}
	for _, o := range pr.out {
		outShape = append(outShape, int64(o))
	}
	p := &kernelPlan{outputs: []valueType{{graph.Float, outShape}},
		reason: reasonFloat32 + ", convolution as padding, im2col copy and matrix products"}
	if nb*m*oh*ow == 0 {
		return p, "", nil
	}
	cg, mg := c/groups, m/groups
	kd, px := cg*kern[0]*kern[1], oh*ow
	if kd == 0 {
		return nil, "host: a convolution over no input channels", nil
	}
	src, hp, wp := inputOperand(0), h, wd
	if pad != [2]int{} || padEnd != [2]int{} {
		hp, wp = h+pad[0]+padEnd[0], wd+pad[1]+padEnd[1]
		s := len(p.scratch)
		p.scratch = append(p.scratch, int64(4*nb*c*hp*wp))
		d := [movementRank]int64{1, 1, 1, int64(nb * c), int64(hp), int64(wp)}
		e := [movementRank]int64{1, 1, 1, int64(nb * c), int64(h), int64(wd)}
		pb := [movementRank]int64{0, 0, 0, 0, int64(pad[0]), int64(pad[1])}
		args := make([]uint64, 0, 18)
		for _, v := range [][movementRank]int64{d, e, pb} {
			for _, a := range v {
				args = append(args, bits64(a))
			}
		}
		p.calls = append(p.calls, kernelCall{file: movementFile, symbol: "pad",
			config: pickTile(d[4], d[5]).config(map[string]string{"T": "u32", "MODE": "0", "HASV": "false"}),
			args:   args, workload: args[:6],
			bind: []kernelBinding{readOf(src), readOf(src), writeOf(scratchOperand(s))}})
		src = scratchOperand(s)
	}
	// The columns: cols[n, ch, i, j, y, x] = xp[n, ch, y·SH + i·DH, x·SW + j·DW], contiguous,
	// which is [N, groups, kd, px] for the products.
	cols := len(p.scratch)
	p.scratch = append(p.scratch, int64(4*nb*c*kern[0]*kern[1]*px))
	dims := []int64{int64(nb), int64(c), int64(kern[0]), int64(kern[1]), int64(oh), int64(ow)}
	ys := contiguousStrides(dims)
	xs := []int64{int64(c * hp * wp), int64(hp * wp), int64(dil[0] * wp), int64(dil[1]), int64(str[0] * wp), int64(str[1])}
	axes := make([]copyAxis, len(dims))
	for i := range dims {
		axes[i] = copyAxis{n: dims[i], xs: xs[i], ys: ys[i]}
	}
	call, ok := stridedCopyCall("u32", axes, 0, 0, src, scratchOperand(cols))
	if !ok {
		return nil, "host: the receptive fields do not fit one rank-6 copy", nil
	}
	p.calls = append(p.calls, call)
	g := gemmSpec{m: mg, n: px, k: kd, nb0: nb, nb1: groups, a: inputOperand(1), b: scratchOperand(cols),
		as: [4]int{0, mg * kd, kd, 1}, bs: [4]int{c * kern[0] * kern[1] * px, kd * px, px, 1}, alpha: 1,
		act: act, p0: p0, p1: p1, affine: affine, p2: scale, p3: shift}
	if hasBias {
		g.hasC, g.c, g.beta, g.cs = true, inputOperand(2), 1, [4]int{0, mg, 1, 0}
	}
	g.emit(p, outputOperand(0)) // genericPlan gives the product its generic tile
	return p, "", nil
}
