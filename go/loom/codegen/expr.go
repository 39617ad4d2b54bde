package codegen

import (
	"fmt"
	"strings"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/types"
)

var cOps = map[int]string{
	ir.BinAdd: "+", ir.BinSub: "-", ir.BinMul: "*", ir.BinDiv: "/", ir.BinRem: "%",
	ir.BinAnd: "&", ir.BinOr: "|", ir.BinXor: "^",
	ir.CmpEq: "==", ir.CmpNe: "!=", ir.CmpLt: "<", ir.CmpLe: "<=", ir.CmpGt: ">", ir.CmpGe: ">=",
}

var mathFns = map[int]string{
	ir.UnSqrt: "sqrt", ir.UnExp: "exp", ir.UnLog: "log", ir.UnTanh: "tanh", ir.UnSin: "sin",
	ir.UnCos: "cos", ir.UnFloor: "floor", ir.UnCeil: "ceil", ir.UnAbs: "fabs",
}

// expr renders a pure op as a C expression.
func (e *emitter) expr(op *ir.Op) string {
	rt := op.Result.Type
	if vt, ok := rt.(*types.Vector); ok && op.Code != ir.OpReduce {
		return e.vexpr(op, vt)
	}
	b, _ := rt.(*types.Basic)
	args := make([]string, len(op.Args))
	for i, a := range op.Args {
		args[i] = e.val(a)
	}
	switch op.Code {
	case ir.OpBinary:
		return e.scalarBinary(op.Sub, args[0], args[1], b, op.Args[1])
	case ir.OpCmp:
		return "(" + args[0] + " " + cOps[op.Sub] + " " + args[1] + ")"
	case ir.OpUnary:
		return e.scalarUnary(op.Sub, args[0], b)
	case ir.OpCast:
		return e.convert(args[0], op.Args[0].Basic(), b)
	case ir.OpSelect:
		return "(" + args[0] + " ? " + args[1] + " : " + args[2] + ")"
	case ir.OpFma:
		fn := "fmaf"
		if b.Kind() == types.F64 {
			fn = "fma"
		}
		return round(fn+"("+strings.Join(args, ", ")+")", b)
	case ir.OpReduce:
		vt := op.Args[0].Type.(*types.Vector)
		return e.reduce(op.Sub, args[0], vt)
	case ir.OpInf:
		return e.floatLit(posInf, b)
	case ir.OpThreadID:
		return e.tid[op.Int]
	case ir.OpBlockID:
		if e.lang.Host {
			return fmt.Sprintf("((loom_i64)args->block_id[%d])", op.Int)
		}
		return fmt.Sprintf("((loom_i64)blockIdx.%c)", "xyz"[op.Int])
	case ir.OpBufLen:
		return "n" + strings.TrimPrefix(args[0], "b")
	case ir.OpConst:
		return e.val(op.Result)
	}
	e.err = fmt.Errorf("codegen: cannot render %s", op.Name())
	return "0"
}

var posInf = func() float64 { var z float64; return 1 / z }()

func (e *emitter) wrap(x string, b *types.Basic) string {
	if b.IsBool() {
		return "(" + x + ")"
	}
	return "((" + cType(b) + ")(" + x + "))"
}

// hostExpf is the host's float exp: branch-free C that a compiler vectorizes in any loop of it,
// with or without glibc's libmvec (ahead-of-time kernels link none, and called libm's scalar
// expf per element: softmax rows, GELU, sigmoid and swish epilogues). exp(x) = 2^n·e^r, n =
// round(x·log2 e) by adding 1.5·2^23, r = x - n·ln 2 with ln 2 in two parts (Cephes), e^r by
// Cephes' degree-5 polynomial; 2^n as two halves' exponent bits so that n from -150 to 128
// stays in range (results below 2^-126 come out subnormal, below about 2^-150 zero; above
// 88.73 infinite). x is clamped to [-104, 89] first; NaN stays NaN. Within 2 ulps of the
// correctly rounded result (TestHostMathFunctions).
const hostExpf = `static LOOM_INLINE float loom_expf(float x) {
  float c = x < -104.0f ? -104.0f : x;
  c = c > 89.0f ? 89.0f : c;
  const float big = 12582912.0f;
  const float t = c * 1.44269504088896341f + big;
  const float n = t - big;
  float r = c - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  loom_i32 ti;
  __builtin_memcpy(&ti, &t, 4);
  const loom_i32 ni = ti - 0x4B400000;
  const loom_i32 n1 = ni >> 1, n2 = ni - n1;
  const loom_u32 e1 = (loom_u32)(n1 + 127) << 23, e2 = (loom_u32)(n2 + 127) << 23;
  float s1, s2;
  __builtin_memcpy(&s1, &e1, 4);
  __builtin_memcpy(&s2, &e2, 4);
  return y * s1 * s2;
}
`

// hostTanhf is the host's float tanh, branch-free like loom_expf (which it uses): Cephes'
// odd polynomial x + x³·P(x²) for |x| < 0.625, 1 - 2/(exp(2|x|) + 1) with x's sign beyond
// (1 from |x| of about 9 on; NaN stays NaN). Within 4 ulps (TestHostMathFunctions).
const hostTanhf = `static LOOM_INLINE float loom_tanhf(float x) {
  const float a = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (loom_expf(a + a) + 1.0f);
  const float signed_big = x < 0.0f ? -big : big;
  return a < 0.625f ? small : signed_big;
}
`

// scalarBinary renders x op y with Loom semantics (wrapping, total division, masked shifts).
func (e *emitter) scalarBinary(sub int, x, y string, b *types.Basic, yv *ir.Value) string {
	if b.IsFloat() {
		switch sub {
		case ir.BinMin:
			return "(" + y + " < " + x + " ? " + y + " : " + x + ")"
		case ir.BinMax:
			return "(" + y + " > " + x + " ? " + y + " : " + x + ")"
		}
		return round("("+x+" "+cOps[sub]+" "+y+")", b)
	}
	t := cType(b)
	switch sub {
	case ir.BinAdd, ir.BinSub, ir.BinMul:
		if b.IsSigned() && !e.lang.Host && b.Size() >= 4 {
			u := unsignedOf(b)
			return fmt.Sprintf("((%s)((%s)%s %s (%s)%s))", t, u, x, cOps[sub], u, y)
		}
		return e.wrap(x+" "+cOps[sub]+" "+y, b)
	case ir.BinAnd, ir.BinOr, ir.BinXor:
		return e.wrap(x+" "+cOps[sub]+" "+y, b)
	case ir.BinDiv, ir.BinRem:
		if c, ok := ir.ConstInt(yv); ok && c != 0 && c != -1 {
			return e.wrap(x+" "+cOps[sub]+" "+y, b)
		}
		name := fmt.Sprintf("loom_%s_%s", map[int]string{ir.BinDiv: "div", ir.BinRem: "rem"}[sub], shortName(b))
		var body string
		if sub == ir.BinDiv {
			if b.IsUnsigned() {
				body = "return y == 0 ? 0 : (" + t + ")(x / y);"
			} else {
				body = fmt.Sprintf("return y == 0 ? 0 : y == -1 ? (%s)(0 - (%s)x) : (%s)(x / y);", t, unsignedOf(b), t)
			}
		} else {
			if b.IsUnsigned() {
				body = "return y == 0 ? x : (" + t + ")(x % y);"
			} else {
				body = "return y == 0 ? x : y == -1 ? 0 : (" + t + ")(x % y);"
			}
		}
		e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s x, %s y) { %s }\n", t, name, t, t, body))
		return name + "(" + x + ", " + y + ")"
	case ir.BinShl, ir.BinShr:
		mask := b.Bits() - 1
		u := unsignedOf(b)
		if sub == ir.BinShl {
			return fmt.Sprintf("((%s)((%s)%s << ((%s)%s & %d)))", t, u, x, u, y, mask)
		}
		return fmt.Sprintf("((%s)(%s >> ((%s)%s & %d)))", t, x, u, y, mask)
	case ir.BinMin:
		return "(" + y + " < " + x + " ? " + y + " : " + x + ")"
	case ir.BinMax:
		return "(" + y + " > " + x + " ? " + y + " : " + x + ")"
	case ir.BinCeilDiv:
		name := "loom_ceil_div_" + shortName(b)
		body := "return y <= 0 ? 0 : (" + t + ")(x / y + (x % y > 0));"
		if b.IsUnsigned() {
			body = "return y == 0 ? 0 : (" + t + ")(x / y + (x % y != 0));"
		}
		e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s x, %s y) { %s }\n", t, name, t, t, body))
		return name + "(" + x + ", " + y + ")"
	}
	e.err = fmt.Errorf("codegen: binary op %s on %s", ir.SubName(sub), b)
	return "0"
}

func (e *emitter) scalarUnary(sub int, x string, b *types.Basic) string {
	if b.IsFloat() {
		switch sub {
		case ir.UnNeg:
			return "(-" + x + ")"
		}
		fn := mathFns[sub]
		if b.Kind() != types.F64 {
			if sub == ir.UnExp && e.lang.Host {
				return round(e.helper("loom_expf", hostExpf)+"("+x+")", b)
			}
			if sub == ir.UnTanh && e.lang.Host {
				e.helper("loom_expf", hostExpf)
				return round(e.helper("loom_tanhf", hostTanhf)+"("+x+")", b)
			}
			fn += "f"
		}
		return round(fn+"("+x+")", b)
	}
	switch sub {
	case ir.UnNeg:
		if b.IsSigned() && b.Size() >= 4 {
			return fmt.Sprintf("((%s)(0 - (%s)%s))", cType(b), unsignedOf(b), x)
		}
		return e.wrap("-"+x, b)
	case ir.UnNot:
		if b.IsBool() {
			return "(!" + x + ")"
		}
		return e.wrap("~"+x, b)
	case ir.UnAbs:
		if b.IsUnsigned() {
			return x
		}
		return fmt.Sprintf("(%s < 0 ? (%s)(0 - (%s)%s) : %s)", x, cType(b), unsignedOf(b), x, x)
	}
	e.err = fmt.Errorf("codegen: unary op %s on %s", ir.SubName(sub), b)
	return "0"
}

// convert renders a scalar conversion with Loom semantics.
func (e *emitter) convert(x string, from, to *types.Basic) string {
	switch {
	case to.IsBool():
		return "(" + x + " != 0)"
	case to.IsFloat():
		if from.IsFloat() {
			switch to.Kind() {
			case types.F16, types.BF16:
				return round("(float)"+x, to)
			case types.F32:
				return "((float)" + x + ")"
			}
			return "((double)" + x + ")"
		}
		return round("(("+cType(to)+")"+x+")", to)
	case from.IsFloat():
		return e.f2i(x, to)
	}
	return "((" + cType(to) + ")" + x + ")"
}

func (e *emitter) f2i(x string, to *types.Basic) string {
	name := "loom_f2" + shortName(to)
	t := cType(to)
	var body string
	switch to.Kind() {
	case types.U64:
		body = "if (!(x > -1.0)) return 0; if (x >= 18446744073709551616.0) return 0xffffffffffffffffULL; return (loom_u64)x;"
	case types.I64, types.Index:
		body = "if (x != x) return 0; if (x >= 9223372036854775808.0) return 0x7fffffffffffffffLL; if (x < -9223372036854775808.0) return (-0x7fffffffffffffffLL - 1); return (loom_i64)x;"
	default:
		bits := to.Bits()
		if to.IsUnsigned() {
			max := uint64(1)<<uint(bits) - 1
			body = fmt.Sprintf("if (!(x > -1.0)) return 0; if (x >= %d.0) return (%s)%dULL; return (%s)x;", max+1, t, max, t)
		} else {
			max := int64(1)<<uint(bits-1) - 1
			body = fmt.Sprintf("if (x != x) return 0; if (x >= %d.0) return (%s)%dLL; if (x <= %d.0) return (%s)(%dLL); return (%s)x;", max+1, t, max, -max-2, t, -max-1, t)
		}
	}
	e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(double x) { %s }\n", t, name, body))
	return name + "(" + x + ")"
}

func (e *emitter) reduce(sub int, x string, vt *types.Vector) string {
	vn := e.vecType(vt)
	t := cType(vt.Elem)
	name := fmt.Sprintf("loom_reduce_%s_%s", ir.SubName(sub), vn)
	var step string
	switch sub {
	case ir.BinAdd:
		step = "r = r + " + e.lane(vt, "x", "i") + ";"
		if !vt.Elem.IsFloat() {
			step = "r = (" + t + ")(r + " + e.lane(vt, "x", "i") + ");"
		}
	case ir.BinMax:
		step = "if (" + e.lane(vt, "x", "i") + " > r) r = " + e.lane(vt, "x", "i") + ";"
	case ir.BinMin:
		step = "if (" + e.lane(vt, "x", "i") + " < r) r = " + e.lane(vt, "x", "i") + ";"
	}
	e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s x) { %s r = %s; for (int i = 1; i < %d; i++) %s return r; }\n",
		t, name, vn, t, e.lane(vt, "x", "0"), vt.Len, step))
	return name + "(" + x + ")"
}

// vexpr renders a vector op. Host C uses GCC vector extensions where their semantics match
// Loom's and lane loops elsewhere; CUDA uses lane loops throughout. A vector wider than the
// target's registers (see emitter.split) is rendered part by part: a helper applies the op's
// register-wide rendering to each part, or, when its operands do not split alike (a cast
// between element sizes), loops over its lanes.
func (e *emitter) vexpr(op *ir.Op, vt *types.Vector) string {
	args := make([]string, len(op.Args))
	for i, a := range op.Args {
		args[i] = e.val(a)
	}
	k, part := e.split(vt)
	if k == 1 {
		return e.vexprWith(op, vt, args, e.lang.NativeVectors, true)
	}
	if op.Code == ir.OpConst {
		return e.val(op.Result)
	}
	var params, argTypes []string
	partArgs := make([][]string, k)
	for i, a := range op.Args {
		tn := e.typeName(a.Type)
		params = append(params, fmt.Sprintf("%s a%d", tn, i))
		argTypes = append(argTypes, tn)
		av, isVec := a.Type.(*types.Vector)
		if isVec {
			if ka, pa := e.split(av); ka != k || pa.Len != part.Len {
				return e.vexprWith(op, vt, args, false, false)
			}
		}
		for j := range partArgs {
			if isVec {
				partArgs[j] = append(partArgs[j], fmt.Sprintf("a%d.p[%d]", i, j))
			} else {
				partArgs[j] = append(partArgs[j], fmt.Sprintf("a%d", i))
			}
		}
	}
	vn := e.vecType(vt)
	var body strings.Builder
	for j := range partArgs {
		x := e.vexprWith(op, part, partArgs[j], true, false)
		fmt.Fprintf(&body, " r.p[%d] = %s;", j, x)
	}
	name := "loom_vp_" + cIdent(op.Name()) + "_" + strings.Join(argTypes, "_") + "_" + vn
	e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s) { %s r;%s return r; }\n",
		vn, name, strings.Join(params, ", "), vn, body.String()))
	return name + "(" + strings.Join(args, ", ") + ")"
}

// cIdent turns s into a C identifier fragment.
func cIdent(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// vexprWith renders vector op op with result type vt over the rendered operands args: with GCC
// vector operators where native allows, else with lane loops. fold lets a splat operand of
// a binary op or an FMA be the scalar itself (GCC broadcasts it).
func (e *emitter) vexprWith(op *ir.Op, vt *types.Vector, args []string, native, fold bool) string {
	vn := e.vecType(vt)
	el := vt.Elem
	t := cType(el)
	lanes := func(kind string, params []string, laneExpr string) string {
		name := fmt.Sprintf("loom_v%s_%s", kind, vn)
		var ps []string
		for i, p := range params {
			ps = append(ps, p+" a"+fmt.Sprint(i))
		}
		e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s) { %s r; for (int i = 0; i < %d; i++) %s = %s; return r; }\n",
			vn, name, strings.Join(ps, ", "), vn, vt.Len, e.lane(vt, "r", "i"), laneExpr))
		return name + "(" + strings.Join(args, ", ") + ")"
	}
	a := func(i int) string { return e.lane(vt, fmt.Sprintf("a%d", i), "i") }
	// GCC broadcasts a scalar operand of a vector operation itself (one vbroadcastss, or a
	// broadcast memory operand folded into the FMA).
	scalarOr := func(i int) string {
		if a := op.Args[i]; native && fold && a.Def != nil && a.Def.Code == ir.OpSplat {
			return e.val(a.Def.Args[0])
		}
		return args[i]
	}
	switch op.Code {
	case ir.OpSplat:
		if native {
			xs := make([]string, vt.Len)
			for i := range xs {
				xs[i] = args[0]
			}
			return "((" + vn + "){" + strings.Join(xs, ", ") + "})"
		}
		return lanes("splat", []string{t}, "a0")
	case ir.OpBinary:
		s := op.Sub
		if native && (s == ir.BinAdd || s == ir.BinSub || s == ir.BinMul || s == ir.BinAnd || s == ir.BinOr || s == ir.BinXor || (s == ir.BinDiv && el.IsFloat())) {
			x, y := scalarOr(0), scalarOr(1)
			if x != args[0] && y != args[1] {
				x = args[0] // at least one operand must be a vector
			}
			return "(" + x + " " + cOps[s] + " " + y + ")"
		}
		if native && el.IsFloat() && (s == ir.BinMax || s == ir.BinMin) {
			return e.vminmax(s, vt, args)
		}
		lane := e.scalarBinary(s, a(0), a(1), el, op.Args[1])
		return lanes(ir.SubName(s), []string{vn, vn}, lane)
	case ir.OpUnary:
		if native && op.Sub == ir.UnNeg {
			return "(-" + args[0] + ")"
		}
		if native && op.Sub == ir.UnAbs && (cType(el) == "float" || cType(el) == "double") {
			// abs clears the sign bits of the lanes' integer view: one AND. (A loop over the
			// lanes, as the other helpers are, was miscompiled by GCC 12's vectorizer once
			// the code after a kernel's checks counted as hot.)
			bits, mask, size := "unsigned int", "0x7fffffffu", 4
			if cType(el) == "double" {
				bits, mask, size = "unsigned long long", "0x7fffffffffffffffull", 8
			}
			name := "loom_vabs_" + vn
			e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s a0) { typedef %s loom_bits __attribute__((vector_size(%d))); return (%s)((loom_bits)a0 & %s); }\n",
				vn, name, vn, bits, vt.Len*size, vn, mask))
			return name + "(" + args[0] + ")"
		}
		return lanes(ir.SubName(op.Sub), []string{vn}, e.scalarUnary(op.Sub, a(0), el))
	case ir.OpCast:
		from := op.Args[0].Type.(*types.Vector)
		if from.Len != vt.Len {
			from = &types.Vector{Elem: from.Elem, Len: vt.Len} // a part of the operand
		}
		fn := e.vecType(from)
		if native && !(from.Elem.IsFloat() && !el.IsFloat()) {
			return "__builtin_convertvector(" + args[0] + ", " + vn + ")"
		}
		name := fmt.Sprintf("loom_vcvt_%s_%s", fn, vn)
		e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s a0) { %s r; for (int i = 0; i < %d; i++) %s = %s; return r; }\n",
			vn, name, fn, vn, vt.Len, e.lane(vt, "r", "i"), e.convert(e.lane(from, "a0", "i"), from.Elem, el)))
		return name + "(" + args[0] + ")"
	case ir.OpSelect:
		if native {
			return "(" + args[0] + " ? " + args[1] + " : " + args[2] + ")"
		}
		return "(" + args[0] + " ? " + args[1] + " : " + args[2] + ")"
	case ir.OpFma:
		if native {
			// -ffp-contract=fast fuses this into one instruction on FMA targets.
			x, y := scalarOr(0), scalarOr(1)
			if x != args[0] && y != args[1] {
				x = args[0]
			}
			return "(" + x + " * " + y + " + " + args[2] + ")"
		}
		fn := "fmaf"
		if el.Kind() == types.F64 {
			fn = "fma"
		}
		return lanes("fma", []string{vn, vn, vn}, fn+"("+a(0)+", "+a(1)+", "+a(2)+")")
	case ir.OpConst:
		return e.val(op.Result)
	}
	e.err = fmt.Errorf("codegen: cannot render vector op %s", op.Name())
	return "0"
}

// vminmax renders a float vector max or min with GCC vector operators: the lanes' comparison
// (a vector of all-ones or zero lanes) selects, through the lanes' integer view, the operand
// the scalar form picks, lane by lane: max(x, y) is y where y > x and x elsewhere (a NaN y
// keeps x), min likewise with <. A loop over the lanes, as the other helpers are, was left
// lane by lane by GCC 12 (a masked move a lane); this is one compare and one blend (or
// vmaxps) a register.
func (e *emitter) vminmax(sub int, vt *types.Vector, args []string) string {
	vn := e.vecType(vt)
	bits, size := "int", 4
	if cType(vt.Elem) == "double" {
		bits, size = "long long", 8
	}
	cmp := map[int]string{ir.BinMax: ">", ir.BinMin: "<"}[sub]
	name := fmt.Sprintf("loom_v%s_%s", ir.SubName(sub), vn)
	e.helper(name, fmt.Sprintf("static LOOM_INLINE %s %s(%s a0, %s a1) { typedef %s loom_bits __attribute__((vector_size(%d))); loom_bits m = (loom_bits)(a1 %s a0); return (%s)(((loom_bits)a1 & m) | ((loom_bits)a0 & ~m)); }\n",
		vn, name, vn, vn, bits, vt.Len*size, cmp, vn))
	return name + "(" + args[0] + ", " + args[1] + ")"
}
