package arith

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Elementwise host functions compute in float64 and convert back to the operand type, which is
// exact for float32, float16, bfloat16 and integers up to 2^53.

func unaryOp(mk func(n *graph.Node) func(float64) float64) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		if x.DType() == graph.String {
			return nil, fmt.Errorf("string input not supported")
		}
		f := mk(n)
		v := tensor.Float64s(x)
		for i := range v {
			v[i] = f(v[i])
		}
		out, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
		return []tensor.Tensor{out}, err
	}
}

func simple(f func(float64) float64) func(*graph.Node) func(float64) float64 {
	return func(*graph.Node) func(float64) float64 { return f }
}

func boolUnary(f func(float64, *graph.Node) bool) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		v := tensor.Float64s(in[0])
		out := make([]bool, len(v))
		for i, x := range v {
			out[i] = f(x, n)
		}
		return []tensor.Tensor{tensor.Raw(graph.Bool, append([]int64{}, in[0].Dims()...), out)}, nil
	}
}

// binaryOp broadcasts two operands and applies f; outType picks the result type from the
// operand type (nil: the same).
func binaryOp(f func(a, b float64, dt tensor.DType, n *graph.Node) float64, outType tensor.DType) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if err := reserveBroadcast(rc, outType, in...); err != nil {
			return nil, err
		}
		out, err := broadcastApply(in[0], in[1], n, f, outType)
		return []tensor.Tensor{out}, err
	}
}

// reserveBroadcast reserves, before a broadcasting host function allocates them, the bytes of
// its output (of type out, or the first input's when Undefined) and of what it builds beside
// each element: an index an operand and a float64 value.
func reserveBroadcast(rc ops.OpRun, out tensor.DType, in ...tensor.Tensor) error {
	var shape []int64
	for i, t := range in {
		if !t.IsValid() {
			return nil // the function reports it
		}
		if i == 0 {
			shape = t.Dims()
			continue
		}
		s, err := ops.BroadcastShapes(shape, t.Dims())
		if err != nil {
			return nil // the function reports it
		}
		shape = s
	}
	if out == graph.Undefined && len(in) > 0 {
		out = in[len(in)-1].DType()
	}
	return ops.ReserveShape(rc, "the output", out, shape, len(in)*8+8)
}

func broadcastApply(a, b tensor.Tensor, n *graph.Node, f func(a, b float64, dt tensor.DType, n *graph.Node) float64, outType tensor.DType) (tensor.Tensor, error) {
	if !a.IsValid() || !b.IsValid() {
		return tensor.Tensor{}, fmt.Errorf("missing operand")
	}
	if a.DType() == graph.String || b.DType() == graph.String {
		if outType == graph.Bool && a.DType() == b.DType() {
			return stringEqual(a, b)
		}
		return tensor.Tensor{}, fmt.Errorf("string operands not supported")
	}
	shape, err := ops.BroadcastShapes(a.Dims(), b.Dims())
	if err != nil {
		return tensor.Tensor{}, err
	}
	ia, err := ops.BroadcastIndex(a.Dims(), shape)
	if err != nil {
		return tensor.Tensor{}, err
	}
	ib, err := ops.BroadcastIndex(b.Dims(), shape)
	if err != nil {
		return tensor.Tensor{}, err
	}
	av, bv := tensor.Float64s(a), tensor.Float64s(b)
	if a.DType() == graph.Int64 && b.DType() == graph.Int64 && outType == graph.Undefined {
		return int64Binary(a, b, shape, ia, ib, n, f)
	}
	out := make([]float64, len(ia))
	for i := range out {
		out[i] = f(av[ia[i]], bv[ib[i]], a.DType(), n)
	}
	dt := outType
	if dt == graph.Undefined {
		dt = a.DType()
	}
	return tensor.FromFloat64s(dt, shape, out)
}

// int64Binary keeps int64 arithmetic exact beyond 2^53 for the common integer ops.
func int64Binary(a, b tensor.Tensor, shape []int64, ia, ib []int, n *graph.Node, f func(a, b float64, dt tensor.DType, n *graph.Node) float64) (tensor.Tensor, error) {
	av, bv := a.Data().([]int64), b.Data().([]int64)
	out := make([]int64, len(ia))
	for i := range out {
		x, y := av[ia[i]], bv[ib[i]]
		switch n.OpType {
		case "Add", "Sum":
			out[i] = x + y
		case "Sub":
			out[i] = x - y
		case "Mul":
			out[i] = x * y
		case "Div":
			if y == 0 {
				return tensor.Tensor{}, fmt.Errorf("integer division by zero")
			}
			out[i] = x / y
		case "Max":
			out[i] = max(x, y)
		case "Min":
			out[i] = min(x, y)
		default:
			out[i] = int64(f(float64(x), float64(y), graph.Int64, n))
		}
	}
	return tensor.Raw(graph.Int64, shape, out), nil
}

func stringEqual(a, b tensor.Tensor) (tensor.Tensor, error) {
	shape, err := ops.BroadcastShapes(a.Dims(), b.Dims())
	if err != nil {
		return tensor.Tensor{}, err
	}
	ia, _ := ops.BroadcastIndex(a.Dims(), shape)
	ib, _ := ops.BroadcastIndex(b.Dims(), shape)
	av, bv := a.Data().([]string), b.Data().([]string)
	out := make([]bool, len(ia))
	for i := range out {
		out[i] = av[ia[i]] == bv[ib[i]]
	}
	return tensor.Raw(graph.Bool, shape, out), nil
}

func isInt(dt tensor.DType) bool { return dt.IsInteger() }

func variadic(op string) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if len(in) == 0 {
			return nil, fmt.Errorf("no inputs")
		}
		acc := in[0]
		f := map[string]func(a, b float64, dt tensor.DType, n *graph.Node) float64{
			"Sum":  func(a, b float64, _ tensor.DType, _ *graph.Node) float64 { return a + b },
			"Mean": func(a, b float64, _ tensor.DType, _ *graph.Node) float64 { return a + b },
			"Max": func(a, b float64, _ tensor.DType, _ *graph.Node) float64 {
				if math.IsNaN(a) || math.IsNaN(b) {
					return math.NaN()
				}
				return math.Max(a, b)
			},
			"Min": func(a, b float64, _ tensor.DType, _ *graph.Node) float64 {
				if math.IsNaN(a) || math.IsNaN(b) {
					return math.NaN()
				}
				return math.Min(a, b)
			},
		}[op]
		if len(in) == 1 {
			acc = tensor.Take(acc, acc.Dims(), ops.IdentityIndex(acc.Len()))
		}
		var err error
		for _, t := range in[1:] {
			if acc, err = broadcastApply(acc, t, n, f, graph.Undefined); err != nil {
				return nil, err
			}
		}
		if op == "Mean" {
			v := tensor.Float64s(acc)
			for i := range v {
				v[i] /= float64(len(in))
			}
			acc, err = tensor.FromFloat64s(acc.DType(), acc.Dims(), v)
		}
		return []tensor.Tensor{acc}, err
	}
}

func init() {
	u := map[string]func(float64) float64{
		"Abs": math.Abs, "Neg": func(x float64) float64 { return -x }, "Exp": math.Exp, "Log": math.Log,
		"Sqrt": math.Sqrt, "Reciprocal": func(x float64) float64 { return 1 / x }, "Floor": math.Floor,
		"Ceil": math.Ceil, "Round": math.RoundToEven, "Sin": math.Sin, "Cos": math.Cos, "Tan": math.Tan,
		"Asin": math.Asin, "Acos": math.Acos, "Atan": math.Atan, "Sinh": math.Sinh, "Cosh": math.Cosh,
		"Asinh": math.Asinh, "Acosh": math.Acosh, "Atanh": math.Atanh, "Erf": math.Erf, "Identity": nil,
		"Relu": func(x float64) float64 { return math.Max(x, 0) }, "Tanh": math.Tanh,
		"Sigmoid":  func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
		"Softplus": func(x float64) float64 { return math.Log1p(math.Exp(x)) },
		"Softsign": func(x float64) float64 { return x / (1 + math.Abs(x)) },
		"Sign": func(x float64) float64 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return 0
		},
		"Mish": func(x float64) float64 { return x * math.Tanh(math.Log1p(math.Exp(x))) },
	}
	for op, f := range u {
		if f != nil {
			ops.HostOps[op] = unaryOp(simple(f))
		}
	}
	ops.HostOps["Not"] = unaryOp(simple(func(x float64) float64 { return ops.B2F(x == 0) }))
	ops.HostOps["LeakyRelu"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		a := float64(n.AttrFloat("alpha", 0.01))
		return func(x float64) float64 { return ops.MathSelect(x < 0, a*x, x) }
	})
	ops.HostOps["Elu"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		a := float64(n.AttrFloat("alpha", 1))
		return func(x float64) float64 { return ops.MathSelect(x < 0, a*(math.Exp(x)-1), x) }
	})
	ops.HostOps["Celu"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		a := float64(n.AttrFloat("alpha", 1))
		return func(x float64) float64 { return math.Max(0, x) + math.Min(0, a*(math.Exp(x/a)-1)) }
	})
	ops.HostOps["Selu"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		a, g := float64(n.AttrFloat("alpha", 1.67326319217681884765625)), float64(n.AttrFloat("gamma", 1.05070102214813232421875))
		return func(x float64) float64 { return g * ops.MathSelect(x <= 0, a*(math.Exp(x)-1), x) }
	})
	ops.HostOps["HardSigmoid"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		a, b := float64(n.AttrFloat("alpha", 0.2)), float64(n.AttrFloat("beta", 0.5))
		return func(x float64) float64 { return math.Max(0, math.Min(1, a*x+b)) }
	})
	ops.HostOps["HardSwish"] = unaryOp(simple(func(x float64) float64 { return x * math.Max(0, math.Min(1, x/6+0.5)) }))
	ops.HostOps["ThresholdedRelu"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		a := float64(n.AttrFloat("alpha", 1))
		return func(x float64) float64 { return ops.MathSelect(x > a, x, 0) }
	})
	ops.HostOps["Shrink"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		l, b := float64(n.AttrFloat("lambd", 0.5)), float64(n.AttrFloat("bias", 0))
		return func(x float64) float64 {
			switch {
			case x < -l:
				return x + b
			case x > l:
				return x - b
			}
			return 0
		}
	})
	ops.HostOps["IsNaN"] = boolUnary(func(x float64, _ *graph.Node) bool { return math.IsNaN(x) })
	ops.HostOps["IsInf"] = boolUnary(func(x float64, n *graph.Node) bool {
		return (math.IsInf(x, 1) && n.AttrInt("detect_positive", 1) != 0) || (math.IsInf(x, -1) && n.AttrInt("detect_negative", 1) != 0)
	})

	arith := func(f func(a, b float64, dt tensor.DType) float64) ops.OpFunc {
		return binaryOp(func(a, b float64, dt tensor.DType, _ *graph.Node) float64 { return f(a, b, dt) }, graph.Undefined)
	}
	ops.HostOps["Add"] = arith(func(a, b float64, _ tensor.DType) float64 { return a + b })
	ops.HostOps["Sub"] = arith(func(a, b float64, _ tensor.DType) float64 { return a - b })
	ops.HostOps["Mul"] = arith(func(a, b float64, _ tensor.DType) float64 { return a * b })
	ops.HostOps["Div"] = arith(func(a, b float64, dt tensor.DType) float64 {
		if isInt(dt) {
			if b == 0 {
				return 0
			}
			return math.Trunc(a / b)
		}
		return a / b
	})
	ops.HostOps["Pow"] = binaryOp(func(a, b float64, _ tensor.DType, _ *graph.Node) float64 { return math.Pow(a, b) }, graph.Undefined)
	ops.HostOps["Mod"] = binaryOp(func(a, b float64, dt tensor.DType, n *graph.Node) float64 {
		if n.AttrInt("fmod", 0) != 0 || !isInt(dt) {
			return math.Mod(a, b)
		}
		if b == 0 {
			return 0
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m
	}, graph.Undefined)
	ops.HostOps["PRelu"] = arith(func(x, s float64, _ tensor.DType) float64 { return ops.MathSelect(x < 0, s*x, x) })
	cmp := func(f func(a, b float64) bool) ops.OpFunc {
		return binaryOp(func(a, b float64, _ tensor.DType, _ *graph.Node) float64 { return ops.B2F(f(a, b)) }, graph.Bool)
	}
	ops.HostOps["Equal"] = cmp(func(a, b float64) bool { return a == b })
	ops.HostOps["Less"] = cmp(func(a, b float64) bool { return a < b })
	ops.HostOps["LessOrEqual"] = cmp(func(a, b float64) bool { return a <= b })
	ops.HostOps["Greater"] = cmp(func(a, b float64) bool { return a > b })
	ops.HostOps["GreaterOrEqual"] = cmp(func(a, b float64) bool { return a >= b })
	ops.HostOps["And"] = cmp(func(a, b float64) bool { return a != 0 && b != 0 })
	ops.HostOps["Or"] = cmp(func(a, b float64) bool { return a != 0 || b != 0 })
	ops.HostOps["Xor"] = cmp(func(a, b float64) bool { return (a != 0) != (b != 0) })
	ops.HostOps["BitShift"] = binaryOp(func(a, b float64, _ tensor.DType, n *graph.Node) float64 {
		x, s := uint64(a), uint64(b)
		if n.AttrString("direction", "") == "LEFT" {
			return float64(x << s)
		}
		return float64(x >> s)
	}, graph.Undefined)
	bitwise := func(f func(a, b int64) int64) ops.OpFunc {
		return binaryOp(func(a, b float64, _ tensor.DType, _ *graph.Node) float64 { return float64(f(int64(a), int64(b))) }, graph.Undefined)
	}
	ops.HostOps["BitwiseAnd"] = bitwise(func(a, b int64) int64 { return a & b })
	ops.HostOps["BitwiseOr"] = bitwise(func(a, b int64) int64 { return a | b })
	ops.HostOps["BitwiseXor"] = bitwise(func(a, b int64) int64 { return a ^ b })
	ops.HostOps["BitwiseNot"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		v := tensor.Float64s(x)
		for i, e := range v {
			switch x.DType() {
			case graph.Uint8:
				v[i] = float64(^uint8(e))
			case graph.Uint16:
				v[i] = float64(^uint16(e))
			case graph.Uint32:
				v[i] = float64(^uint32(e))
			case graph.Uint64:
				v[i] = float64(^uint64(e))
			default:
				v[i] = float64(^int64(e))
			}
		}
		out, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
		return []tensor.Tensor{out}, err
	}
	for _, op := range []string{"Sum", "Mean", "Max", "Min"} {
		ops.HostOps[op] = variadic(op)
	}
	ops.HostOps["Clip"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		lo, hi := math.Inf(-1), math.Inf(1)
		if rc.OpsetVersion() < 11 {
			lo, hi = float64(n.AttrFloat("min", float32(math.Inf(-1)))), float64(n.AttrFloat("max", float32(math.Inf(1))))
		} else {
			var err error
			if len(in) > 1 && in[1].IsValid() {
				if lo, err = ops.OneFloat(in, 1, "min (input 1)"); err != nil {
					return nil, err
				}
			}
			if len(in) > 2 && in[2].IsValid() {
				if hi, err = ops.OneFloat(in, 2, "max (input 2)"); err != nil {
					return nil, err
				}
			}
		}
		return unaryOp(simple(func(x float64) float64 { return math.Min(math.Max(x, lo), hi) }))(rc, n, in[:1])
	}
	ops.HostOps["Where"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		c, x, y := in[0], in[1], in[2]
		if err := reserveBroadcast(rc, x.DType(), c, x, y); err != nil {
			return nil, err
		}
		s1, err := ops.BroadcastShapes(c.Dims(), x.Dims())
		if err != nil {
			return nil, err
		}
		shape, err := ops.BroadcastShapes(s1, y.Dims())
		if err != nil {
			return nil, err
		}
		ic, _ := ops.BroadcastIndex(c.Dims(), shape)
		ix, _ := ops.BroadcastIndex(x.Dims(), shape)
		iy, _ := ops.BroadcastIndex(y.Dims(), shape)
		cv := tensor.Float64s(c)
		// Concatenate x and y and pick from the joined tensor: one typed gather for any type.
		joined, err := ops.ConcatFlat(x, y)
		if err != nil {
			return nil, err
		}
		idx := make([]int, len(ic))
		for i := range idx {
			if cv[ic[i]] != 0 {
				idx[i] = ix[i]
			} else {
				idx[i] = x.Len() + iy[i]
			}
		}
		return []tensor.Tensor{tensor.Take(joined, shape, idx)}, nil
	}
}
