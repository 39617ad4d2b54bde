package kernelops

import (
	"fmt"
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Plans of the register-tiled kernels behind MatMul, Gemm, MatMulAdd, Conv and FusedConv
// (kernels/gemm_fast.loom and kernels/conv_fast.loom). The planners in ops_kernels.go
// describe each op as a gemmSpec or a direct convolution; the functions here choose the
// kernels, their register tiles and their blocks from the shapes.

// Tile choice works on estimated instruction counts: a step of a register tile issues its
// fused multiply-adds and its loads, and costs the larger of the two counts (the CPU retires
// about as many vector loads as FMAs per cycle). targetBlockMACs sizes a block: enough work
// that the per-block cost of the host backend (one C call, its launch and view checks) stays
// small, and still many blocks for large operands.
const (
	targetBlockMACs = 1 << 16
	maxThreads      = 256
	// maxAccumulators bounds a register tile to what 32 vector registers hold with its loads
	// (measured on AVX-512; see accumulators for other register files).
	maxAccumulators = 24
)

// The host's vector register file, which bounds the register tiles: 32 registers of 64 bytes
// on x86-64-v4 (AVX-512), 16 of 32 on v3 (AVX2), 16 of 16 on v1 and v2, 32 of 16 on aarch64.
var vectorRegs, vectorRegBytes = vectorFile(loom.HostTarget())

// SetVectorFile makes the planners size register tiles for target's vector registers instead
// of the host's, until the returned function restores the host's: for tests whose expected
// tile choices were measured on one register file. It must not run while plans are made.
func SetVectorFile(target loom.Target) (restore func()) {
	regs, bytes := vectorRegs, vectorRegBytes
	vectorRegs, vectorRegBytes = vectorFile(target)
	return func() { vectorRegs, vectorRegBytes = regs, bytes }
}

func vectorFile(t loom.Target) (regs, bytes int) {
	bytes = t.VectorBytes()
	if bytes == 0 {
		return 32, 64 // not a host target: no bound beyond AVX-512's
	}
	if t.Arch == "aarch64" || bytes == 64 {
		return 32, bytes
	}
	return 16, bytes
}

// accumulators is how many accumulators of vl f32 lanes a register tile may keep, given that
// measured on AVX-512 it may keep n: the same share of the host's register file (n of 32
// registers), counted in registers, a vector wider than one (vec[16]f32 on AVX2: two) taking
// several. On AVX-512 it is n for every vl up to 16; on AVX2 n/2 registers, so n/4 vectors of
// 16 lanes or n/2 of 8: tiles chosen for AVX-512's 32 registers spill half their accumulators
// to the stack on AVX2's 16 (PP-OCRv4's convolutions ran 1.4-2x behind ONNX Runtime).
func accumulators(n, vl int) int { return accumulatorsIn(n, vl, vectorRegs, vectorRegBytes) }

// accumulatorsIn is accumulators for a register file of regs registers of regBytes bytes.
func accumulatorsIn(n, vl, regs, regBytes int) int {
	per := ceilDiv(vl*4, regBytes)
	return max(1, n*regs/32/per)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// vectorWidth is the widest vector (a power of two up to 16 lanes) no longer than n (at
// least 1): tiles overlap rather than run past the edge, so a vector must fit in n.
func vectorWidth(n int) int {
	vl := 16
	for vl > 1 && vl > n {
		vl /= 2
	}
	return vl
}

// pow2AtMost is the largest power of two no larger than n (1 for n < 1).
func pow2AtMost(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

func pow2AtLeast(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// threadShape splits the threads of a block, about want of them, over nx by ny tiles
// (powers of two, so that few kernel specializations arise), ny first: the host runs a
// block's threads row by row, so a block of a column of tiles reuses that column's inputs
// (a panel of B, or of the image) from cache while its rows change.
func threadShape(want, nx, ny int) (tx, ty int) {
	want = min(max(want, 1), maxThreads)
	ty = min(pow2AtLeast(want), pow2AtLeast(ny))
	tx = min(pow2AtLeast(ceilDiv(want, ty)), pow2AtLeast(nx))
	return tx, ty
}

// actParams returns FusedConv's activation as the kernels' ACT code and parameters ("0"
// and zeros when fused is false).
func actParams(nd *graph.Node, fused bool) (act string, p0, p1 float32, err error) {
	if !fused {
		return "0", 0, 0, nil
	}
	name := nd.AttrString("activation", "")
	code, ok := convActivations[name]
	if !ok {
		return "", 0, 0, ops.OpErr("FusedConv: unknown activation %q", name)
	}
	params := nd.AttrFloats("activation_params")
	param := func(i int, def float32) float32 {
		if i < len(params) {
			return params[i]
		}
		return def
	}
	switch name {
	case "Swish":
		p0 = param(0, 1)
	case "LeakyRelu":
		p0 = param(0, 0.01)
	case "HardSigmoid":
		p0, p1 = param(0, 0.2), param(1, 0.5)
	case "Clip":
		p0, p1 = param(0, float32(math.Inf(-1))), param(1, float32(math.Inf(1)))
	}
	return code, p0, p1, nil
}

// outputAffine returns FusedConv's output_scale and output_shift, applied after the
// activation; affine is false when they leave the output as it is (and for Conv).
func outputAffine(nd *graph.Node, fused bool) (affine bool, scale, shift float32) {
	if !fused {
		return false, 1, 0
	}
	scale, shift = nd.AttrFloat("output_scale", 1), nd.AttrFloat("output_shift", 0)
	return scale != 1 || shift != 0, scale, shift
}

// gemmSpec is y[z0, z1] = act(alpha·A[z0, z1]·B[z0, z1] + beta·C[z0, z1]) (then p2·y + p3 when
// affine) for batch axes
// nb0 x nb1, A [m, k], B [k, n], C broadcast to [m, n], y contiguous [nb0, nb1, m, n]. Each
// operand is given by strides in elements: batch axis 0, batch axis 1, row, column (0
// broadcasts).
type gemmSpec struct {
	m, n, k     int
	nb0, nb1    int
	a, b, c     ops.Operand
	as, bs, cs  [4]int
	hasC        bool
	alpha, beta float32
	act         string
	p0, p1      float32
	affine      bool
	p2, p3      float32
	// aStatic is A's value when the plan knows it before the run (a convolution's weights):
	// a packed A is then computed once, here, instead of by pack_a each run, and kept in
	// aDerived (the session's cache of derived constants) for the plans of other shapes.
	aStatic  tensor.Tensor
	aDerived *ops.DerivedConsts
	// bStatic is B's value when it is the same at every run (a MatMul's or Gemm's weights),
	// and bDerived the session's cache of packed constants: a large such B is packed once
	// into gemm_nn's column panels (see packB).
	bStatic  tensor.Tensor
	bDerived *ops.DerivedConsts
	// gpu makes emit launch gemm_tiled (the GPU planners', see emitTiled) instead of the
	// host's register-tiled kernels.
	gpu bool
}

// nnTile is gemm_nn's register tile: mr rows by nv vectors of vl columns, ks interleaved
// partial sums over k.
type nnTile struct{ mr, nv, vl, ks int }

// nnCost estimates gemm_nn's instructions for the tile, in vectors of vl lanes: a step of p
// costs its fused multiply-adds or its loads (B's vectors and A's broadcasts), whichever are
// more. A tile whose accumulators, B's vectors and a broadcast outnumber the vector registers
// loads B again for every row (the C compiler folds B's loads into the multiply-adds): a
// vector wider than a register takes several (vec[16]f32 on AVX2: two), so on AVX2 a tile of
// 2 x 3 such vectors, which fits AVX-512's 32 registers, made 14 loads a step for 12
// multiply-adds and ran at 46-66 GFLOP/s where 4 x 1 runs at 88-100 (Zen 3, FMA peak 102.6:
// BenchmarkWeightProducts). On AVX-512 every tile the planner considers fits.
func (g gemmSpec) nnCost(t nnTile) int {
	tiles := ceilDiv(g.m, t.mr) * ceilDiv(g.n, t.nv*t.vl)
	rpv := ceilDiv(t.vl*4, vectorRegBytes) // registers a vector takes
	acc, bregs := t.mr*t.nv*rpv, t.nv*rpv
	loads := bregs + t.mr
	if acc+bregs+1 > vectorRegs {
		loads = t.mr*bregs + t.mr
	}
	return tiles * (ceilDiv(g.k*max(acc, loads), rpv) + 4*t.mr*t.nv + 16)
}

func (g gemmSpec) bestNN() (nnTile, int) { return g.bestNNOf(0) }

// bestNNOf is bestNN among tiles of nv vectors (any number when nv is 0).
func (g gemmSpec) bestNNOf(onlyNV int) (nnTile, int) {
	vl := vectorWidth(g.n)
	best, bestCost := nnTile{}, math.MaxInt
	maxAcc := accumulators(maxAccumulators, vl)
	for mr := 1; mr <= min(g.m, 8); mr++ {
		for nv := 1; nv <= min(g.n/vl, maxNV(mr)); nv++ {
			if mr*nv > maxAcc || (onlyNV != 0 && nv != onlyNV) {
				continue
			}
			t := nnTile{mr: mr, nv: nv, vl: vl}
			// On a tie, more accumulators, then taller tiles: a tile loads B's vectors (from L2
			// once B's panel outgrows L1) and broadcasts A's elements, so a taller tile reads
			// fewer bytes of B per multiply-add (PP-OCRv4: 2-3% faster with 8x3 than 4x6).
			if c := g.nnCost(t); c < bestCost || (c == bestCost && (mr*nv > best.mr*best.nv || (mr*nv == best.mr*best.nv && mr > best.mr))) {
				best, bestCost = t, c
			}
		}
	}
	// Interleave partial sums when few accumulators would wait on each other's FMAs: about 8
	// independent chains (registers) hide the FMA latency; the sums count against the tile's
	// accumulators (a vector wider than a register is as many chains as it takes registers).
	acc := best.mr * best.nv
	best.ks = min(max(ceilDiv(8, acc*ceilDiv(vl*4, vectorRegBytes)), 1), max(g.k/2, 1), max(maxAcc/acc, 1))
	return best, bestCost
}

// maxNV bounds gemm_nn's tile width (vectors) for tiles of mr rows. A one-row tile (a
// matrix-vector product: a decode step's projections) may be up to 16 vectors wide: such a
// product streams B from memory once, and reading 1 KiB of each of B's rows per pass rather
// than 256 bytes (4 vectors) keeps it near the memory bandwidth (a chain of 512 x 512 weights,
// m = 1: 26 -> 33-40 GB/s; 8 vectors gained little). Taller tiles broadcast more of A per
// vector of B, and 6 vectors suffice there.
func maxNV(mr int) int {
	if mr == 1 {
		return 16
	}
	return 6
}

// packBMinBytes is the size from which a constant B may be packed: smaller ones stay in the
// caches whatever their layout.
const packBMinBytes = 256 << 10

// packBPanelBytes is the panel size (k·NR floats, what one column tile streams) from which
// packing pays whatever B's row stride: such a panel outgrows the core's L2 share, and the
// prefetcher follows one contiguous stream where it loses NR-wide pieces of rows.
const packBPanelBytes = 512 << 10

// packBLongK: a B of k >= packBLongK rows is packed whatever its row stride. Each of a
// tile's k steps then loads its vectors of B from one contiguous panel rather than from rows
// 4n bytes apart: on the AVX-512 Xeon of 2026-12-05 (BenchmarkWeightProducts, one thread,
// quiet, three runs) 768 x 2304 ran 1.23-1.29x faster packed for 128 rows and 1.11-1.17x for
// one row, 768 x 768 1.02-1.10x and 1.06-1.10x; BERT-base over 128 tokens 170-177 -> 154-163
// ms (docs/performance.md). A vocabulary projection (768 x 50257, one row) is packed too since
// its tiles read several panels side by side (packStreams): 18.2-23.3 GB/s, 10.2-12.3 stored.
const packBLongK = 256

// packsB says whether gemm_nn reads B packed into column panels (PACKB), and if so the panels'
// width in vectors: for a constant B (one for every batch) of at least packBMinBytes whose
// layout costs: rows a multiple of 4 KiB apart (n = 1024, 3072, 4096...), whose loads of
// successive rows alias in the caches and defeat the prefetcher (a 768 x 3072 weight: 1.6x
// faster packed for one row of A, 1.2x for 128, measured by BenchmarkWeightProducts), panels
// of at least packBPanelBytes (a 3072 x 768 weight, 128 rows: 1.2x), or a k of at least
// packBLongK (768 x 768, 768 x 2304, a vocabulary projection: see packBLongK). B's layout in memory does not matter then (Gemm's transB too).
//
// A B the session already holds packed (tensor.Relaid, see Relayer) is read packed whenever
// its layout is the one this product wants, without a DerivedConsts.
func (g gemmSpec) packsB() (nv int, ok bool) {
	if g.bDerived == nil && tensor.RelaidOf(g.bStatic) == nil {
		return 0, false
	}
	return g.packPays()
}

// packPays is packsB's rule on B alone: whether its layout costs enough to pack it, and the
// panels' width in vectors.
func (g gemmSpec) packPays() (nv int, ok bool) {
	// A B read along its columns (Gemm's transB) leaves gemm_nn out: the product would be
	// gemm_nt's dot products, several times slower than gemm_nn's row tiles on such small k
	// and n as a transformer's projections have. Packed, B is read as gemm_nn wants whatever
	// its size.
	columns := g.bs[3] != 1 && g.n > 1
	if !g.bStatic.IsValid() || g.bStatic.DType() != graph.Float || g.k < 1 || (!columns && 4*g.k*g.n < packBMinBytes) ||
		(g.nb0 != 1 && g.bs[0] != 0) || (g.nb1 != 1 && g.bs[1] != 0) {
		return 0, false
	}
	nv = g.packedNV()
	nr := nv * vectorWidth(g.n)
	if nr > g.n {
		return 0, false
	}
	return nv, columns || (4*g.n)%4096 == 0 || 4*g.k*nr >= packBPanelBytes || g.k >= packBLongK
}

// packStreams is how many adjacent panels of a packed B a tile of t reads side by side
// (gemm_nn's PS): for a short product (at most packStreamMaxRows rows: a decode step) of a B
// of at least packStreamMinBytes, which streams from memory, several contiguous panels at once
// keep more loads in flight than one after another; up to packStreamMax, as the accumulators
// leave room in the registers. Zen 3, one thread, 768 x 50304 packed in panels of 16, a C loop
// of the kernel's shape: one panel at a time 14.9-16.5 GB/s, 2: 17.9-21.4, 4: 19.5-22.5, 8:
// 18.4-21.3 (docs/performance.md).
func (g gemmSpec) packStreams(t nnTile) int {
	const packStreamMaxRows, packStreamMinBytes, packStreamMax = 4, 1 << 20, 4
	if g.m > packStreamMaxRows || 4*g.k*g.n < packStreamMinBytes {
		return 1
	}
	rpv := ceilDiv(t.vl*4, vectorRegBytes)
	for s := packStreamMax; s > 1; s-- {
		if t.mr*t.nv*s*rpv+1 <= vectorRegs && t.nv*s*t.vl <= g.n {
			return s
		}
	}
	return 1
}

// withStreams is tile t widened to s panels (packStreams), its partial sums counted again.
func (g gemmSpec) withStreams(t nnTile, s int) nnTile {
	t.nv *= s
	acc := t.mr * t.nv
	maxAcc := accumulators(maxAccumulators, t.vl)
	t.ks = min(max(ceilDiv(8, acc*ceilDiv(t.vl*4, vectorRegBytes)), 1), max(g.k/2, 1), max(maxAcc/acc, 1))
	return t
}

// packedNV is the tile width (vectors) that a packed B's panels are cut for: the one gemm_nn
// picks for a tall product of this B, whatever the m of this one, so that the products of
// every input shape share one packed copy.
func (g gemmSpec) packedNV() int {
	tall := g
	tall.m = packedForRows
	t, _ := tall.bestNNOf(0)
	return t.nv
}

// packedForRows is the product height packedNV plans a packed B's panels for, whatever the
// product's own (so that one packed copy serves every shape).
const packedForRows = 256

// packedLayout names B packed into panels of nr columns for DerivedConsts and Relaid.
func (g gemmSpec) packedLayout(nr int) string {
	return fmt.Sprintf("gemm_nn.PACKB k=%d n=%d strides=%d,%d nr=%d", g.k, g.n, g.bs[2], g.bs[3], nr)
}

// packB is B packed into panels of nr columns: panel t holds columns j0..j0+nr-1 with j0 =
// min(t·nr, n - nr) (gemm_nn's overlapping last tile), row p of it at [t, p, :].
func (g gemmSpec) packB(nr int) tensor.Tensor {
	packed := make([]float32, ceilDiv(g.n, nr)*g.k*nr)
	g.packInto(packed, g.bStatic.Data().([]float32), nr)
	return tensor.MustTensor([]int64{int64(len(packed))}, packed)
}

// packInto writes b (B's elements, strides g.bs[2], g.bs[3]) into packed in panels of nr
// columns (see packB).
func (g gemmSpec) packInto(packed, b []float32, nr int) {
	tensor.PackPanels(packed, b, g.k, g.n, nr, g.bs[2], g.bs[3])
}

// packA says whether gemm_nn reads A packed by pack_a: for tall tiles (their row pointers
// outnumber the free general registers) over a long k, when one A serves every batch, so
// that packing costs a small part of the product (m·k copies against m·n·k multiply-adds).
func (g gemmSpec) packA(t nnTile) bool {
	return t.mr >= 6 && g.k >= 64 && g.n >= 4*t.nv*t.vl && (g.nb0 == 1 || g.as[0] == 0) && (g.nb1 == 1 || g.as[1] == 0)
}

// packStaticA packs a known A as pack_a would (row tile t's column q at [t, q, :]).
func (g gemmSpec) packStaticA(t nnTile, packA bool) (tensor.Tensor, bool) {
	if _, ok := g.aStatic.Data().([]float32); !packA || !ok {
		return tensor.Tensor{}, false
	}
	// The packing depends on these alone, not on the product's other extents: a model whose
	// inputs change shape packs each weight once (a convolution's packed weights were packed
	// again for every new image width, 2 ms of each new width's plan in PP-OCRv4 rec).
	layout := fmt.Sprintf("packA/mr%d/m%d/k%d/s%d,%d", t.mr, g.m, g.k, g.as[2], g.as[3])
	return g.aDerived.Get(g.aStatic, layout, func() tensor.Tensor {
		a, _ := g.aStatic.Data().([]float32)
		ntr := ceilDiv(g.m, t.mr)
		packed := make([]float32, ntr*g.k*t.mr)
		for tile := range ntr {
			i0 := min(tile*t.mr, g.m-t.mr)
			for q := range g.k {
				for r := range t.mr {
					packed[(tile*g.k+q)*t.mr+r] = a[(i0+r)*g.as[2]+q*g.as[3]]
				}
			}
		}
		return tensor.MustTensor([]int64{int64(len(packed))}, packed)
	}), true
}

// ntTile is gemm_nt's register tile: mr rows by nc columns, dot products over vl lanes.
type ntTile struct{ mr, nc, vl int }

func (g gemmSpec) ntCost(t ntTile) int {
	tiles := ceilDiv(g.m, t.mr) * ceilDiv(g.n, t.nc)
	acc := t.mr * t.nc
	return tiles * ((g.k/t.vl)*max(acc, t.mr+t.nc) + (g.k%t.vl)*acc*2 + 12*acc + 16)
}

func (g gemmSpec) bestNT() (ntTile, int) {
	best, bestCost := ntTile{}, math.MaxInt
	// A narrower vector can leave no scalar tail (k = 120: 15 vectors of 8, not 7 of 16 and 8
	// scalars).
	for vl := vectorWidth(g.k); vl >= max(vectorWidth(g.k)/4, 1); vl /= 2 {
		for mr := 1; mr <= min(g.m, 6); mr++ {
			for nc := 1; nc <= min(g.n, 6); nc++ {
				if mr*nc > accumulators(16, vl) {
					continue
				}
				t := ntTile{mr: mr, nc: nc, vl: vl}
				if c := g.ntCost(t); c < bestCost || (c == bestCost && mr*nc > best.mr*best.nc) {
					best, bestCost = t, c
				}
			}
		}
	}
	return best, bestCost
}

// cmode is how the kernels read C: 0 absent, 1 contiguous rows, 2 constant along rows.
func (g gemmSpec) cmode() int {
	switch {
	case !g.hasC:
		return 0
	case g.cs[3] == 0:
		return 2
	default:
		return 1
	}
}

// emit appends the launches (and any scratch) that compute y into p. It needs m, n >= 1.
func (g gemmSpec) emit(p *ops.KernelPlan, y ops.Operand) {
	if !g.hasC {
		g.c, g.cs, g.beta = g.a, [4]int{}, 0
	}
	if g.gpu {
		g.emitTiled(p, y)
		return
	}
	// gemm_nn reads B's rows as vectors; gemm_nt reads A's rows and B's columns as vectors.
	packedNV, packB := g.packsB()
	nnOK := g.bs[3] == 1 || g.n == 1 || packB
	ntOK := g.as[3] == 1 || g.k == 1
	ntOK = ntOK && (g.bs[2] == 1 || g.k == 1) && g.k >= 1
	if !nnOK && !ntOK {
		// Neither kernel reads B as given (Gemm with transA and transB): copy B to contiguous
		// scratch first. Gemm has no batch axes, so one matrix is copied.
		s := len(p.Scratch)
		p.Scratch = append(p.Scratch, int64(4*g.k*g.n))
		args := []uint64{1, U(g.k), U(g.n), 0, U(g.bs[2]), U(g.bs[3])}
		p.Calls = append(p.Calls, ops.KernelCall{File: "gemm_fast.loom", Symbol: "transpose2d", Args: args, Workload: args[:2],
			Bind: []ops.KernelBinding{ops.ReadOf(g.b), ops.WriteOf(ops.ScratchOperand(s))}})
		g.b, g.bs, nnOK = ops.ScratchOperand(s), [4]int{0, 0, g.n, 1}, true
	}
	if nnOK && g.n == 1 {
		g.bs[3] = 1
	}
	nn, nnCost, streams := nnTile{}, math.MaxInt, 1
	if packB {
		nn, nnCost = g.bestNNOf(packedNV)
		if streams = g.packStreams(nn); streams > 1 {
			nn = g.withStreams(nn, streams)
		}
	} else if nnOK {
		nn, nnCost = g.bestNN()
	}
	nt, ntCost := ntTile{}, math.MaxInt
	if ntOK {
		nt, ntCost = g.bestNT()
	}
	alpha, beta := uint64(math.Float32bits(g.alpha)), uint64(math.Float32bits(g.beta))
	p0, p1 := uint64(math.Float32bits(g.p0)), uint64(math.Float32bits(g.p1))
	p2, p3 := uint64(math.Float32bits(g.p2)), uint64(math.Float32bits(g.p3))
	bind := []ops.KernelBinding{ops.ReadOf(g.a), ops.ReadOf(g.b), ops.ReadOf(g.c), ops.WriteOf(y)}
	if nnCost <= ntCost {
		tileMACs := nn.mr * nn.nv * nn.vl * max(g.k, 1)
		want := ceilDiv(targetBlockMACs, tileMACs)
		if 4*g.k*g.n > 1<<20 {
			// B does not stay in cache: a block takes all row tiles of its columns, so
			// that B is read once (A, the smaller, is read once per block).
			want = max(want, ceilDiv(g.m, nn.mr))
		}
		tx, ty := threadShape(want, ceilDiv(g.n, nn.nv*nn.vl), ceilDiv(g.m, nn.mr))
		packA := g.packA(nn)
		if packed, ok := g.packStaticA(nn, packA); ok {
			p.Consts = append(p.Consts, packed)
			g.a, g.as = ops.ConstOperand(len(p.Consts)-1), [4]int{0, 0, g.k, 1}
			bind[0] = ops.ReadOf(g.a)
			if !g.hasC {
				bind[2] = ops.ReadOf(g.a)
			}
		} else if packA {
			// A packed into scratch (see pack_a); the kernel then ignores A's strides.
			s := len(p.Scratch)
			p.Scratch = append(p.Scratch, int64(4*ceilDiv(g.m, nn.mr)*nn.mr*g.k))
			args := []uint64{U(g.m), U(g.k), U(g.as[2]), U(g.as[3])}
			p.Calls = append(p.Calls, ops.KernelCall{File: "gemm_fast.loom", Symbol: "pack_a", Config: map[string]string{"MR": strconv.Itoa(nn.mr)},
				Args: args, Workload: args[:1], Bind: []ops.KernelBinding{ops.ReadOf(g.a), ops.WriteOf(ops.ScratchOperand(s))}})
			g.a, g.as = ops.ScratchOperand(s), [4]int{0, 0, g.k, 1}
			bind[0] = ops.ReadOf(g.a)
			if !g.hasC {
				bind[2] = ops.ReadOf(g.a)
			}
		}
		cfg := map[string]string{
			"MR": strconv.Itoa(nn.mr), "NV": strconv.Itoa(nn.nv), "VL": strconv.Itoa(nn.vl), "KS": strconv.Itoa(nn.ks),
			"TX": strconv.Itoa(tx), "TY": strconv.Itoa(ty), "CMODE": strconv.Itoa(g.cmode()), "ACT": g.act, "AFFINE": strconv.FormatBool(g.affine), "PACKA": strconv.FormatBool(packA)}
		if packB {
			// B packed once for the session (the kernel ignores B's strides, which then
			// describe the packed B unpacked: see unpackB).
			nr := nn.nv / streams * nn.vl
			layout := g.packedLayout(nr)
			p.Consts = append(p.Consts, g.bDerived.Get(g.bStatic, layout, func() tensor.Tensor { return g.packB(nr) }))
			g.b, g.bs = ops.ConstOperand(len(p.Consts)-1), [4]int{0, 0, g.n, 1}
			bind[1] = ops.ReadOf(g.b)
			cfg["PACKB"] = "true"
			if streams > 1 {
				cfg["PS"] = strconv.Itoa(streams)
			}
		}
		args := []uint64{U(g.nb0), U(g.nb1), U(g.m), U(g.n), U(g.k), U(g.as[0]), U(g.as[1]), U(g.as[2]), U(g.as[3]),
			U(g.bs[0]), U(g.bs[1]), U(g.bs[2]), U(g.cs[0]), U(g.cs[1]), U(g.cs[2]), U(g.cs[3]), alpha, beta, p0, p1, p2, p3}
		p.Calls = append(p.Calls, ops.KernelCall{File: "gemm_fast.loom", Symbol: "gemm_nn", Config: cfg,
			Args: args, Workload: args[:4], Bind: bind})
		return
	}
	tileMACs := nt.mr * nt.nc * g.k
	tx, ty := threadShape(ceilDiv(targetBlockMACs, tileMACs), ceilDiv(g.n, nt.nc), ceilDiv(g.m, nt.mr))
	// B's column j starts at j·bs[3] and runs along bs[2] = 1 (any stride when k = 1).
	args := []uint64{U(g.nb0), U(g.nb1), U(g.m), U(g.n), U(g.k), U(g.as[0]), U(g.as[1]), U(g.as[2]),
		U(g.bs[0]), U(g.bs[1]), U(g.bs[3]), U(g.cs[0]), U(g.cs[1]), U(g.cs[2]), U(g.cs[3]), alpha, beta, p0, p1, p2, p3}
	p.Calls = append(p.Calls, ops.KernelCall{File: "gemm_fast.loom", Symbol: "gemm_nt", Config: map[string]string{
		"MR": strconv.Itoa(nt.mr), "NC": strconv.Itoa(nt.nc), "VL": strconv.Itoa(nt.vl),
		"TX": strconv.Itoa(tx), "TY": strconv.Itoa(ty), "CMODE": strconv.Itoa(g.cmode()), "ACT": g.act, "AFFINE": strconv.FormatBool(g.affine)},
		Args: args, Workload: args[:4], Bind: bind})
}

// tiledTile is gemm_tiled's (kernels/gemm_gpu.loom) block tile: bm x bn elements of y, tm x tn
// of them a thread (so a block of (bm/tm)·(bn/tn) = 256 threads), k in steps of bk.
type tiledTile struct{ bm, bn, tm, tn, bk int }

// The shipped tiles (kernels/aot/manifest.txt): 64x64 serves every product and every epilogue;
// 128x128 (twice the multiply-adds per element loaded from shared memory, 128 registers a
// thread: 2 blocks, 25% of an sm_90's warps) serves large products without an activation.
var (
	tiledSmall = tiledTile{bm: 64, bn: 64, tm: 4, tn: 4, bk: 16}
	tiledLarge = tiledTile{bm: 128, bn: 128, tm: 8, tn: 8, bk: 8}
)

// tiledLargeBlocks is how many 128x128 blocks a product needs for tiledLarge: two a
// multiprocessor of an H100 (132), so that the larger tiles still fill the GPU.
const tiledLargeBlocks = 2 * 132

// tiled picks gemm_tiled's tile: tiledLarge for products at least 512 x 512 that fill
// tiledLargeBlocks of its blocks and have no epilogue, tiledSmall otherwise.
func (g gemmSpec) tiled() tiledTile {
	t := tiledLarge
	blocks := ceilDiv(g.m, t.bm) * ceilDiv(g.n, t.bn) * g.nb0 * g.nb1
	if g.m >= 512 && g.n >= 512 && blocks >= tiledLargeBlocks && g.act == "0" && !g.affine {
		return t
	}
	return tiledSmall
}

// emitTiled appends gemm_tiled's launch, which reads A, B and C with any strides: no pack_a,
// no transpose2d, no constant in another layout.
func (g gemmSpec) emitTiled(p *ops.KernelPlan, y ops.Operand) {
	t := g.tiled()
	f32 := func(v float32) uint64 { return uint64(math.Float32bits(v)) }
	args := []uint64{U(g.nb0), U(g.nb1), U(g.m), U(g.n), U(g.k),
		U(g.as[0]), U(g.as[1]), U(g.as[2]), U(g.as[3]), U(g.bs[0]), U(g.bs[1]), U(g.bs[2]), U(g.bs[3]),
		U(g.cs[0]), U(g.cs[1]), U(g.cs[2]), U(g.cs[3]), f32(g.alpha), f32(g.beta), f32(g.p0), f32(g.p1), f32(g.p2), f32(g.p3)}
	p.Calls = append(p.Calls, ops.KernelCall{File: "gemm_gpu.loom", Symbol: "gemm_tiled", Config: map[string]string{
		"BM": strconv.Itoa(t.bm), "BN": strconv.Itoa(t.bn), "TM": strconv.Itoa(t.tm), "TN": strconv.Itoa(t.tn), "BK": strconv.Itoa(t.bk),
		"CMODE": strconv.Itoa(g.cmode()), "ACT": g.act, "AFFINE": strconv.FormatBool(g.affine)},
		Args: args, Workload: args[:4], Bind: []ops.KernelBinding{ops.ReadOf(g.a), ops.ReadOf(g.b), ops.ReadOf(g.c), ops.WriteOf(y)}})
}

// mergeBatch folds the broadcast batch axes dims of operands with the given strides (one
// slice per operand, len(dims) each) into at most two axes: adjacent axes merge when every
// operand walks them as one, axes of size 1 drop. ok is false when more than two remain.
func mergeBatch(dims []int, strides ...[]int) (nb [2]int, st [][2]int, ok bool) {
	var fd []int
	fs := make([][]int, len(strides))
	for i, d := range dims {
		if d == 1 {
			continue
		}
		if last := len(fd) - 1; last >= 0 {
			merge := true
			for j := range strides {
				if fs[j][last] != strides[j][i]*d {
					merge = false
				}
			}
			if merge {
				fd[last] *= d
				for j := range strides {
					fs[j][last] = strides[j][i]
				}
				continue
			}
		}
		fd = append(fd, d)
		for j := range strides {
			fs[j] = append(fs[j], strides[j][i])
		}
	}
	if len(fd) > 2 {
		return nb, nil, false
	}
	nb = [2]int{1, 1}
	pad := 2 - len(fd)
	copy(nb[pad:], fd)
	st = make([][2]int, len(strides))
	for j := range strides {
		copy(st[j][pad:], fs[j])
	}
	return nb, st, true
}

// matMulSpec describes MatMul A·B (numpy semantics: 1-D operands, broadcast batch axes) as a
// gemmSpec and the output shape. A B without batch axes folds A's batch axes into rows.
func matMulSpec(as, bs []int64) (g gemmSpec, out []int64, reason string, err error) {
	d, err := infer.MatMulShapes(as, bs)
	if err != nil {
		return g, nil, "", ops.OpErr("%v", err)
	}
	m, k, n, batch, out := int(d.M), int(d.K), int(d.N), d.Batch, d.Out
	g = gemmSpec{m: m, n: n, k: k, nb0: 1, nb1: 1, a: ops.InputOperand(0), b: ops.InputOperand(1),
		as: [4]int{0, 0, k, 1}, bs: [4]int{0, 0, n, 1}, alpha: 1, act: "0"}
	if len(d.BBatch) == 0 {
		// One B for all: A's batch axes are more rows.
		g.m = m * int(ops.Numel(batch))
		return g, out, "", nil
	}
	ast, err := ops.BroadcastStrides(d.ABatch, batch)
	if err != nil {
		return g, nil, "", err
	}
	bst, err := ops.BroadcastStrides(d.BBatch, batch)
	if err != nil {
		return g, nil, "", err
	}
	dims := make([]int, len(batch))
	yst := ops.StridesOf(batch)
	for i, d := range batch {
		dims[i] = int(d)
		ast[i] *= m * k
		bst[i] *= k * n
		yst[i] *= m * n
	}
	nb, st, ok := mergeBatch(dims, ast, bst, yst)
	if !ok {
		return g, nil, "host: the batch axes do not fold into two", nil
	}
	g.nb0, g.nb1 = nb[0], nb[1]
	g.as[0], g.as[1], g.bs[0], g.bs[1] = st[0][0], st[0][1], st[1][0], st[1][1]
	return g, out, "", nil
}

// convPlan plans Conv (fused false) or FusedConv: 1x1 convolutions with unit strides and no
// padding as gemm_nn (pixels are columns), those with few output positions as gemm_nt dot
// products (see fewPositions), the others as conv_pad (when padding or a column stride needs
// it) and conv2d_direct or conv2d_cout (which, for tiles of whole rows, reads x in place
// instead of conv_pad's copy). 1-D convolutions are 2-D ones of height 1.
//
// With gpu (the GPU planner) the two matrix-product forms launch gemm_tiled instead; the
// direct convolutions are planned as for the host.
func convPlan(nd *graph.Node, in []ops.ValueInfo, fused, gpu bool) (*ops.KernelPlan, string, error) {
	cs, why, err := convShapeOf(nd, in, fused)
	if cs == nil {
		return nil, why, err
	}
	w, pr := cs.w, cs.pr
	act, p0, p1, affine, scale, shift, hasBias := cs.act, cs.p0, cs.p1, cs.affine, cs.scale, cs.shift, cs.hasBias
	kern, str, dil, pad := cs.kern, cs.str, cs.dil, cs.pad
	nb, c, h, wd, m, groups := cs.nb, cs.c, cs.h, cs.wd, cs.m, cs.groups
	oh, ow, outShape := cs.out[0], cs.out[1], cs.outShape
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: outShape}}}
	if nb*m*oh*ow == 0 {
		p.Reason = reasonFloat32 + ", empty output"
		return p, "", nil
	}
	cg, mg := c/groups, m/groups
	if kern == [2]int{1, 1} && str == [2]int{1, 1} && pad == [2]int{} && pr.PadEnd[0] == 0 && pr.PadEnd[len(pr.PadEnd)-1] == 0 {
		// y[n, g] = w[g]·x[n, g] + b: rows are the group's output channels, columns pixels.
		px := oh * ow
		g := gemmSpec{m: mg, n: px, k: cg, nb0: nb, nb1: groups, a: ops.InputOperand(1), b: ops.InputOperand(0),
			as: [4]int{0, mg * cg, cg, 1}, bs: [4]int{c * px, cg * px, px, 1}, alpha: 1, act: act, p0: p0, p1: p1,
			affine: affine, p2: scale, p3: shift, aStatic: w.Static, aDerived: w.Derived, gpu: gpu}
		if hasBias {
			g.hasC, g.c, g.beta, g.cs = true, ops.InputOperand(2), 1, [4]int{0, mg, 1, 0}
		}
		g.emit(p, ops.OutputOperand(0))
		p.Reason = reasonFloat32 + ", 1x1 convolution as a register-tiled matrix product"
		return p, "", nil
	}
	if kd := cg * kern[0] * kern[1]; fewPositions(oh, ow, kd, nb*groups) {
		g := convDotProducts(p, nb, c, h, wd, groups, cg, mg, [2]int{oh, ow}, kern, str, dil, pad)
		g.act, g.p0, g.p1, g.affine, g.p2, g.p3 = act, p0, p1, affine, scale, shift
		g.gpu = gpu
		if hasBias {
			g.hasC, g.c, g.beta, g.cs = true, ops.InputOperand(2), 1, [4]int{0, mg, 1, 0}
		}
		g.emit(p, ops.OutputOperand(0))
		p.Reason = reasonFloat32 + ", convolution with few output positions as dot products along the receptive field"
		return p, "", nil
	}
	depthwise := cg == 1 && mg == 1
	t, directCost := bestConvTile(mg, oh, ow, cg, kern, str, dil)
	ct, coutCost, coutOK := bestCoutTile(mg, oh, ow, cg, kern, str, dil)
	coutOK = coutOK && coutCost < directCost
	// The padded, column-phase-split input (see conv_fast.loom), or x itself.
	hp := (oh-1)*str[0] + (kern[0]-1)*dil[0] + 1
	wq := ow + (kern[1]-1)*dil[1]/str[1]
	xp := ops.InputOperand(0)
	// End padding alone (pads 0, 0, 1, 4) also needs the padded copy: hp x wq reach past x.
	needPad := pad != [2]int{} || str[1] > 1 || hp > h || wq > wd
	// conv2d_cout with tiles of whole rows reads x itself and skips the padding's taps
	// (its PAD mode), which spares conv_pad's copy and the multiply-adds by zero.
	coutPad := coutOK && needPad && ct.np == ow
	if coutPad {
		hp, wq = h, wd
	} else if needPad {
		vl := vectorWidth(min(wd, wq))
		planes := pow2AtMost(min(max(16384/(str[1]*hp*wq), 1), c)) // by c, not nb·c: one variant for every batch size
		args := []uint64{U(nb * c), U(hp), U(h), U(wd), U(wq), U(pad[0]), U(pad[1])}
		p.Scratch = append(p.Scratch, int64(4*nb*c*str[1]*hp*wq))
		xp = ops.ScratchOperand(len(p.Scratch) - 1)
		p.Calls = append(p.Calls, ops.KernelCall{File: "conv_fast.loom", Symbol: "conv_pad",
			Config: map[string]string{"SW": strconv.Itoa(str[1]), "VL": strconv.Itoa(vl), "PLANES": strconv.Itoa(planes)},
			Args:   args, Workload: args[:1], Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(xp)}})
	} else {
		hp, wq = h, wd
	}
	bias := ops.InputOperand(1) // not read without BIAS
	if hasBias {
		bias = ops.InputOperand(2)
	}
	args := []uint64{U(nb), U(mg), U(oh), U(ow), U(groups), U(cg), U(hp), U(wq),
		uint64(math.Float32bits(p0)), uint64(math.Float32bits(p1)), uint64(math.Float32bits(scale)), uint64(math.Float32bits(shift))}
	if coutOK {
		// The weights as wt [groups, cg·KH·KW, mg]: transposed here when the plan knows
		// them before the run, else by conv_wt each run.
		kd := cg * kern[0] * kern[1]
		var wt ops.Operand
		if w32, ok := w.Static.Data().([]float32); ok && len(w32) == m*kd {
			// Once a session (w.Derived), not once a plan: every input shape's plan reads
			// the same transpose.
			layout := fmt.Sprintf("conv_wt/g%d/mg%d/kd%d", groups, mg, kd)
			p.Consts = append(p.Consts, w.Derived.Get(w.Static, layout, func() tensor.Tensor {
				return tensor.MustTensor([]int64{int64(m * kd)}, CoutWeights(w32, groups, mg, kd))
			}))
			wt = ops.ConstOperand(len(p.Consts) - 1)
		} else {
			p.Scratch = append(p.Scratch, int64(4*m*kd))
			wt = ops.ScratchOperand(len(p.Scratch) - 1)
			wargs := []uint64{U(groups), U(kd), U(mg)}
			p.Calls = append(p.Calls, ops.KernelCall{File: "conv_fast.loom", Symbol: "conv_wt", Config: map[string]string{"VL": strconv.Itoa(ct.vl)},
				Args: wargs, Workload: wargs[:2], Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(1)), ops.WriteOf(wt)}})
		}
		kv, ku := tapUnroll(kern)
		// Blocks of rows of tiles, about coutBlockMACs each, balanced.
		rowMACs, nty := ct.mv*ct.vl*ct.ny*ow*kd, ceilDiv(oh, ct.ny)
		rb := min(max(coutBlockMACs/rowMACs, 1), nty)
		rb = ceilDiv(nty, ceilDiv(nty, rb))
		cfg := map[string]string{"MV": strconv.Itoa(ct.mv), "NY": strconv.Itoa(ct.ny), "NP": strconv.Itoa(ct.np), "VL": strconv.Itoa(ct.vl),
			"KH": strconv.Itoa(kern[0]), "KW": strconv.Itoa(kern[1]), "SH": strconv.Itoa(str[0]), "SW": strconv.Itoa(str[1]),
			"DH": strconv.Itoa(dil[0]), "DW": strconv.Itoa(dil[1]), "KV": strconv.Itoa(kv), "KU": strconv.Itoa(ku), "RB": strconv.Itoa(rb),
			"BIAS": strconv.FormatBool(hasBias), "ACT": act, "AFFINE": strconv.FormatBool(affine)}
		if coutPad {
			cfg["PAD"], cfg["PH"], cfg["PW"], cfg["IW"] = "true", strconv.Itoa(pad[0]), strconv.Itoa(pad[1]), strconv.Itoa(wd)
		}
		p.Calls = append(p.Calls, ops.KernelCall{File: "conv_fast.loom", Symbol: "conv2d_cout", Config: cfg, Args: args, Workload: args[:5],
			Bind: []ops.KernelBinding{ops.ReadOf(xp), ops.ReadOf(wt), ops.ReadOf(bias), ops.WriteOf(ops.OutputOperand(0))}})
		p.Reason = reasonFloat32 + ", register-tiled direct convolution along output channels"
		return p, "", nil
	}
	// Threads: pixel tiles first, then channel tiles (channels with depthwise) of one block.
	tileMACs := t.mr * t.nvy * t.nvx * t.vl * cg * kern[0] * kern[1]
	want := ceilDiv(targetBlockMACs, tileMACs)
	tx, ty := threadShape(want, ceilDiv(ow, t.nvx*t.vl), ceilDiv(oh, t.nvy))
	units := mg / t.mr
	if depthwise {
		units = groups
	}
	// Block z stays within the devices' limit (64: a 1-D convolution's blocks of one pixel
	// tile would otherwise take 256 channel tiles).
	tz := pow2AtMost(min(max(want/(tx*ty), 1), units, maxThreads/(tx*ty), int(ops.KernelLimits.MaxBlockDim[2])))
	kv, ku := tapUnroll(kern)
	cfg := map[string]string{"MR": strconv.Itoa(t.mr), "NVY": strconv.Itoa(t.nvy), "NVX": strconv.Itoa(t.nvx), "VL": strconv.Itoa(t.vl),
		"KH": strconv.Itoa(kern[0]), "KW": strconv.Itoa(kern[1]), "SH": strconv.Itoa(str[0]), "SW": strconv.Itoa(str[1]),
		"DH": strconv.Itoa(dil[0]), "DW": strconv.Itoa(dil[1]), "KV": strconv.Itoa(kv), "KU": strconv.Itoa(ku),
		"TX": strconv.Itoa(tx), "TY": strconv.Itoa(ty), "TZ": strconv.Itoa(tz),
		"DEPTHWISE": strconv.FormatBool(depthwise), "BIAS": strconv.FormatBool(hasBias), "ACT": act,
		"AFFINE": strconv.FormatBool(affine)}
	p.Calls = append(p.Calls, ops.KernelCall{File: "conv_fast.loom", Symbol: "conv2d_direct", Config: cfg, Args: args, Workload: args[:5],
		Bind: []ops.KernelBinding{ops.ReadOf(xp), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(bias), ops.WriteOf(ops.OutputOperand(0))}})
	p.Reason = reasonFloat32 + ", register-tiled direct convolution"
	return p, "", nil
}

// Convolutions with few output positions (Silero VAD's STFT and encoder: 1 to 4 positions
// over up to 387 inputs each) leave most lanes of conv2d_direct's vectors, which run along
// output columns, idle. They run as y[n, g] = W[g]·cols[n, g]ᵀ instead, with W [mg, cg·KH·KW]
// and cols [P, cg·KH·KW] the receptive field of each output position: gemm_nt's dot products
// run along the receptive field, contiguous in both. They are chosen for fewer than 16 output
// columns (conv2d_direct cannot fill a vector) and at most maxDotPositions positions (so that
// the copy of the receptive fields stays small next to the products), receptive fields of at
// least minDotInputs inputs (to fill the dot products' vectors) and copies of at most
// maxColsBytes.
const (
	maxDotPositions = 16
	minDotInputs    = 32
	maxColsBytes    = 1 << 20
)

// fewPositions reports whether a convolution with oh x ow output positions and receptive
// fields of kd inputs (for ng batches times groups) runs as dot products.
func fewPositions(oh, ow, kd, ng int) bool {
	return ow < 16 && oh*ow <= maxDotPositions && kd >= minDotInputs && 4*ng*oh*ow*kd <= maxColsBytes
}

// convDotProducts describes the convolution as a gemm_nt product (see fewPositions) and
// appends the im2col launch it needs to p: none when every receptive field is one contiguous
// window of x (one input channel per group, one row, no padding inside the windows: the STFT
// as a convolution), whose rows then are x read with the column stride as row stride.
func convDotProducts(p *ops.KernelPlan, nb, c, h, wd, groups, cg, mg int, out, kern, str, dil, pad [2]int) gemmSpec {
	oh, ow := out[0], out[1]
	kd, px := cg*kern[0]*kern[1], oh*ow
	g := gemmSpec{m: mg, n: px, k: kd, nb0: nb, nb1: groups, a: ops.InputOperand(1),
		as: [4]int{0, mg * kd, kd, 1}, alpha: 1, act: "0"}
	windows := cg == 1 && h == 1 && kern[0] == 1 && oh == 1 && pad == [2]int{} &&
		(dil[1] == 1 || kern[1] == 1) && (ow-1)*str[1]+kern[1] <= wd
	if windows {
		g.b, g.bs = ops.InputOperand(0), [4]int{c * wd, wd, 1, str[1]}
		return g
	}
	rows := pow2AtMost(min(max(4096/kd, 1), px))
	s := len(p.Scratch)
	p.Scratch = append(p.Scratch, int64(4*nb*groups*px*kd))
	args := []uint64{U(nb * groups), U(px), U(cg), U(h), U(wd), U(ow), U(pad[0]), U(pad[1])}
	p.Calls = append(p.Calls, ops.KernelCall{File: "conv_fast.loom", Symbol: "conv_cols", Config: map[string]string{
		"KH": strconv.Itoa(kern[0]), "KW": strconv.Itoa(kern[1]), "SH": strconv.Itoa(str[0]), "SW": strconv.Itoa(str[1]),
		"DH": strconv.Itoa(dil[0]), "DW": strconv.Itoa(dil[1]), "ROWS": strconv.Itoa(rows)},
		Args: args, Workload: args[:2], Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.ScratchOperand(s))}})
	g.b, g.bs = ops.ScratchOperand(s), [4]int{groups * px * kd, px * kd, 1, kd}
	return g
}

// maxUnrolledTaps bounds the kernel taps conv2d_direct unrolls into straight-line code: all
// of a kernel up to 7x7; for larger ones (a 1-D convolution over 256 samples) the C compiler
// would take minutes over the unrolled function.
const maxUnrolledTaps = 49

// tapUnroll returns how many kernel rows and columns conv2d_direct unrolls at a time
// (divisors of the kernel's size).
func tapUnroll(kern [2]int) (kv, ku int) {
	if kern[0]*kern[1] <= maxUnrolledTaps {
		return kern[0], kern[1]
	}
	ku = 1
	for d := 1; d <= 8; d++ {
		if kern[1]%d == 0 {
			ku = d
		}
	}
	return 1, ku
}

// convTile is conv2d_direct's register tile: mr output channels by nvy rows by nvx vectors
// of vl columns.
type convTile struct{ mr, nvy, nvx, vl int }

// bestConvTile picks the register tile of the fewest estimated cycles over the whole output
// of one group: per input channel a tile issues MR·NV·KK FMAs (two a cycle), loads the
// vectors of its distinct input rows (GCC loads a row shared by two taps once; unaligned
// vectors cost about one and a half loads) and MR·KK weights (two loads a cycle), and each
// accumulator waits KK times on the FMA latency; a tile also costs its setup and stores.
// Measured on AVX-512: more than 16 accumulators spill (8 with depthwise, whose taps all
// load vectors).
func bestConvTile(mg, oh, ow, cg int, kern, str, dil [2]int) (convTile, float64) {
	maxAcc := 16
	if cg == 1 && mg == 1 {
		maxAcc = 8
	}
	vl := vectorWidth(ow)
	maxAcc = accumulators(maxAcc, vl)
	kk := kern[0] * kern[1]
	var rows [9]int // rows[nvy]: the distinct input rows a tile of nvy output rows reads, any mr
	for nvy, seen := 1, map[int]bool{}; nvy <= min(oh, 8); nvy++ {
		for ky := range kern[0] {
			seen[(nvy-1)*str[0]+ky*dil[0]] = true
		}
		rows[nvy] = len(seen)
	}
	best, bestCost := convTile{}, math.Inf(1)
	for mr := 1; mr <= min(mg, 16); mr++ {
		for nvy := 1; nvy <= min(oh, 8); nvy++ {
			for nvx := 1; nvx <= min(ow/vl, 6); nvx++ {
				nv := nvy * nvx
				if mr*nv > maxAcc {
					continue
				}
				fmas := float64(mr * nv * kk)
				loads := float64(rows[nvy]*nvx*kern[1])*1.5 + float64(mr*kk)
				perChannel := max(fmas/2, loads/2, float64(4*kk))
				tiles := ceilDiv(mg, mr) * ceilDiv(oh, nvy) * ceilDiv(ow, nvx*vl)
				cost := float64(tiles) * (float64(cg)*perChannel + float64(2*mr*nv) + 30)
				if cost < bestCost || (cost == bestCost && mr*nv > best.mr*best.nvy*best.nvx) {
					best, bestCost = convTile{mr: mr, nvy: nvy, nvx: nvx, vl: vl}, cost
				}
			}
		}
	}
	return best, bestCost
}

// coutWeights is conv_wt's transpose of w [groups, mg, kd] into [groups, kd, mg].
func CoutWeights(w []float32, groups, mg, kd int) []float32 {
	wt := make([]float32, len(w))
	for g := range groups {
		for o := range mg {
			for r := range kd {
				wt[(g*kd+r)*mg+o] = w[(g*mg+o)*kd+r]
			}
		}
	}
	return wt
}

// coutTile is conv2d_cout's register tile: ny output rows by np columns by mv vectors of vl
// output channels.
type coutTile struct{ mv, ny, np, vl int }

// Limits of conv2d_cout's tiles: maxCoutWidth keeps it to small images, whose rows leave
// conv2d_direct's vectors along output columns partly idle or overlapping; maxCoutTaps bounds
// the unrolled taps of one input channel (its code holds the whole kernel).
// coutBlockMACs sizes conv2d_cout's blocks: larger than targetBlockMACs, since each block
// also pays its launch checks and views (measured: MNIST's second convolution, 14 rows of
// 44800 multiply-adds, takes 5% longer in blocks of one row than in one block).
const (
	maxCoutWidth  = 32
	maxCoutTaps   = 49
	coutBlockMACs = 4 * targetBlockMACs
)

// bestCoutTile picks conv2d_cout's register tile of the fewest estimated cycles (in
// bestConvTile's terms) over the output of one group, and whether conv2d_cout applies: not
// depthwise, output channels per group a multiple of 8 (the vectors), output rows narrower
// than maxCoutWidth, at most maxCoutTaps taps. Per input channel a tile issues MV·NY·NP·KK
// FMAs (two a cycle) and loads MV·KK weight vectors and broadcasts each distinct input
// element of its rows once (GCC keeps a broadcast in a register for the taps that share it;
// about two loads a cycle); each accumulator waits KK times on the FMA latency. Its
// epilogue stores the NY·NP·MV·VL results one lane at a time (an extract and a store each).
// Measured on AVX-512: up to 24 accumulators stay in registers next to the weights and
// broadcasts.
func bestCoutTile(mg, oh, ow, cg int, kern, str, dil [2]int) (coutTile, float64, bool) {
	kk := kern[0] * kern[1]
	if mg%8 != 0 || (cg == 1 && mg == 1) || ow >= maxCoutWidth || kk > maxCoutTaps {
		return coutTile{}, 0, false
	}
	vl := 16
	if mg%16 != 0 {
		vl = 8
	}
	best, bestCost := coutTile{}, math.Inf(1)
	maxAcc := accumulators(maxAccumulators, vl)
	for mv := 1; mv <= min(mg/vl, 4); mv++ {
		for ny := 1; ny <= min(oh, 4); ny++ {
			rows := map[int]bool{}
			for j := range ny {
				for ky := range kern[0] {
					rows[j*str[0]+ky*dil[0]] = true
				}
			}
			for np := 1; np <= min(ow, maxAcc); np++ {
				acc := mv * ny * np
				if acc > maxAcc {
					continue
				}
				// Distinct input columns of a row of the tile.
				cols := (np-1)*str[1] + (kern[1]-1)*dil[1] + 1
				cols = min(cols, np*kern[1])
				fmas := float64(acc * kk)
				loads := float64(mv*kk + len(rows)*cols)
				perChannel := max(fmas/2, loads/2, float64(4*kk))
				tiles := ceilDiv(mg, mv*vl) * ceilDiv(oh, ny) * ceilDiv(ow, np)
				cost := float64(tiles) * (float64(cg)*perChannel + float64(acc*vl) + 30)
				if cost < bestCost || (cost == bestCost && acc > best.mv*best.ny*best.np) {
					best, bestCost = coutTile{mv: mv, ny: ny, np: np, vl: vl}, cost
				}
			}
		}
	}
	return best, bestCost, true
}

// convShape is what the conv planners first derive from Conv or FusedConv: the checked inputs,
// the parameters as 2-D ones (a 1-D convolution has height 1), the fused epilogue and the
// output shape.
type convShape struct {
	x, w                             ops.ValueInfo
	pr                               ops.ConvParams
	act                              string
	p0, p1                           float32
	affine                           bool
	scale, shift                     float32
	hasBias                          bool
	kern, str, dil, pad, padEnd, out [2]int
	nb, c, h, wd, m, groups          int
	outShape                         []int64
}

// convShapeOf checks Conv's or FusedConv's inputs for the conv kernels (float32, 1-D or 2-D, a
// kernel_shape that is the weight's, a bias of one value per output channel, non-negative
// padding, positive strides and dilations) and derives its convShape. A nil result declines
// with the reason (the host function runs); an error is an invalid input.
func convShapeOf(nd *graph.Node, in []ops.ValueInfo, fused bool) (*convShape, string, error) {
	if len(in) < 2 || !allFloat32(in, 0, 1) || (len(in) > 2 && in[2].Present && in[2].Dtype != graph.Float) {
		return nil, declineType(in), nil
	}
	x, w := in[0], in[1]
	if len(x.Shape) != 3 && len(x.Shape) != 4 {
		return nil, "host: the conv kernels cover 1-D and 2-D convolutions", nil
	}
	pr, err := ops.ConvParamsOf(nd, x.Shape, w.Shape)
	if err != nil {
		return nil, "", err
	}
	cs := &convShape{x: x, w: w, pr: pr}
	if cs.act, cs.p0, cs.p1, err = actParams(nd, fused); err != nil {
		return nil, "", err
	}
	cs.affine, cs.scale, cs.shift = outputAffine(nd, fused)
	cs.hasBias = len(in) > 2 && in[2].Present
	if cs.hasBias && (len(in[2].Shape) != 1 || in[2].Shape[0] != w.Shape[0]) {
		return nil, "", ops.OpErr("Conv: bias of shape %v for %d output channels", in[2].Shape, w.Shape[0])
	}
	two := func(v []int, one int) [2]int {
		if len(v) == 1 {
			return [2]int{one, v[0]}
		}
		return [2]int{v[0], v[1]}
	}
	cs.kern, cs.str, cs.dil = two(pr.Kernel, 1), two(pr.Strides, 1), two(pr.Dilations, 1)
	cs.pad, cs.padEnd, cs.out = two(pr.PadBegin, 0), two(pr.PadEnd, 0), two(pr.Out, 1)
	for i, d := range w.Shape[2:] {
		if int(d) != pr.Kernel[i] {
			return nil, "", ops.OpErr("Conv: kernel_shape %v differs from the weight's %v", pr.Kernel, w.Shape[2:])
		}
	}
	for i := range 2 {
		if cs.pad[i] < 0 || cs.padEnd[i] < 0 || cs.str[i] < 1 || cs.dil[i] < 1 || cs.kern[i] < 1 {
			return nil, "host: the conv kernels cover non-negative padding and positive strides and dilations", nil
		}
	}
	cs.nb, cs.c = int(x.Shape[0]), int(x.Shape[1])
	cs.h, cs.wd = 1, int(x.Shape[2])
	if len(x.Shape) == 4 {
		cs.h, cs.wd = int(x.Shape[2]), int(x.Shape[3])
	}
	cs.m, cs.groups = int(w.Shape[0]), pr.Group
	cs.outShape = []int64{int64(cs.nb), int64(cs.m)}
	for _, o := range pr.Out {
		cs.outShape = append(cs.outShape, int64(o))
	}
	return cs, "", nil
}
