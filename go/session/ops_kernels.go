package session

import (
	"math"

	"github.com/loomrt/loom/go/graph"
)

// The ops below run a Loom kernel (go/session/opkernels) on float32 tensors in the shapes the
// kernel covers, and the Go host function otherwise.

func init() {
	for op, code := range map[string]string{"Add": "0", "Sub": "1", "Mul": "2", "Div": "3"} {
		op, code := op, code
		kernelOps[op] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			if out, ok, err := rc.binaryKernel(code, in[0], in[1]); ok || err != nil {
				return []Tensor{out}, err
			}
			return hostOps[op](rc, n, in)
		}
	}
	unary := map[string]string{"Relu": "0", "Sigmoid": "1", "Tanh": "2", "Exp": "3", "Log": "4", "Sqrt": "5",
		"Abs": "6", "Neg": "7", "Floor": "8", "Ceil": "9", "Sin": "10", "Cos": "11", "LeakyRelu": "12", "Reciprocal": "13"}
	for op, code := range unary {
		op, code := op, code
		kernelOps[op] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			if in[0].dtype == graph.Float && in[0].Len() > 0 {
				out, err := rc.unaryKernel(code, in[0], n.AttrFloat("alpha", 0.01))
				return []Tensor{out}, err
			}
			return hostOps[op](rc, n, in)
		}
	}
	kernelOps["MatMul"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		a, b := in[0], in[1]
		if a.dtype == graph.Float && b.dtype == graph.Float && len(a.shape) == 2 && len(b.shape) == 2 && a.shape[1] == b.shape[0] {
			m, k, nn := int(a.shape[0]), int(a.shape[1]), int(b.shape[1])
			out, err := rc.gemmKernel(a, b, Tensor{}, m, k, nn, [2]int{k, 1}, [2]int{nn, 1}, [2]int{}, 1, 0)
			return []Tensor{out}, err
		}
		return hostOps["MatMul"](rc, n, in)
	}
	kernelOps["Gemm"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		a, b, c := in[0], in[1], optional(in, 2)
		if a.dtype != graph.Float || len(a.shape) != 2 || len(b.shape) != 2 || (c.IsValid() && len(c.shape) > 2) {
			return hostOps["Gemm"](rc, n, in)
		}
		ta, tb := n.AttrInt("transA", 0) != 0, n.AttrInt("transB", 0) != 0
		m, k, as := int(a.shape[0]), int(a.shape[1]), [2]int{int(a.shape[1]), 1}
		if ta {
			m, k, as = k, m, [2]int{1, int(a.shape[1])}
		}
		kb, nn, bs := int(b.shape[0]), int(b.shape[1]), [2]int{int(b.shape[1]), 1}
		if tb {
			kb, nn, bs = nn, kb, [2]int{1, int(b.shape[1])}
		}
		if kb != k {
			return nil, opErr("inner dimensions differ: A gives %d, B gives %d", k, kb)
		}
		var cs [2]int
		beta := n.AttrFloat("beta", 1)
		if c.IsValid() {
			st, err := broadcastStrides(c.shape, []int64{int64(m), int64(nn)})
			if err != nil {
				return nil, err
			}
			cs = [2]int{st[0], st[1]}
		} else {
			beta = 0
		}
		out, err := rc.gemmKernel(a, b, c, m, k, nn, as, bs, cs, n.AttrFloat("alpha", 1), beta)
		return []Tensor{out}, err
	}
	kernelOps["Conv"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		if x.dtype == graph.Float && len(x.shape) == 4 {
			p, err := convParamsOf(n, x.shape, in[1].shape)
			if err == nil {
				out, err := rc.convKernel(x, in[1], optional(in, 2), p)
				return []Tensor{out}, err
			}
		}
		return hostOps["Conv"](rc, n, in)
	}
	for op, isMax := range map[string]bool{"MaxPool": true, "AveragePool": false} {
		op, isMax := op, isMax
		kernelOps[op] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			x := in[0]
			if x.dtype == graph.Float && len(x.shape) == 4 && len(n.Outputs) == 1 && n.AttrInt("storage_order", 0) == 0 {
				p, err := poolParamsOf(n, x.shape)
				if err == nil {
					out, err := rc.poolKernel(x, p, isMax, n.AttrInt("count_include_pad", 0) != 0)
					return []Tensor{out}, err
				}
			}
			return hostOps[op](rc, n, in)
		}
	}
	for op, log := range map[string]string{"Softmax": "false", "LogSoftmax": "true"} {
		op, log := op, log
		kernelOps[op] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			x := in[0]
			r := len(x.shape)
			axis := int(n.AttrInt("axis", softmaxDefaultAxis(rc.opset)))
			if axis < 0 {
				axis += r
			}
			if x.dtype == graph.Float && x.Len() > 0 && axis >= 0 && axis < max(r, 1) && (rc.opset < 13 || axis == r-1) {
				rows, cols := 1, 1
				for i, d := range x.shape {
					if i < axis {
						rows *= int(d)
					} else {
						cols *= int(d)
					}
				}
				out, err := rc.softmaxKernel(x, rows, cols, log)
				return []Tensor{out}, err
			}
			return hostOps[op](rc, n, in)
		}
	}
}

func softmaxDefaultAxis(opset int64) int64 {
	if opset < 13 {
		return 1
	}
	return -1
}

// binaryKernel runs the binary kernel when both operands are float32, of rank at most 4, and
// broadcast together; ok is false when the kernel does not cover the case.
func (rc *runCtx) binaryKernel(code string, a, b Tensor) (Tensor, bool, error) {
	if a.dtype != graph.Float || b.dtype != graph.Float || len(a.shape) > 4 || len(b.shape) > 4 {
		return Tensor{}, false, nil
	}
	shape, err := broadcastShapes(a.shape, b.shape)
	if err != nil {
		return Tensor{}, true, err
	}
	total, _ := elementCount(shape)
	if total == 0 {
		return Tensor{}, false, nil
	}
	out4 := pad4(shape)
	as, err := broadcastStrides(a.shape, shape)
	if err != nil {
		return Tensor{}, true, err
	}
	bs, _ := broadcastStrides(b.shape, shape)
	as4, bs4 := padStrides4(as), padStrides4(bs)
	ms, k, err := rc.compile("elementwise.loom", "binary", map[string]string{"OP": code})
	if err != nil {
		return Tensor{}, true, err
	}
	x, err := rc.uploadF32(a.data.([]float32))
	if err != nil {
		return Tensor{}, true, err
	}
	y, err := rc.uploadF32(b.data.([]float32))
	if err != nil {
		return Tensor{}, true, err
	}
	z, err := rc.allocF32(int(total))
	if err != nil {
		return Tensor{}, true, err
	}
	_ = ms
	args := []uint64{u(out4[0]), u(out4[1]), u(out4[2]), u(out4[3]), u(as4[0]), u(as4[1]), u(as4[2]), u(as4[3]), u(bs4[0]), u(bs4[1]), u(bs4[2]), u(bs4[3])}
	if err := rc.run([]Command{Dispatch{Kernel: k, Args: args, Workload: args[:4], Bindings: []Binding{x.Read(), y.Read(), z.Write()}}}); err != nil {
		return Tensor{}, true, err
	}
	v, err := rc.readF32(z, int(total))
	return Tensor{dtype: graph.Float, shape: shape, data: v}, true, err
}

func (rc *runCtx) unaryKernel(code string, a Tensor, alpha float32) (Tensor, error) {
	_, k, err := rc.compile("elementwise.loom", "unary", map[string]string{"OP": code})
	if err != nil {
		return Tensor{}, err
	}
	x, err := rc.uploadF32(a.data.([]float32))
	if err != nil {
		return Tensor{}, err
	}
	y, err := rc.allocF32(a.Len())
	if err != nil {
		return Tensor{}, err
	}
	n := uint64(a.Len())
	if err := rc.run([]Command{Dispatch{Kernel: k, Args: []uint64{uint64(math.Float32bits(alpha)), n}, Workload: []uint64{n},
		Bindings: []Binding{x.Read(), y.Write()}}}); err != nil {
		return Tensor{}, err
	}
	v, err := rc.readF32(y, a.Len())
	return Tensor{dtype: graph.Float, shape: append([]int64{}, a.shape...), data: v}, err
}

func (rc *runCtx) gemmKernel(a, b, c Tensor, m, k, n int, as, bs, cs [2]int, alpha, beta float32) (Tensor, error) {
	if m*n == 0 {
		return Zeros(graph.Float, []int64{int64(m), int64(n)})
	}
	_, kid, err := rc.compile("linalg.loom", "gemm", nil)
	if err != nil {
		return Tensor{}, err
	}
	A, err := rc.uploadF32(a.data.([]float32))
	if err != nil {
		return Tensor{}, err
	}
	B, err := rc.uploadF32(b.data.([]float32))
	if err != nil {
		return Tensor{}, err
	}
	var cv []float32
	if c.IsValid() {
		cv = c.data.([]float32)
	}
	C, err := rc.uploadF32(cv)
	if err != nil {
		return Tensor{}, err
	}
	Y, err := rc.allocF32(m * n)
	if err != nil {
		return Tensor{}, err
	}
	args := []uint64{u(m), u(n), u(k), u(as[0]), u(as[1]), u(bs[0]), u(bs[1]), u(cs[0]), u(cs[1]),
		uint64(math.Float32bits(alpha)), uint64(math.Float32bits(beta))}
	if err := rc.run([]Command{Dispatch{Kernel: kid, Args: args, Workload: args[:2], Bindings: []Binding{A.Read(), B.Read(), C.Read(), Y.Write()}}}); err != nil {
		return Tensor{}, err
	}
	v, err := rc.readF32(Y, m*n)
	return Tensor{dtype: graph.Float, shape: []int64{int64(m), int64(n)}, data: v}, err
}

func (rc *runCtx) convKernel(x, w, b Tensor, p convParams) (Tensor, error) {
	if w.dtype != graph.Float {
		return Tensor{}, opErr("weight type %s differs from input type float", w.dtype)
	}
	nb, c, h, wd := int(x.shape[0]), int(x.shape[1]), int(x.shape[2]), int(x.shape[3])
	m := int(w.shape[0])
	oh, ow := p.out[0], p.out[1]
	outShape := []int64{int64(nb), int64(m), int64(oh), int64(ow)}
	if nb*m*oh*ow == 0 {
		return Zeros(graph.Float, outShape)
	}
	_, kid, err := rc.compile("linalg.loom", "conv2d", nil)
	if err != nil {
		return Tensor{}, err
	}
	bias := make([]float32, m)
	if b.IsValid() {
		bias = b.data.([]float32)
	}
	X, err := rc.uploadF32(x.data.([]float32))
	if err != nil {
		return Tensor{}, err
	}
	W, err := rc.uploadF32(w.data.([]float32))
	if err != nil {
		return Tensor{}, err
	}
	B, err := rc.uploadF32(bias)
	if err != nil {
		return Tensor{}, err
	}
	Y, err := rc.allocF32(nb * m * oh * ow)
	if err != nil {
		return Tensor{}, err
	}
	args := []uint64{u(nb), u(m), u(oh), u(ow), u(c), u(h), u(wd), u(p.kernel[0]), u(p.kernel[1]), u(p.group),
		u(p.strides[0]), u(p.strides[1]), u(p.padBegin[0]), u(p.padBegin[1]), u(p.dilations[0]), u(p.dilations[1])}
	if err := rc.run([]Command{Dispatch{Kernel: kid, Args: args, Workload: args[:4], Bindings: []Binding{X.Read(), W.Read(), B.Read(), Y.Write()}}}); err != nil {
		return Tensor{}, err
	}
	v, err := rc.readF32(Y, nb*m*oh*ow)
	return Tensor{dtype: graph.Float, shape: outShape, data: v}, err
}

func (rc *runCtx) poolKernel(x Tensor, p convParams, isMax, countPad bool) (Tensor, error) {
	nc, h, wd := int(x.shape[0]*x.shape[1]), int(x.shape[2]), int(x.shape[3])
	oh, ow := p.out[0], p.out[1]
	outShape := []int64{x.shape[0], x.shape[1], int64(oh), int64(ow)}
	if nc*oh*ow == 0 {
		return Zeros(graph.Float, outShape)
	}
	cfg := map[string]string{"MAX": "false", "COUNT_PAD": "false"}
	if isMax {
		cfg["MAX"] = "true"
	}
	if countPad {
		cfg["COUNT_PAD"] = "true"
	}
	_, kid, err := rc.compile("linalg.loom", "pool2d", cfg)
	if err != nil {
		return Tensor{}, err
	}
	X, err := rc.uploadF32(x.data.([]float32))
	if err != nil {
		return Tensor{}, err
	}
	Y, err := rc.allocF32(nc * oh * ow)
	if err != nil {
		return Tensor{}, err
	}
	args := []uint64{u(nc), u(oh), u(ow), u(h), u(wd), u(p.kernel[0]), u(p.kernel[1]), u(p.strides[0]), u(p.strides[1]),
		u(p.padBegin[0]), u(p.padBegin[1]), u(p.dilations[0]), u(p.dilations[1])}
	if err := rc.run([]Command{Dispatch{Kernel: kid, Args: args, Workload: args[:3], Bindings: []Binding{X.Read(), Y.Write()}}}); err != nil {
		return Tensor{}, err
	}
	v, err := rc.readF32(Y, nc*oh*ow)
	return Tensor{dtype: graph.Float, shape: outShape, data: v}, err
}

func (rc *runCtx) softmaxKernel(x Tensor, rows, cols int, log string) (Tensor, error) {
	_, kid, err := rc.compile("linalg.loom", "softmax", map[string]string{"LOG": log})
	if err != nil {
		return Tensor{}, err
	}
	X, err := rc.uploadF32(x.data.([]float32))
	if err != nil {
		return Tensor{}, err
	}
	Y, err := rc.allocF32(rows * cols)
	if err != nil {
		return Tensor{}, err
	}
	args := []uint64{u(rows), u(cols)}
	if err := rc.run([]Command{Dispatch{Kernel: kid, Args: args, Workload: args, Bindings: []Binding{X.Read(), Y.Write()}}}); err != nil {
		return Tensor{}, err
	}
	v, err := rc.readF32(Y, rows*cols)
	return Tensor{dtype: graph.Float, shape: append([]int64{}, x.shape...), data: v}, err
}

func u(v int) uint64 { return uint64(v) }

func pad4(s []int64) [4]int {
	var out [4]int
	for i := range out {
		out[i] = 1
	}
	for i, d := range s {
		out[4-len(s)+i] = int(d)
	}
	return out
}

func padStrides4(s []int) [4]int {
	var out [4]int
	for i, d := range s {
		out[4-len(s)+i] = d
	}
	return out
}
