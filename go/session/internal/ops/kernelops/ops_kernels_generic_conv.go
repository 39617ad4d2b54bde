package kernelops

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The shape-generic convolution (see kernel_generic.go): the conv kernels specialize on the
// kernel's extents, strides and dilations, so without a C compiler a convolution the corpus
// did not record runs as kernels that specialize on none of them: the input zero-padded
// (movement.loom pad), its receptive fields copied out as columns (strided_copy: one rank-6
// strided view [N, C, KH, KW, OH, OW] of the padded input) and one matrix product per image
// and group (gemm_nn, in its generic tile). Depthwise convolutions (one input and one output
// channel per group), whose products would be one row each, run as generic.loom's conv_dw
// instead, over the padded input of conv_pad_any when padding or a column stride needs it.

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
	if cg == 1 && mg == 1 {
		genericDepthwise(p, cs)
		p.Reason = reasonFloat32 + ", depthwise convolution with run-time taps"
		return p, "", nil
	}
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

// Generic depthwise tiles (kernels/aot/manifest.txt ships conv_dw with these): vectors of
// genericDWVL columns, genericDWNV of them a tile along wide rows, genericDWNY rows a tile of
// narrower ones.
const (
	genericDWVL = 16
	genericDWNV = 4
	genericDWNY = 4
)

// genericDepthwise appends to p the launches of a depthwise convolution (groups = c = m):
// conv_pad_any when padding, a column stride or the end of the kernel's reach needs the padded,
// column-phase-split input, then conv_dw in bands of rows of about targetBlockMACs
// multiply-adds, at least genericDWNY rows each where the image has them (conv_dw's tiles of
// narrow rows take that many). A missing bias is a constant of zeros.
func genericDepthwise(p *ops.KernelPlan, cs *convShape) {
	kern, str, dil, pad := cs.kern, cs.str, cs.dil, cs.pad
	nb, c, h, wd := cs.nb, cs.c, cs.h, cs.wd
	oh, ow := cs.out[0], cs.out[1]
	hp := (oh-1)*str[0] + (kern[0]-1)*dil[0] + 1
	wq := ow + (kern[1]-1)*dil[1]/str[1]
	xp, sw := ops.InputOperand(0), str[1]
	if pad != [2]int{} || str[1] > 1 || hp > h || wq > wd {
		// Planes per block: about 16384 elements of xp each.
		per := min(max(16384/(str[1]*hp*wq), 1), nb*c)
		args := []uint64{U(nb * c), U(per), U(hp), U(h), U(wd), U(wq), U(pad[0]), U(pad[1]), U(str[1])}
		p.Scratch = append(p.Scratch, int64(4*nb*c*str[1]*hp*wq))
		xp = ops.ScratchOperand(len(p.Scratch) - 1)
		p.Calls = append(p.Calls, ops.KernelCall{File: genericFile, Symbol: "conv_pad_any",
			Config: map[string]string{"VL": strconv.Itoa(genericDWVL)}, Args: args, Workload: args[:2],
			Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(xp)}})
	} else {
		hp, wq, sw = h, wd, 1
	}
	bias := ops.InputOperand(2)
	if !cs.hasBias {
		p.Consts = append(p.Consts, tensor.MustTensor([]int64{int64(c)}, make([]float32, c)))
		bias = ops.ConstOperand(len(p.Consts) - 1)
	}
	rowMACs := ow * kern[0] * kern[1]
	rows := min(max(targetBlockMACs/rowMACs, genericDWNY), oh)
	bands := oh / rows // ceil(oh / bands) >= rows rows a band
	f := func(v float32) uint64 { return uint64(math.Float32bits(v)) }
	args := []uint64{U(nb * c), U(bands), U(c), U(oh), U(ow), U(hp), U(wq), U(kern[0]), U(kern[1]),
		U(str[0]), U(sw), U(dil[0]), U(dil[1]), f(cs.p0), f(cs.p1), f(cs.scale), f(cs.shift)}
	cfg := map[string]string{"VL": strconv.Itoa(genericDWVL), "NV": strconv.Itoa(genericDWNV), "NY": strconv.Itoa(genericDWNY),
		"ACT": cs.act, "AFFINE": strconv.FormatBool(cs.affine)}
	p.Calls = append(p.Calls, ops.KernelCall{File: genericFile, Symbol: "conv_dw", Config: cfg, Args: args, Workload: args[:2],
		Bind: []ops.KernelBinding{ops.ReadOf(xp), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(bias), ops.WriteOf(ops.OutputOperand(0))}})
}

// genericFile is the op library's file of shape-generic kernels.
const genericFile = "generic.loom"
