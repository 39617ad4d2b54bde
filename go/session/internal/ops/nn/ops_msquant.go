package nn

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ONNX Runtime's block-quantized contrib operators (com.microsoft): MatMulNBits and
// GatherBlockQuantized, with 4- or 8-bit codes packed in uint8. These host functions are the
// reference; the kernel planners (kernelops, kernels/quant.loom) dequantize inside the kernels.

func init() {
	ops.HostOps[graph.MSDomain+":MatMulNBits"] = MatMulNBitsHost
	ops.HostOps[graph.MSDomain+":GatherBlockQuantized"] = GatherBlockQuantizedHost
}

// Operand describes one input of a node to the checks below: present, its type and shape.
type Operand struct {
	Present bool
	Dtype   tensor.DType
	Shape   []int64
}

// OperandsOf describes tensors (an omitted input, the zero Tensor, is absent).
func OperandsOf(in []tensor.Tensor) []Operand {
	out := make([]Operand, len(in))
	for i, t := range in {
		if t.IsValid() {
			out[i] = Operand{true, t.DType(), t.Dims()}
		}
	}
	return out
}

func operandAt(in []Operand, i int) Operand {
	if i < len(in) {
		return in[i]
	}
	return Operand{}
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// MatMulNBits is the checked geometry of a MatMulNBits node: A [..., K] times the N x K
// dequantized weights, M = the rows of A (its leading axes folded).
type MatMulNBits struct {
	K, N, M, Bits, BlockSize int64
	KBlocks, Blob, ZPBytes   int64 // ⌈K/block⌉, bytes of a block's codes, zero-point bytes per row
	HasZP, HasBias           bool
	// FloatZP: the zero points are floats of A's type, one per block ([N·⌈K/block⌉]), not packed
	// codes. GIdx: g_idx (int32 [K], act-order weights) gives the block of each of K's columns.
	FloatZP, GIdx bool
	Out           []int64
}

// CheckMatMulNBits checks a MatMulNBits node and its inputs (A, B, scales, zero_points,
// g_idx, bias) and returns its geometry; each error names the attribute or input at fault.
func CheckMatMulNBits(n *graph.Node, in []Operand) (MatMulNBits, error) {
	var g MatMulNBits
	g.K, g.N = n.AttrInt("K", 0), n.AttrInt("N", 0)
	g.Bits, g.BlockSize = n.AttrInt("bits", 4), n.AttrInt("block_size", 0)
	if g.K <= 0 || g.N <= 0 {
		return g, fmt.Errorf("attributes K (%d) and N (%d) must be positive", g.K, g.N)
	}
	if g.Bits != 4 && g.Bits != 8 {
		return g, fmt.Errorf("bits %d is not supported (4 or 8)", g.Bits)
	}
	if g.BlockSize < 16 || g.BlockSize&(g.BlockSize-1) != 0 {
		return g, fmt.Errorf("block_size %d must be a power of two, at least 16", g.BlockSize)
	}
	a, b, s := operandAt(in, 0), operandAt(in, 1), operandAt(in, 2)
	zp, gidx, bias := operandAt(in, 3), operandAt(in, 4), operandAt(in, 5)
	if !a.Present || !b.Present || !s.Present {
		return g, fmt.Errorf("inputs A, B and scales are required")
	}
	if a.Dtype != graph.Float && a.Dtype != graph.Float16 {
		return g, fmt.Errorf("input A is %s; float and float16 are supported", a.Dtype)
	}
	if len(a.Shape) < 1 || a.Shape[len(a.Shape)-1] != g.K {
		return g, fmt.Errorf("input A has the shape %v, whose last axis is not K = %d", a.Shape, g.K)
	}
	g.KBlocks = (g.K + g.BlockSize - 1) / g.BlockSize
	g.Blob = g.BlockSize * g.Bits / 8
	if b.Dtype != graph.Uint8 {
		return g, fmt.Errorf("input B is %s; it must be uint8 (packed codes)", b.Dtype)
	}
	if len(b.Shape) != 3 || b.Shape[0] != g.N || b.Shape[1] != g.KBlocks || b.Shape[2] != g.Blob {
		return g, fmt.Errorf("input B has the shape %v; N = %d, K = %d, block_size = %d and bits = %d need [%d %d %d]",
			b.Shape, g.N, g.K, g.BlockSize, g.Bits, g.N, g.KBlocks, g.Blob)
	}
	if s.Dtype != a.Dtype {
		return g, fmt.Errorf("input scales is %s, A is %s: they must be the same type", s.Dtype, a.Dtype)
	}
	if numel(s.Shape) != g.N*g.KBlocks {
		return g, fmt.Errorf("input scales has the shape %v (%d elements); it needs N·⌈K/block_size⌉ = %d", s.Shape, numel(s.Shape), g.N*g.KBlocks)
	}
	g.ZPBytes = (g.KBlocks*g.Bits + 7) / 8
	if zp.Present {
		switch zp.Dtype {
		case graph.Uint8:
			if numel(zp.Shape) != g.N*g.ZPBytes {
				return g, fmt.Errorf("input zero_points has the shape %v (%d elements); packed %d-bit zero points need N·%d = %d bytes",
					zp.Shape, numel(zp.Shape), g.Bits, g.ZPBytes, g.N*g.ZPBytes)
			}
		case a.Dtype:
			if numel(zp.Shape) != g.N*g.KBlocks {
				return g, fmt.Errorf("input zero_points is %s%v (%d elements); float zero points need one a block, N·⌈K/block_size⌉ = %d",
					zp.Dtype, zp.Shape, numel(zp.Shape), g.N*g.KBlocks)
			}
			g.FloatZP = true
		default:
			return g, fmt.Errorf("input zero_points is %s; it must be packed uint8 or %s (A's type)", zp.Dtype, a.Dtype)
		}
		g.HasZP = true
	}
	if gidx.Present {
		if gidx.Dtype != graph.Int32 || len(gidx.Shape) != 1 || gidx.Shape[0] != g.K {
			return g, fmt.Errorf("input g_idx is %s%v; it must be int32[%d] (K)", gidx.Dtype, gidx.Shape, g.K)
		}
		if g.HasZP && !g.FloatZP {
			// ONNX Runtime 1.30 reads packed zero points with g_idx in a way that matches no
			// layout of them we could find (tools/onnx/msquant_models.py): refused, not guessed.
			return g, fmt.Errorf("input g_idx with packed uint8 zero_points is not supported (float zero points or none are)")
		}
		g.GIdx = true
	}
	if bias.Present {
		if bias.Dtype != a.Dtype || numel(bias.Shape) != g.N || len(bias.Shape) != 1 {
			return g, fmt.Errorf("input bias is %s%v; it must be %s[%d]", bias.Dtype, bias.Shape, a.Dtype, g.N)
		}
		g.HasBias = true
	}
	g.M = numel(a.Shape[:len(a.Shape)-1])
	g.Out = append(append([]int64{}, a.Shape[:len(a.Shape)-1]...), g.N)
	return g, nil
}

// code reads code e of a row of packed codes.
func code(row []uint8, e, bits int64) float64 {
	if bits == 4 {
		return float64(row[e/2] >> (4 * (e % 2)) & 15)
	}
	return float64(row[e])
}

// MatMulNBitsHost is com.microsoft MatMulNBits: Y = A · dequant(B)ᵀ + bias, where weight
// (j, e) is (code - zero point)·scale of block e/block_size of row j, accumulated in float64.
func MatMulNBitsHost(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	g, err := CheckMatMulNBits(n, OperandsOf(in))
	if err != nil {
		return nil, err
	}
	if err := ops.ReserveShape(rc, "the output", in[0].DType(), g.Out, 0); err != nil {
		return nil, err
	}
	a := tensor.Float64s(in[0])
	bq := in[1].Data().([]uint8)
	sc := tensor.Float64s(in[2])
	var zp []uint8
	var zpf []float64
	if z := ops.Optional(in, 3); z.IsValid() {
		if g.FloatZP {
			zpf = tensor.Float64s(z)
		} else {
			zp = z.Data().([]uint8)
		}
	}
	var gidx []int64
	if gi := ops.Optional(in, 4); g.GIdx {
		gidx = tensor.Int64s(gi)
		for e, q := range gidx {
			if q < 0 || q >= g.KBlocks {
				return nil, tensor.NewError("Run", tensor.ErrInvalidArgument, "input g_idx[%d] = %d, outside [0, %d) (the blocks of K)", e, q, g.KBlocks)
			}
		}
	}
	var bias []float64
	if b := ops.Optional(in, 5); b.IsValid() {
		bias = tensor.Float64s(b)
	}
	mid := float64(int64(1) << (g.Bits - 1))
	// One row of dequantized weights at a time (K floats), never the whole matrix.
	w := make([]float64, g.K)
	y := make([]float64, g.M*g.N)
	rowBytes := g.KBlocks * g.Blob
	for j := int64(0); j < g.N; j++ {
		codes := bq[j*rowBytes : (j+1)*rowBytes]
		for e := int64(0); e < g.K; e++ {
			q := e / g.BlockSize
			if gidx != nil {
				q = gidx[e]
			}
			z := mid
			switch {
			case zpf != nil:
				z = zpf[j*g.KBlocks+q]
			case zp != nil:
				z = code(zp[j*g.ZPBytes:(j+1)*g.ZPBytes], q, g.Bits)
			}
			w[e] = (code(codes, e, g.Bits) - z) * sc[j*g.KBlocks+q]
		}
		for i := int64(0); i < g.M; i++ {
			row := a[i*g.K : (i+1)*g.K]
			t := 0.0
			for e, v := range row {
				t += v * w[e]
			}
			if bias != nil {
				t += bias[j]
			}
			y[i*g.N+j] = t
		}
	}
	return ops.FloatResult(in[0].DType(), g.Out, y)
}

// GatherBQ is the checked geometry of a GatherBlockQuantized node over uint8 data quantized
// along its last axis: the codes [outer, dim, inner] (logical shape, inner ending with the
// quantized axis), gathered along the axis of length dim.
type GatherBQ struct {
	Bits, BlockSize, GatherAxis int64
	Logical                     []int64 // data's shape in codes
	Rows, Cols                  int64   // data as [rows, cols] codes (rows: all but the last axis)
	KBlocks, ZPBytes            int64   // blocks along the last axis, zero-point bytes per row
	HasZP                       bool
	Out                         []int64
	OutType                     tensor.DType
	// Narrow: int4 or uint4 data (one code an element, quantized along QuantAxis, zero points
	// of data's type, 0 by default) rather than packed uint8 codes along the last axis.
	Narrow    bool
	QuantAxis int64
}

// CheckGatherBlockQuantized checks a GatherBlockQuantized node and its inputs (data,
// indices, scales, zero_points).
func CheckGatherBlockQuantized(n *graph.Node, in []Operand) (GatherBQ, error) {
	var g GatherBQ
	g.Bits, g.BlockSize = n.AttrInt("bits", 4), n.AttrInt("block_size", 128)
	data, idx, s, zp := operandAt(in, 0), operandAt(in, 1), operandAt(in, 2), operandAt(in, 3)
	if !data.Present || !idx.Present || !s.Present {
		return g, fmt.Errorf("inputs data, indices and scales are required")
	}
	if data.Dtype == graph.Int4 || data.Dtype == graph.Uint4 {
		return checkGatherBQNarrow(n, data, idx, s, zp)
	}
	if data.Dtype != graph.Uint8 {
		return g, fmt.Errorf("input data is %s; it must be uint8 (packed codes), int4 or uint4", data.Dtype)
	}
	if g.Bits != 4 && g.Bits != 8 {
		return g, fmt.Errorf("bits %d is not supported (4 or 8)", g.Bits)
	}
	r := len(data.Shape)
	qa, ga, err := gatherBQAxes(n, g.BlockSize, r)
	if err != nil {
		return g, err
	}
	if qa != r-1 {
		return g, fmt.Errorf("quantize_axis %d is not data's last axis: uint8 data is quantized along its last axis", qa)
	}
	g.GatherAxis = int64(ga)
	g.Logical = append([]int64{}, data.Shape...)
	g.Logical[r-1] *= 8 / g.Bits
	g.Cols = g.Logical[r-1]
	g.Rows = numel(data.Shape[:r-1])
	g.KBlocks = (g.Cols + g.BlockSize - 1) / g.BlockSize
	want := append([]int64{}, g.Logical...)
	want[r-1] = g.KBlocks
	if s.Dtype != graph.Float && s.Dtype != graph.Float16 {
		return g, fmt.Errorf("input scales is %s; float and float16 are supported", s.Dtype)
	}
	if !ops.SameShape(s.Shape, want) {
		return g, fmt.Errorf("input scales has the shape %v; data of %v codes in blocks of %d needs %v", s.Shape, g.Logical, g.BlockSize, want)
	}
	g.ZPBytes = (g.KBlocks*g.Bits + 7) / 8
	if zp.Present {
		want[r-1] = g.ZPBytes
		if zp.Dtype != graph.Uint8 || !ops.SameShape(zp.Shape, want) {
			return g, fmt.Errorf("input zero_points is %s%v; it must be uint8%v (packed as data)", zp.Dtype, zp.Shape, want)
		}
		g.HasZP = true
	}
	if idx.Dtype != graph.Int64 && idx.Dtype != graph.Int32 {
		return g, fmt.Errorf("input indices is %s; it must be int32 or int64", idx.Dtype)
	}
	g.Out = append(append(append([]int64{}, g.Logical[:ga]...), idx.Shape...), g.Logical[ga+1:]...)
	g.OutType = s.Dtype
	return g, nil
}

// checkGatherBQNarrow checks GatherBlockQuantized over int4 or uint4 data: scales (and zero
// points, of data's type) of data's shape but along quantize_axis, where they have one element
// a block.
func checkGatherBQNarrow(n *graph.Node, data, idx, s, zp Operand) (GatherBQ, error) {
	g := GatherBQ{Bits: 4, BlockSize: n.AttrInt("block_size", 128), Narrow: true}
	qa, ga, err := gatherBQAxes(n, g.BlockSize, len(data.Shape))
	if err != nil {
		return g, err
	}
	g.QuantAxis, g.GatherAxis = int64(qa), int64(ga)
	g.Logical = append([]int64{}, data.Shape...)
	g.KBlocks = (g.Logical[qa] + g.BlockSize - 1) / g.BlockSize
	want := append([]int64{}, g.Logical...)
	want[qa] = g.KBlocks
	if s.Dtype != graph.Float && s.Dtype != graph.Float16 {
		return g, fmt.Errorf("input scales is %s; float and float16 are supported", s.Dtype)
	}
	if !ops.SameShape(s.Shape, want) {
		return g, fmt.Errorf("input scales has the shape %v; data of %v quantized along axis %d in blocks of %d needs %v", s.Shape, g.Logical, qa, g.BlockSize, want)
	}
	if zp.Present {
		if zp.Dtype != data.Dtype || !ops.SameShape(zp.Shape, want) {
			return g, fmt.Errorf("input zero_points is %s%v; it must be %s%v (data's type, the scales' shape)", zp.Dtype, zp.Shape, data.Dtype, want)
		}
		g.HasZP = true
	}
	if idx.Dtype != graph.Int64 && idx.Dtype != graph.Int32 {
		return g, fmt.Errorf("input indices is %s; it must be int32 or int64", idx.Dtype)
	}
	g.Out = append(append(append([]int64{}, g.Logical[:ga]...), idx.Shape...), g.Logical[ga+1:]...)
	g.OutType = s.Dtype
	return g, nil
}

// GatherBlockQuantizedHost is com.microsoft GatherBlockQuantized: Gather along gather_axis,
// then (code - zero point)·scale per block; uint8 data holds packed codes quantized along its
// last axis, int4 and uint4 data one code an element, quantized along quantize_axis.
func GatherBlockQuantizedHost(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	g, err := CheckGatherBlockQuantized(n, OperandsOf(in))
	if err != nil {
		return nil, err
	}
	if err := ops.ReserveShape(rc, "the output", g.OutType, g.Out, 0); err != nil {
		return nil, err
	}
	if g.Narrow {
		return gatherBQNarrow(g, in)
	}
	ga := int(g.GatherAxis)
	dim := g.Logical[ga]
	inner := numel(g.Logical[ga+1:])
	outer := numel(g.Logical[:ga])
	ids, err := gatherIndices(in[1], dim, ga)
	if err != nil {
		return nil, err
	}
	data := in[0].Data().([]uint8)
	sc := tensor.Float64s(in[2])
	var zp []uint8
	if z := ops.Optional(in, 3); z.IsValid() {
		zp = z.Data().([]uint8)
	}
	rowBytes := int64(len(data)) / max(g.Rows, 1)
	mid := float64(int64(1) << (g.Bits - 1))
	y := make([]float64, 0, numel(g.Out))
	for o := int64(0); o < outer; o++ {
		for _, v := range ids {
			if v < 0 {
				v += dim
			}
			for t := int64(0); t < inner; t++ {
				flat := (o*dim+v)*inner + t // in codes of the logical shape
				row, col := flat/g.Cols, flat%g.Cols
				q := col / g.BlockSize
				z := mid
				if zp != nil {
					z = code(zp[row*g.ZPBytes:(row+1)*g.ZPBytes], q, g.Bits)
				}
				c := code(data[row*rowBytes:(row+1)*rowBytes], col, g.Bits)
				y = append(y, (c-z)*sc[row*g.KBlocks+q])
			}
		}
	}
	return ops.FloatResult(g.OutType, g.Out, y)
}

// gatherBQNarrow is GatherBlockQuantizedHost for int4 and uint4 data.
func gatherBQNarrow(g GatherBQ, in []tensor.Tensor) ([]tensor.Tensor, error) {
	ga, qa := int(g.GatherAxis), int(g.QuantAxis)
	dim := g.Logical[ga]
	inner, outer := numel(g.Logical[ga+1:]), numel(g.Logical[:ga])
	ids, err := gatherIndices(in[1], dim, ga)
	if err != nil {
		return nil, err
	}
	data, sc := tensor.Float64s(in[0]), tensor.Float64s(in[2])
	var zp []float64
	if z := ops.Optional(in, 3); z.IsValid() {
		zp = tensor.Float64s(z)
	}
	qInner, qDim := numel(g.Logical[qa+1:]), g.Logical[qa]
	y := make([]float64, 0, numel(g.Out))
	for o := int64(0); o < outer; o++ {
		for _, v := range ids {
			if v < 0 {
				v += dim
			}
			for t := int64(0); t < inner; t++ {
				flat := (o*dim+v)*inner + t
				pos := (flat / qInner) % qDim
				p := (flat/(qInner*qDim)*g.KBlocks+pos/g.BlockSize)*qInner + flat%qInner
				z := 0.0
				if zp != nil {
					z = zp[p]
				}
				y = append(y, (data[flat]-z)*sc[p])
			}
		}
	}
	return ops.FloatResult(g.OutType, g.Out, y)
}

// gatherIndices reads GatherBlockQuantized's indices, each in [-dim, dim) (data's axis ga).
func gatherIndices(t tensor.Tensor, dim int64, ga int) ([]int64, error) {
	ids := tensor.Int64s(t)
	for _, v := range ids {
		if v < -dim || v >= dim {
			return nil, tensor.NewError("Run", tensor.ErrInvalidArgument, "input indices holds %d, outside [%d, %d) (data's axis %d)", v, -dim, dim, ga)
		}
	}
	return ids, nil
}

// gatherBQAxes checks GatherBlockQuantized's block_size and data's rank r, and returns its
// quantize_axis and gather_axis, made non-negative.
func gatherBQAxes(n *graph.Node, block int64, r int) (qa, ga int, err error) {
	if block < 16 || block&(block-1) != 0 {
		return 0, 0, fmt.Errorf("block_size %d must be a power of two, at least 16", block)
	}
	if r < 1 {
		return 0, 0, fmt.Errorf("input data is a scalar")
	}
	if qa, err = ops.NormAxis(n.AttrInt("quantize_axis", 1), r); err != nil {
		return 0, 0, fmt.Errorf("quantize_axis: %v", err)
	}
	if ga, err = ops.NormAxis(n.AttrInt("gather_axis", 0), r); err != nil {
		return 0, 0, fmt.Errorf("gather_axis: %v", err)
	}
	return qa, ga, nil
}
