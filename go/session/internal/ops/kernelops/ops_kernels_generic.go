package kernelops

import (
	"fmt"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Shape-generic kernels: without a C compiler, a planner's shape-specialized choice (a GEMM
// register tile, ...) is served only when the corpus recorded it (kernels/aot/corpus.txt).
// For such families kernels/aot/manifest.txt also ships a few generic specializations, valid
// for every shape (the kernel handles the edges at run time): when a plan's kernels are
// neither shipped nor compilable, servablePlan re-plans the op with those, and the op runs as
// its host function only when that does not serve it either.
//
// Re-planning happens in two ways, both after the planner (so the planners themselves choose
// as they always do when the JIT works):
//
//   - genericPlanners[plannerKey(n)], when set, plans the op again with generic kernels only;
//   - otherwise each call whose kernel has a genericCalls rewrite gets the generic
//     specialization of its family (the rewrite may also adjust the calls before it, such as
//     gemm_nn's pack_a).

// genericPlanners plan an op with the shape-generic shipped kernels only, by planner key.
var genericPlanners = map[string]ops.KernelPlanner{}

// genericCalls rewrite call i of p (a clone the rewrite may change) into the family's
// generic specialization, by "file:symbol". They return the call's index afterwards (a
// rewrite may drop calls before it) and whether they changed anything.
var genericCalls = map[string]func(p *ops.KernelPlan, i int) (int, bool){
	"gemm_fast.loom:gemm_nn": genericGemmNN,
	"gemm_fast.loom:gemm_nt": genericGemmNT,
}

// genericPlan is p, made by the planner registered under key, re-planned with shape-generic
// kernels (see genericPlanners and genericCalls), or nil when nothing changes.
func GenericPlan(key string, n *graph.Node, opset int64, in []ops.ValueInfo, p *ops.KernelPlan) *ops.KernelPlan {
	g, changed := (*ops.KernelPlan)(nil), false
	if planner, ok := genericPlanners[key]; ok {
		q, _, err := planner(n, opset, in)
		if err != nil || q == nil {
			return nil
		}
		g, changed = q, true
	} else {
		g = ops.Clone(p)
	}
	for i := 0; i < len(g.Calls); i++ {
		c := g.Calls[i]
		if f, ok := genericCalls[c.File+":"+c.Symbol]; ok {
			j, ok := f(g, i)
			if !ok {
				return nil
			}
			i, changed = j, true
		}
	}
	if !changed {
		return nil
	}
	if err := ops.FitPlan(g, ops.KernelLimits); err != nil {
		return nil
	}
	g.Reason += " (shape-generic shipped kernels: the JIT is unavailable)"
	return g
}

// genericEpilogues are the gemm epilogues (ACT) the generic tiles ship with: all of them (none,
// relu, sigmoid, tanh, leaky relu, hard sigmoid, clip, hard swish, swish, and GELU exact and
// tanh).
var genericEpilogues = map[string]bool{"0": true, "1": true, "2": true, "3": true, "4": true, "5": true, "6": true, "7": true, "8": true,
	"9": true, "10": true}

// genericTile is a shape-generic register tile of gemm_nn: MR rows by NV vectors of VL
// columns, KS interleaved partial sums over k, TX x TY threads a block.
type genericTile struct{ mr, nv, vl, ks, tx, ty int }

// genericNN are gemm_nn's shape-generic register tiles, in the order genericGemmNN tries them:
// the first whose MR rows and NV·VL columns fit the matrix serves it. Tall and wide products
// take 8 rows by 2 vectors of 16 (16 accumulators); products of fewer rows (a few tokens, a
// matrix-vector product) one row by 2 vectors in 4 partial sums; narrow ones (a convolution
// over few pixels) 8 rows by one vector of 8, or by one column. Each ships
// (kernels/aot/manifest.txt) for the epilogues genericTileEpilogue accepts.
var genericNN = []genericTile{
	{mr: 8, nv: 2, vl: 16, ks: 1, tx: 1, ty: 4},
	{mr: 1, nv: 2, vl: 16, ks: 4, tx: 1, ty: 4},
	{mr: 8, nv: 1, vl: 8, ks: 1, tx: 1, ty: 4},
	{mr: 8, nv: 1, vl: 1, ks: 1, tx: 1, ty: 4},
}

// genericNNSmall are genericNN for a register file smaller than AVX-512's 2 KiB (AVX2's 16
// registers of 32 bytes, NEON's 32 of 16), where genericNN's first two tiles do not fit (8 x 2
// vectors of 16 lanes are 32 AVX2 registers of accumulators; the C compiler spills them, or
// loads B again for every row): 4 rows by one vector of 16, and one row by 2 vectors in 2
// partial sums, leave room for B's vectors and a broadcast (see nnCost).
var genericNNSmall = []genericTile{
	{mr: 4, nv: 1, vl: 16, ks: 1, tx: 1, ty: 4},
	{mr: 1, nv: 2, vl: 16, ks: 2, tx: 1, ty: 4},
	{mr: 8, nv: 1, vl: 8, ks: 1, tx: 1, ty: 4},
	{mr: 8, nv: 1, vl: 1, ks: 1, tx: 1, ty: 4},
}

// genericTiles returns the generic tiles for the host's register file (or the one
// SetVectorFile set).
func genericTiles() []genericTile {
	if vectorRegs*vectorRegBytes >= 32*64 {
		return genericNN
	}
	return genericNNSmall
}

// genericTileEpilogue says whether the genericNN tiles ship gemm_nn's epilogue cfg: every ACT
// (0..10) and C mode without AFFINE; with it (FusedConv's output_scale and output_shift) the
// convolution's activations (ACT 0..8) and C absent or a bias per row (CMODE 0, 2). Other
// combinations, which no planner makes today, take the one-element tile (shipped for all).
func genericTileEpilogue(cfg map[string]string) bool {
	if cfg["AFFINE"] != "true" {
		return true
	}
	act, err := strconv.Atoi(cfg["ACT"])
	return err == nil && act <= 8 && cfg["CMODE"] != "1"
}

// genericGemmNN gives gemm_nn a tile that fits every matrix (the kernel needs m >= MR and
// n >= NV·VL): the first of genericNN that fits, else MR=4, VL=8 when the matrix is that large
// and there is no epilogue, else one element per thread. A packed A (PACKA, whose layout
// follows MR) is unpacked: pack_a is dropped and gemm_nn reads A as it was given.
func genericGemmNN(p *ops.KernelPlan, i int) (int, bool) {
	if !genericEpilogues[p.Calls[i].Config["ACT"]] {
		return i, false
	}
	m, n := p.Calls[i].Args[2], p.Calls[i].Args[3]
	if p.Calls[i].Config["PACKA"] == "true" {
		j, ok := unpackA(p, i)
		if !ok {
			return i, false
		}
		i = j
	}
	if p.Calls[i].Config["PACKB"] == "true" && !unpackB(p, i) {
		return i, false
	}
	cfg := p.Calls[i].Config
	mr, nv, vl, ks, tx, ty := 1, 1, 1, 1, 16, 4
	if m >= 4 && n >= 8 && cfg["ACT"] == "0" && cfg["AFFINE"] == "false" {
		mr, vl, ks, tx, ty = 4, 8, 2, 4, 4
	}
	for _, t := range genericTiles() {
		if genericTileEpilogue(cfg) && m >= uint64(t.mr) && n >= uint64(t.nv*t.vl) {
			mr, nv, vl, ks, tx, ty = t.mr, t.nv, t.vl, t.ks, t.tx, t.ty
			break
		}
	}
	cfg["MR"], cfg["NV"], cfg["VL"], cfg["KS"] = strconv.Itoa(mr), strconv.Itoa(nv), strconv.Itoa(vl), strconv.Itoa(ks)
	cfg["TX"], cfg["TY"], cfg["PACKA"] = strconv.Itoa(tx), strconv.Itoa(ty), "false"
	delete(cfg, "FOLD") // fitPlan sets it again when the device needs it
	return i, true
}

// unpackA makes gemm_nn call i (PACKA) read A unpacked: from the operand pack_a read (the
// pack_a call is removed), or, for A packed by the planner (a constant), from the constant
// unpacked. It returns gemm_nn's index afterwards, and false when it cannot tell where A is.
func unpackA(p *ops.KernelPlan, i int) (int, bool) {
	c := &p.Calls[i]
	mr, err := strconv.Atoi(c.Config["MR"])
	if err != nil || mr < 1 {
		return i, false
	}
	a := c.Bind[0].Operand
	m, k := int(c.Args[2]), int(c.Args[4])
	cmode := c.Config["CMODE"]
	switch a.Kind {
	case ops.OperandConst:
		packed, ok := p.Consts[a.Index].Data().([]float32)
		if !ok || m < mr || len(packed) != ceilDiv(m, mr)*k*mr {
			return i, false
		}
		// Unpacked when a plan instance binds it (see unpackedConst).
		un, err := unpackedConst(packed, m*k, fmt.Sprintf("gemm_nn.A unpacked m=%d k=%d mr=%d", m, k, mr), func(packed, un []float32) {
			for tile := range ceilDiv(m, mr) {
				i0 := min(tile*mr, m-mr)
				for q := range k {
					for r := range mr {
						un[(i0+r)*k+q] = packed[(tile*k+q)*mr+r]
					}
				}
			}
		})
		if err != nil {
			return i, false
		}
		p.Consts[a.Index] = un
		c.Args[7], c.Args[8] = U(k), 1
	case ops.OperandScratch:
		j := -1
		for q := i - 1; q >= 0; q-- {
			pc := p.Calls[q]
			if pc.Symbol == "pack_a" && len(pc.Bind) == 2 && pc.Bind[1].Operand == a {
				j = q
				break
			}
		}
		if j < 0 {
			return i, false
		}
		pack := p.Calls[j]
		c.Bind[0] = ops.ReadOf(pack.Bind[0].Operand)
		if cmode == "0" {
			c.Bind[2] = c.Bind[0]
		}
		c.Args[7], c.Args[8] = pack.Args[2], pack.Args[3]
		c.Config["PACKA"] = "false"
		p.Calls = append(p.Calls[:j], p.Calls[j+1:]...)
		return i - 1, true
	default:
		return i, false
	}
	c.Config["PACKA"] = "false"
	return i, true
}

// unpackedConst is the constant of n elements that unpack makes of packed, held as packed
// (tensor.Relaid, layout naming the unpacking): a plan instance binds it unpacked, one copy
// for all the plans of the session's input shapes whose stand-ins read it, made when the
// first binds it and freed with the last (plan.Instance.Close). A copy per plan, made here,
// held the weights once more for every shape planned before its exact kernels arrived.
func unpackedConst(packed []float32, n int, layout string, unpack func(packed, un []float32)) (tensor.Tensor, error) {
	return tensor.NewRelaid([]int64{int64(n)}, layout, packed, unpack)
}

// unpackB makes gemm_nn call i (PACKB) read B unpacked: the packed constant unpacked into
// [k, n] (the strides the call carries already describe that layout). It is false when B is
// not such a constant.
func unpackB(p *ops.KernelPlan, i int) bool {
	c := &p.Calls[i]
	nv, err1 := strconv.Atoi(c.Config["NV"])
	vl, err2 := strconv.Atoi(c.Config["VL"])
	ps, err3 := 1, error(nil)
	if v, ok := c.Config["PS"]; ok {
		ps, err3 = strconv.Atoi(v)
	}
	b := c.Bind[1].Operand
	n, k := int(c.Args[3]), int(c.Args[4])
	if err1 != nil || err2 != nil || err3 != nil || ps < 1 || nv < 1 || nv%ps != 0 || vl < 1 || b.Kind != ops.OperandConst || n < nv*vl {
		return false
	}
	nr := nv / ps * vl // the panels' width (PS panels a tile)
	packed, ok := p.Consts[b.Index].Data().([]float32)
	if !ok || len(packed) != ceilDiv(n, nr)*k*nr {
		return false
	}
	un, err := unpackedConst(packed, k*n, fmt.Sprintf("gemm_nn.B unpacked k=%d n=%d nr=%d", k, n, nr), func(packed, un []float32) {
		tensor.UnpackPanels(packed, un, k, n, nr)
	})
	if err != nil {
		return false
	}
	p.Consts[b.Index] = un
	c.Args[9], c.Args[10], c.Args[11] = 0, 0, U(n)
	delete(c.Config, "PACKB")
	delete(c.Config, "PS")
	return true
}

// genericGemmNT gives gemm_nt one output per thread (the kernel needs m >= MR and n >= NC;
// the dot products over k take VL lanes and a scalar tail).
func genericGemmNT(p *ops.KernelPlan, i int) (int, bool) {
	cfg := p.Calls[i].Config
	if !genericEpilogues[cfg["ACT"]] {
		return i, false
	}
	cfg["MR"], cfg["NC"], cfg["VL"], cfg["TX"], cfg["TY"] = "1", "1", "8", "16", "4"
	delete(cfg, "FOLD")
	return i, true
}
