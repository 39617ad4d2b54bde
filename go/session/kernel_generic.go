package session

import (
	"maps"
	"strconv"

	"github.com/loomrt/loom/go/graph"
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
var genericPlanners = map[string]kernelPlanner{}

// genericCalls rewrite call i of p (a clone the rewrite may change) into the family's
// generic specialization, by "file:symbol". They return the call's index afterwards (a
// rewrite may drop calls before it) and whether they changed anything.
var genericCalls = map[string]func(p *kernelPlan, i int) (int, bool){
	"gemm_fast.loom:gemm_nn": genericGemmNN,
	"gemm_fast.loom:gemm_nt": genericGemmNT,
}

// servablePlan returns p when its kernels can run here; otherwise a plan of the same op with
// the shape-generic shipped kernels when those can, and else p with the reason the op runs
// as its host function (counted in CacheStats.NotShipped).
func (c *kernelCache) servablePlan(ctx *ModelContext, n *graph.Node, opset int64, in []valueInfo, p *kernelPlan) (*kernelPlan, string) {
	return c.servablePlanAs(ctx, plannerKey(n), n, opset, in, p)
}

// servablePlanAs is servablePlan for a plan made by the planner registered under key, which
// need not be plannerKey(n): host functions run other ops' kernels on their own node (FusedConv
// runs Conv's with the FusedConv node, Attention MatMul's), and the re-plan must use the
// generic planner of the op that was planned. (Keyed by the node, FusedConv's convolution was
// re-planned with FusedConv's generic planner, which fuses the activation, and the host function
// then applied it a second time: wrong for all but the idempotent Relu and Clip.)
func (c *kernelCache) servablePlanAs(ctx *ModelContext, key string, n *graph.Node, opset int64, in []valueInfo, p *kernelPlan) (*kernelPlan, string) {
	why := c.unservable(ctx, p.calls)
	if why == "" {
		return p, ""
	}
	if g := genericPlan(key, n, opset, in, p); g != nil && c.unservable(ctx, g.calls) == "" {
		return g, ""
	}
	c.mu.Lock()
	c.notShipped++
	c.mu.Unlock()
	return p, why
}

// genericPlan is p, made by the planner registered under key, re-planned with shape-generic
// kernels (see genericPlanners and genericCalls), or nil when nothing changes.
func genericPlan(key string, n *graph.Node, opset int64, in []valueInfo, p *kernelPlan) *kernelPlan {
	g, changed := (*kernelPlan)(nil), false
	if planner, ok := genericPlanners[key]; ok {
		q, _, err := planner(n, opset, in)
		if err != nil || q == nil {
			return nil
		}
		g, changed = q, true
	} else {
		g = p.clone()
	}
	for i := 0; i < len(g.calls); i++ {
		c := g.calls[i]
		if f, ok := genericCalls[c.file+":"+c.symbol]; ok {
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
	if err := fitPlan(g, kernelLimits); err != nil {
		return nil
	}
	g.reason += " (shape-generic shipped kernels: the JIT is unavailable)"
	return g
}

// clone copies p deeply enough for rewrites: its slices and the calls' configurations.
func (p *kernelPlan) clone() *kernelPlan {
	g := *p
	g.scratch = append([]int64(nil), p.scratch...)
	g.consts = append([]Tensor(nil), p.consts...)
	g.calls = make([]kernelCall, len(p.calls))
	for i, c := range p.calls {
		c.config = maps.Clone(c.config)
		c.args = append([]uint64(nil), c.args...)
		c.workload = c.args[:len(p.calls[i].workload)]
		if !sameBacking(p.calls[i].args, p.calls[i].workload) {
			c.workload = append([]uint64(nil), p.calls[i].workload...)
		}
		c.bind = append([]kernelBinding(nil), c.bind...)
		g.calls[i] = c
	}
	return &g
}

// sameBacking says whether w is a prefix of args (the planners' workload is args[:n]).
func sameBacking(args, w []uint64) bool {
	return len(w) <= len(args) && (len(w) == 0 || &args[0] == &w[0])
}

// genericEpilogues are the gemm epilogues (ACT) the generic tiles ship with: all of them (none,
// relu, sigmoid, tanh, leaky relu, hard sigmoid, clip, hard swish, swish).
var genericEpilogues = map[string]bool{"0": true, "1": true, "2": true, "3": true, "4": true, "5": true, "6": true, "7": true, "8": true}

// genericGemmNN gives gemm_nn a tile that fits every matrix (the kernel needs m >= MR and
// n >= NV·VL): MR=4, VL=8 when the matrix is that large and there is no epilogue, else one
// element per thread. A packed A (PACKA, whose layout follows MR) is unpacked: pack_a is
// dropped and gemm_nn reads A as it was given.
func genericGemmNN(p *kernelPlan, i int) (int, bool) {
	if !genericEpilogues[p.calls[i].config["ACT"]] {
		return i, false
	}
	m, n := p.calls[i].args[2], p.calls[i].args[3]
	if p.calls[i].config["PACKA"] == "true" {
		j, ok := unpackA(p, i)
		if !ok {
			return i, false
		}
		i = j
	}
	cfg := p.calls[i].config
	mr, vl, ks, tx, ty := 1, 1, 1, 16, 4
	if m >= 4 && n >= 8 && cfg["ACT"] == "0" && cfg["AFFINE"] == "false" {
		mr, vl, ks, tx, ty = 4, 8, 2, 4, 4
	}
	cfg["MR"], cfg["NV"], cfg["VL"], cfg["KS"] = strconv.Itoa(mr), "1", strconv.Itoa(vl), strconv.Itoa(ks)
	cfg["TX"], cfg["TY"], cfg["PACKA"] = strconv.Itoa(tx), strconv.Itoa(ty), "false"
	delete(cfg, "FOLD") // fitPlan sets it again when the device needs it
	return i, true
}

// unpackA makes gemm_nn call i (PACKA) read A unpacked: from the operand pack_a read (the
// pack_a call is removed), or, for A packed by the planner (a constant), from the constant
// unpacked. It returns gemm_nn's index afterwards, and false when it cannot tell where A is.
func unpackA(p *kernelPlan, i int) (int, bool) {
	c := &p.calls[i]
	mr, err := strconv.Atoi(c.config["MR"])
	if err != nil || mr < 1 {
		return i, false
	}
	a := c.bind[0].operand
	m, k := int(c.args[2]), int(c.args[4])
	cmode := c.config["CMODE"]
	switch a.kind {
	case operandConst:
		packed, ok := p.consts[a.index].data.([]float32)
		if !ok || m < mr || len(packed) != ceilDiv(m, mr)*k*mr {
			return i, false
		}
		un := make([]float32, m*k)
		for tile := range ceilDiv(m, mr) {
			i0 := min(tile*mr, m-mr)
			for q := range k {
				for r := range mr {
					un[(i0+r)*k+q] = packed[(tile*k+q)*mr+r]
				}
			}
		}
		p.consts[a.index] = MustTensor([]int64{int64(len(un))}, un)
		c.args[7], c.args[8] = u(k), 1
	case operandScratch:
		j := -1
		for q := i - 1; q >= 0; q-- {
			pc := p.calls[q]
			if pc.symbol == "pack_a" && len(pc.bind) == 2 && pc.bind[1].operand == a {
				j = q
				break
			}
		}
		if j < 0 {
			return i, false
		}
		pack := p.calls[j]
		c.bind[0] = readOf(pack.bind[0].operand)
		if cmode == "0" {
			c.bind[2] = c.bind[0]
		}
		c.args[7], c.args[8] = pack.args[2], pack.args[3]
		c.config["PACKA"] = "false"
		p.calls = append(p.calls[:j], p.calls[j+1:]...)
		return i - 1, true
	default:
		return i, false
	}
	c.config["PACKA"] = "false"
	return i, true
}

// genericGemmNT gives gemm_nt one output per thread (the kernel needs m >= MR and n >= NC;
// the dot products over k take VL lanes and a scalar tail).
func genericGemmNT(p *kernelPlan, i int) (int, bool) {
	cfg := p.calls[i].config
	if !genericEpilogues[cfg["ACT"]] {
		return i, false
	}
	cfg["MR"], cfg["NC"], cfg["VL"], cfg["TX"], cfg["TY"] = "1", "1", "8", "16", "4"
	delete(cfg, "FOLD")
	return i, true
}
