package refeval

import (
	"cmp"
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
)

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func arg(args []*Value, i int) *Value {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// Eval computes one node. Results over maxElements elements are refused.
func Eval(n *graph.Node, opset int64, args []*Value) (outs []*Value, err error) {
	defer func() {
		// Malformed arguments (wrong arity or ranks the checks upstream did not catch) end up
		// here as runtime errors; constant folding must get an error, not a crash.
		if r := recover(); r != nil {
			if tl, ok := r.(tooLarge); ok {
				outs, err = nil, fmt.Errorf("result of shape %v is too large for the reference evaluator", tl.dims)
				return
			}
			outs, err = nil, fmt.Errorf("cannot evaluate %s on these inputs: %v", n.OpType, r)
		}
	}()
	for i, a := range args {
		if a == nil && i == 0 && n.OpType != "Constant" {
			return nil, fmt.Errorf("first input missing")
		}
	}
	one := func(v *Value, err error) ([]*Value, error) {
		if err != nil {
			return nil, err
		}
		return []*Value{v}, nil
	}
	x := arg(args, 0)
	switch n.OpType {
	case "Identity":
		return []*Value{x}, nil
	case "Dropout":
		mask := newValue(graph.Bool, x.Dims)
		for i := range mask.Data {
			mask.Data[i] = 1
		}
		return []*Value{x, mask}, nil
	case "Constant":
		t, err := graph.ConstantValue(n)
		if err != nil {
			return nil, err
		}
		return one(FromTensor(t))
	case "Relu":
		return []*Value{unary(x, func(v float64) float64 { return math.Max(v, 0) })}, nil
	case "Neg":
		return []*Value{unary(x, func(v float64) float64 { return -v })}, nil
	case "Abs":
		return []*Value{unary(x, math.Abs)}, nil
	case "Exp":
		return []*Value{unary(x, math.Exp)}, nil
	case "Log":
		return []*Value{unary(x, math.Log)}, nil
	case "Sqrt":
		return []*Value{unary(x, math.Sqrt)}, nil
	case "Erf":
		return []*Value{unary(x, math.Erf)}, nil
	case "Tanh":
		return []*Value{unary(x, math.Tanh)}, nil
	case "Reciprocal":
		return []*Value{unary(x, func(v float64) float64 { return 1 / v })}, nil
	case "Sigmoid":
		return []*Value{unary(x, sigmoid)}, nil
	case "Not":
		return []*Value{unary(x, func(v float64) float64 { return boolf(v == 0) })}, nil
	case "LeakyRelu":
		alpha := float64(n.AttrFloat("alpha", 0.01))
		return []*Value{unary(x, func(v float64) float64 { return leaky(v, alpha) })}, nil
	case "HardSigmoid":
		a, b := float64(n.AttrFloat("alpha", 0.2)), float64(n.AttrFloat("beta", 0.5))
		return []*Value{unary(x, func(v float64) float64 { return math.Max(0, math.Min(1, a*v+b)) })}, nil
	case "HardSwish":
		return []*Value{unary(x, hardSwish)}, nil
	case "Clip":
		lo, hi := math.Inf(-1), math.Inf(1)
		if opset < 11 {
			lo, hi = float64(n.AttrFloat("min", float32(math.Inf(-1)))), float64(n.AttrFloat("max", float32(math.Inf(1))))
		} else {
			if a := arg(args, 1); a != nil {
				lo = scalar(a)
			}
			if a := arg(args, 2); a != nil {
				hi = scalar(a)
			}
		}
		return []*Value{unary(x, func(v float64) float64 { return math.Min(math.Max(v, lo), hi) })}, nil
	case "Gelu":
		if n.AttrString("approximate", "none") == "tanh" {
			return []*Value{unary(x, geluTanh)}, nil
		}
		return []*Value{unary(x, gelu)}, nil
	case "Cast":
		to := graph.DataType(n.AttrInt("to", 0))
		switch to {
		case graph.Float, graph.Double, graph.Float16, graph.BFloat16, graph.Bool, graph.Int8, graph.Int16, graph.Int32,
			graph.Int64, graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64:
		default:
			return nil, fmt.Errorf("cast to %s is not covered", to)
		}
		if lo, hi, ok := intRange(to); ok {
			for _, v := range x.Data {
				if !(math.Trunc(v) >= lo && math.Trunc(v) <= hi) {
					// NaN, infinite or out of range: the result is the implementation's.
					return nil, fmt.Errorf("cast of %v to %s is not covered", v, to)
				}
			}
		}
		out := &Value{DType: to, Dims: append([]int64{}, x.Dims...), Data: append([]float64{}, x.Data...)}
		return []*Value{out.finish()}, nil
	case "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "And", "Or", "Where":
		return one(binary(n.OpType, args))
	case "MatMul":
		return one(matmul(x, args[1]))
	case "Gemm":
		return one(gemm(n, args))
	case "Softmax":
		return one(softmax(n, opset, x))
	case "ReduceMean", "ReduceSum", "ReduceMax":
		return one(reduce(n, opset, args))
	case "Transpose":
		return one(transpose(x, n.AttrInts("perm")))
	case "Reshape":
		return one(reshape(n, x, args[1]))
	case "Flatten":
		// axis is in [-rank, rank]: a negative one counts from the end (-1 is rank-1).
		r := int64(len(x.Dims))
		axis := n.AttrInt("axis", 1)
		if axis < -r || axis > r {
			return nil, fmt.Errorf("axis %d out of range for rank %d", axis, r)
		}
		if axis < 0 {
			axis += r
		}
		a := numel(x.Dims[:axis])
		return []*Value{{DType: x.DType, Dims: []int64{int64(a), int64(numel(x.Dims[axis:]))}, Data: x.Data}}, nil
	case "Squeeze", "Unsqueeze":
		return one(squeeze(n, opset, args))
	case "Shape":
		// start and end (opset 15) select axes [start, end), each counted from the end when
		// negative and clamped to [0, rank].
		r := int64(len(x.Dims))
		clamp := func(a int64) int64 {
			if a < 0 {
				a += r
			}
			return min(max(a, 0), r)
		}
		start, end := clamp(n.AttrInt("start", 0)), clamp(n.AttrInt("end", r))
		out := &Value{DType: graph.Int64, Dims: []int64{max(end-start, 0)}}
		for i := start; i < end; i++ {
			out.Data = append(out.Data, float64(x.Dims[i]))
		}
		return []*Value{out}, nil
	case "Concat":
		return one(concat(n, args))
	case "Gather":
		return one(gather(n, x, args[1]))
	case "Slice":
		if opset < 10 {
			// Opsets 1-9 take starts, ends and axes as attributes.
			attr := func(name string) *Value {
				v := n.AttrInts(name)
				if v == nil {
					return nil
				}
				out := &Value{DType: graph.Int64, Dims: []int64{int64(len(v))}}
				for _, x := range v {
					out.Data = append(out.Data, float64(x))
				}
				return out
			}
			return one(slice([]*Value{x, attr("starts"), attr("ends"), attr("axes")}))
		}
		return one(slice(args))
	case "Split":
		return split(n, opset, args)
	case "Expand":
		shape := ints(args[1])
		dims, err := broadcastDims(x.Dims, shape)
		if err != nil {
			return nil, err
		}
		// The broadcast shape through newValue, which refuses one over maxElements before
		// allocating (a hostile shape input asked for terabytes here).
		return one(elementwise(x.DType, []*Value{x, newValue(x.DType, dims)}, func(v []float64) float64 { return v[0] }))
	case "ConstantOfShape":
		dims := ints(x)
		out := newValue(graph.Float, dims)
		if a := n.Attr("value"); a != nil && a.Tensor != nil {
			v, err := FromTensor(a.Tensor)
			if err != nil {
				return nil, err
			}
			out.DType = v.DType
			for i := range out.Data {
				out.Data[i] = v.Data[0]
			}
		}
		return []*Value{out}, nil
	case "Range":
		start, limit, delta := scalar(args[0]), scalar(args[1]), scalar(args[2])
		cnt := int(math.Max(math.Ceil((limit-start)/delta), 0))
		if cnt > maxElements {
			return nil, fmt.Errorf("range too long")
		}
		out := newValue(x.DType, []int64{int64(cnt)})
		for i := range out.Data {
			out.Data[i] = start + float64(i)*delta
		}
		return []*Value{out.finish()}, nil
	case "Trilu":
		return one(trilu(n, args))
	case "BatchNormalization":
		return one(batchNorm(n, args))
	case "LayerNormalization":
		return layerNorm(n, args)
	case "Conv", "FusedConv":
		return one(conv(n, args))
	case "Attention":
		if n.Domain != graph.LoomDomain {
			// ai.onnx's Attention (opsets 23, 24) has other inputs and attributes (causal
			// masks, head counts, KV cache); constant folding must not read it as Loom's.
			return nil, fmt.Errorf("Attention of domain %q is not supported, only %s's", cmp.Or(n.Domain, "ai.onnx"), graph.LoomDomain)
		}
		return one(attention(n, args))
	case "MaxPool", "AveragePool":
		return one(pool(n, x))
	case "GlobalAveragePool", "GlobalMaxPool":
		outDims := append([]int64{}, x.Dims[:2]...)
		for range x.Dims[2:] {
			outDims = append(outDims, 1)
		}
		out := newValue(x.DType, outDims)
		inner := numel(x.Dims[2:])
		for c := range out.Data {
			acc := math.Inf(-1)
			if n.OpType == "GlobalAveragePool" {
				acc = 0
				if inner == 0 {
					acc = math.NaN() // the mean of nothing, as ReduceMean's
				}
			}
			for _, v := range x.Data[c*inner : (c+1)*inner] {
				if n.OpType == "GlobalAveragePool" {
					acc += v
				} else {
					acc = math.Max(acc, v)
				}
			}
			if n.OpType == "GlobalAveragePool" && inner > 0 {
				acc /= float64(inner) // the sum, then one division (a mean of 1s is 1)
			}
			out.Data[c] = acc
		}
		return []*Value{out.finish()}, nil
	case "MatMulAdd":
		act, err := matMulAddActivation(n)
		if err != nil {
			return nil, err
		}
		p, err := matmul(x, args[1])
		if err != nil {
			return nil, err
		}
		s, err := binary("Add", []*Value{p, args[2]})
		if err != nil || act == nil {
			return one(s, err)
		}
		return []*Value{unary(s, act)}, nil
	}
	return nil, fmt.Errorf("operator %s is not supported by the reference evaluator", n.OpType)
}

func sigmoid(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

func gelu(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }

func geluTanh(v float64) float64 {
	return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
}

// matMulAddActivation reads the epilogue of Loom's MatMulAdd (see graph.LoomDomain): nil for
// none, else GELU, exact or in tanh form. Unknown values and non-string attributes are errors.
func matMulAddActivation(n *graph.Node) (func(float64) float64, error) {
	for _, name := range []string{"activation", "approximate"} {
		if a := n.Attr(name); a != nil && a.Type != graph.AttrString {
			return nil, fmt.Errorf("MatMulAdd node %q: attribute %s must be a string", n.Label(), name)
		}
	}
	approx := n.AttrString("approximate", "none")
	if approx != "none" && approx != "tanh" {
		return nil, fmt.Errorf("MatMulAdd node %q: unknown approximate %q (want \"none\" or \"tanh\")", n.Label(), approx)
	}
	switch act := n.AttrString("activation", ""); act {
	case "":
		return nil, nil
	case "Gelu":
		if approx == "tanh" {
			return geluTanh, nil
		}
		return gelu, nil
	default:
		return nil, fmt.Errorf("MatMulAdd node %q: unknown activation %q (want \"\" or \"Gelu\")", n.Label(), act)
	}
}

func leaky(v, alpha float64) float64 {
	if v < 0 {
		return alpha * v
	}
	return v
}

func binary(op string, args []*Value) (*Value, error) {
	if len(args) < 2 || args[1] == nil {
		return nil, fmt.Errorf("%s needs two inputs", op)
	}
	dt := args[0].DType
	switch op {
	case "Equal", "Less", "Greater", "And", "Or":
		dt = graph.Bool
	case "Where":
		dt = args[1].DType
	}
	isInt := args[0].DType.IsInteger()
	return elementwise(dt, args, func(v []float64) float64 {
		a, b := v[0], v[1]
		switch op {
		case "Add":
			return a + b
		case "Sub":
			return a - b
		case "Mul":
			return a * b
		case "Div":
			if isInt {
				if b == 0 {
					return 0
				}
				return math.Trunc(a / b)
			}
			return a / b
		case "Pow":
			return math.Pow(a, b)
		case "Max", "Min": // variadic from opset 8: every input counts
			m := a
			for _, x := range v[1:] {
				if math.IsNaN(x) || math.IsNaN(m) {
					// NaN wins, as numpy's maximum and minimum (ONNX's reference) and ONNX
					// Runtime have it; math.Min(NaN, -Inf) is -Inf.
					return math.NaN()
				}
				if op == "Max" {
					m = math.Max(m, x)
				} else {
					m = math.Min(m, x)
				}
			}
			return m
		case "Equal":
			return boolf(a == b)
		case "Less":
			return boolf(a < b)
		case "Greater":
			return boolf(a > b)
		case "And":
			return boolf(a != 0 && b != 0)
		case "Or":
			return boolf(a != 0 || b != 0)
		case "Where":
			if a != 0 {
				return b
			}
			return v[2]
		}
		return math.NaN()
	})
}

func matmul(a, b *Value) (*Value, error) {
	ad, bd := a.Dims, b.Dims
	if len(ad) == 1 {
		ad = []int64{1, ad[0]}
	}
	if len(bd) == 1 {
		bd = []int64{bd[0], 1}
	}
	if len(ad) < 2 || len(bd) < 2 {
		return nil, fmt.Errorf("MatMul of scalars")
	}
	m, k, k2, nn := ad[len(ad)-2], ad[len(ad)-1], bd[len(bd)-2], bd[len(bd)-1]
	if k != k2 {
		return nil, fmt.Errorf("MatMul inner dims %d and %d", k, k2)
	}
	batch, err := broadcastDims(ad[:len(ad)-2], bd[:len(bd)-2])
	if err != nil {
		return nil, err
	}
	outDims := append(append([]int64{}, batch...), m, nn)
	out := newValue(a.DType, outDims)
	bs := strides(batch)
	abatch, bbatch := ad[:len(ad)-2], bd[:len(bd)-2]
	as, bss := strides(abatch), strides(bbatch)
	nb := numel(batch)
	for bi := 0; bi < nb; bi++ {
		ai := broadcastIndex(bi, batch, bs, abatch, as) * int(m*k)
		bj := broadcastIndex(bi, batch, bs, bbatch, bss) * int(k*nn)
		o := bi * int(m*nn)
		for i := 0; i < int(m); i++ {
			for j := 0; j < int(nn); j++ {
				s := 0.0
				for p := 0; p < int(k); p++ {
					s += a.Data[ai+i*int(k)+p] * b.Data[bj+p*int(nn)+j]
				}
				out.Data[o+i*int(nn)+j] = s
			}
		}
	}
	if len(a.Dims) == 1 {
		outDims = append(outDims[:len(outDims)-2], outDims[len(outDims)-1])
	}
	if len(b.Dims) == 1 {
		outDims = outDims[:len(outDims)-1]
	}
	out.Dims = outDims
	return out.finish(), nil
}

func transpose(x *Value, perm []int64) (*Value, error) {
	r := len(x.Dims)
	if perm == nil {
		for i := r - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v for rank %d", perm, r)
	}
	dims := make([]int64, r)
	for i, p := range perm {
		dims[i] = x.Dims[p]
	}
	out := newValue(x.DType, dims)
	is, os := strides(x.Dims), strides(dims)
	for i := range out.Data {
		j := 0
		for d := 0; d < r; d++ {
			j += ((i / os[d]) % int(dims[d])) * is[perm[d]]
		}
		out.Data[i] = x.Data[j]
	}
	return out, nil
}

func gemm(n *graph.Node, args []*Value) (*Value, error) {
	a, b := args[0], args[1]
	if n.AttrInt("transA", 0) != 0 {
		var err error
		if a, err = transpose(a, nil); err != nil {
			return nil, err
		}
	}
	if n.AttrInt("transB", 0) != 0 {
		var err error
		if b, err = transpose(b, nil); err != nil {
			return nil, err
		}
	}
	y, err := matmul(a, b)
	if err != nil {
		return nil, err
	}
	alpha, beta := float64(n.AttrFloat("alpha", 1)), float64(n.AttrFloat("beta", 1))
	for i := range y.Data {
		y.Data[i] *= alpha
	}
	if c := arg(args, 2); c != nil {
		return elementwise(y.DType, []*Value{y, c}, func(v []float64) float64 { return v[0] + beta*v[1] })
	}
	return y.finish(), nil
}

// lastAxisGroups calls fn for every run of the trailing axes from axis on.
func groups(dims []int64, axis int) (outer, inner int) {
	return numel(dims[:axis]), numel(dims[axis:])
}

func softmax(n *graph.Node, opset int64, x *Value) (*Value, error) {
	def := int64(-1)
	if opset < 13 {
		def = 1
	}
	axis, err := normAxis(n.AttrInt("axis", def), len(x.Dims))
	if err != nil {
		return nil, err
	}
	out := newValue(x.DType, append([]int64{}, x.Dims...))
	if opset < 13 {
		outer, inner := groups(x.Dims, axis)
		for o := 0; o < outer; o++ {
			softmaxRun(x.Data[o*inner:(o+1)*inner], out.Data[o*inner:(o+1)*inner], 1)
		}
		return out.finish(), nil
	}
	st := strides(x.Dims)[axis]
	size := int(x.Dims[axis])
	outer := numel(x.Dims[:axis])
	for o := 0; o < outer; o++ {
		for s := 0; s < st; s++ {
			base := o*size*st + s
			softmaxRun(x.Data[base:], out.Data[base:], st, size)
		}
	}
	return out.finish(), nil
}

func softmaxRun(in, out []float64, stride int, size ...int) {
	n := len(in)
	if len(size) > 0 {
		n = size[0]
	}
	m := math.Inf(-1)
	for i := 0; i < n; i++ {
		m = math.Max(m, in[i*stride])
	}
	s := 0.0
	for i := 0; i < n; i++ {
		e := math.Exp(in[i*stride] - m)
		out[i*stride] = e
		s += e
	}
	for i := 0; i < n; i++ {
		out[i*stride] /= s
	}
}

func reduce(n *graph.Node, opset int64, args []*Value) (*Value, error) {
	x := args[0]
	var axes []int64
	fromInput := (n.OpType == "ReduceSum" && opset >= 13) || opset >= 18
	if fromInput {
		if a := arg(args, 1); a != nil {
			axes = ints(a)
		}
	} else {
		axes = n.AttrInts("axes")
	}
	keep := n.AttrInt("keepdims", 1) != 0
	red := make([]bool, len(x.Dims))
	if len(axes) == 0 {
		if fromInput && n.AttrInt("noop_with_empty_axes", 0) != 0 {
			return x, nil
		}
		for i := range red {
			red[i] = true
		}
	}
	for _, a := range axes {
		ax, err := normAxis(a, len(x.Dims))
		if err != nil {
			return nil, err
		}
		red[ax] = true
	}
	var outDims, keptDims []int64
	for i, d := range x.Dims {
		if red[i] {
			keptDims = append(keptDims, 1)
			if keep {
				outDims = append(outDims, 1)
			}
		} else {
			keptDims = append(keptDims, d)
			outDims = append(outDims, d)
		}
	}
	out := newValue(x.DType, outDims)
	cnt := make([]int, len(out.Data))
	init := math.Inf(-1)
	if n.OpType != "ReduceMax" {
		init = 0
	}
	for i := range out.Data {
		out.Data[i] = init
	}
	xs, ks := strides(x.Dims), strides(keptDims)
	for i, v := range x.Data {
		j := 0
		for d := range x.Dims {
			if !red[d] {
				j += ((i / xs[d]) % int(x.Dims[d])) * ks[d]
			}
		}
		if n.OpType == "ReduceMax" {
			out.Data[j] = math.Max(out.Data[j], v)
		} else {
			out.Data[j] += v
		}
		cnt[j]++
	}
	if n.OpType == "ReduceMean" {
		for i := range out.Data {
			out.Data[i] /= float64(cnt[i])
		}
	}
	return out.finish(), nil
}

func reshape(n *graph.Node, x, shape *Value) (*Value, error) {
	s := ints(shape)
	dims := make([]int64, len(s))
	neg := -1
	known := int64(1)
	for i, v := range s {
		switch {
		case v == -1:
			neg = i
			continue
		case v == 0 && n.AttrInt("allowzero", 0) == 0:
			if i >= len(x.Dims) {
				return nil, fmt.Errorf("reshape 0 beyond rank")
			}
			v = x.Dims[i]
		}
		dims[i] = v
		known *= v
	}
	if neg >= 0 {
		if known == 0 {
			return nil, fmt.Errorf("reshape -1 with zero-size dims")
		}
		dims[neg] = int64(x.Numel()) / known
	}
	if numel(dims) != x.Numel() {
		return nil, fmt.Errorf("cannot reshape %v to %v", x.Dims, s)
	}
	return &Value{DType: x.DType, Dims: dims, Data: x.Data}, nil
}

func squeeze(n *graph.Node, opset int64, args []*Value) (*Value, error) {
	x := args[0]
	var axes []int64
	if opset >= 13 {
		if a := arg(args, 1); a != nil {
			axes = ints(a)
		}
	} else {
		axes = n.AttrInts("axes")
	}
	if n.OpType == "Unsqueeze" {
		r := len(x.Dims) + len(axes)
		ins := make([]bool, r)
		for _, a := range axes {
			ax, err := normAxis(a, r)
			if err != nil {
				return nil, err
			}
			ins[ax] = true
		}
		var dims []int64
		j := 0
		for i := 0; i < r; i++ {
			if ins[i] {
				dims = append(dims, 1)
			} else {
				dims = append(dims, x.Dims[j])
				j++
			}
		}
		return &Value{DType: x.DType, Dims: dims, Data: x.Data}, nil
	}
	drop := make([]bool, len(x.Dims))
	for _, a := range axes {
		ax, err := normAxis(a, len(x.Dims))
		if err != nil {
			return nil, err
		}
		drop[ax] = true
	}
	var dims []int64
	for i, d := range x.Dims {
		if (len(axes) == 0 && d == 1) || drop[i] {
			continue
		}
		dims = append(dims, d)
	}
	return &Value{DType: x.DType, Dims: dims, Data: x.Data}, nil
}

func concat(n *graph.Node, args []*Value) (*Value, error) {
	axis, err := normAxis(n.AttrInt("axis", 0), len(args[0].Dims))
	if err != nil {
		return nil, err
	}
	dims := append([]int64{}, args[0].Dims...)
	dims[axis] = 0
	for _, a := range args {
		if len(a.Dims) != len(dims) {
			return nil, fmt.Errorf("Concat ranks differ")
		}
		dims[axis] += a.Dims[axis]
	}
	out := newValue(args[0].DType, dims)
	outer := numel(dims[:axis])
	inner := numel(dims[axis+1:])
	pos := 0
	for o := 0; o < outer; o++ {
		for _, a := range args {
			chunk := int(a.Dims[axis]) * inner
			copy(out.Data[pos:pos+chunk], a.Data[o*chunk:(o+1)*chunk])
			pos += chunk
		}
	}
	return out, nil
}

func gather(n *graph.Node, x, idx *Value) (*Value, error) {
	axis, err := normAxis(n.AttrInt("axis", 0), len(x.Dims))
	if err != nil {
		return nil, err
	}
	dims := append(append(append([]int64{}, x.Dims[:axis]...), idx.Dims...), x.Dims[axis+1:]...)
	out := newValue(x.DType, dims)
	outer := numel(x.Dims[:axis])
	inner := numel(x.Dims[axis+1:])
	size := int(x.Dims[axis])
	pos := 0
	for o := 0; o < outer; o++ {
		for _, iv := range idx.Data {
			i := int(iv)
			if i < 0 {
				i += size
			}
			if i < 0 || i >= size {
				return nil, fmt.Errorf("Gather index %d out of range", int(iv))
			}
			copy(out.Data[pos:pos+inner], x.Data[(o*size+i)*inner:(o*size+i+1)*inner])
			pos += inner
		}
	}
	return out, nil
}

func slice(args []*Value) (*Value, error) {
	x := args[0]
	starts, ends := ints(args[1]), ints(args[2])
	var axes, steps []int64
	if a := arg(args, 3); a != nil {
		axes = ints(a)
	} else {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if a := arg(args, 4); a != nil {
		steps = ints(a)
	}
	r := len(x.Dims)
	st := make([]int64, r)
	step := make([]int64, r)
	dims := append([]int64{}, x.Dims...)
	for i := range step {
		step[i] = 1
	}
	for i, a := range axes {
		ax, err := normAxis(a, r)
		if err != nil {
			return nil, err
		}
		s := int64(1)
		if steps != nil {
			s = steps[i]
		}
		if s == 0 {
			return nil, fmt.Errorf("Slice step 0")
		}
		d := x.Dims[ax]
		b, e := starts[i], ends[i]
		if b < 0 {
			b += d
		}
		if e < 0 {
			e += d
		}
		if s > 0 {
			b, e = min(max(b, 0), d), min(max(e, 0), d)
			dims[ax] = max(0, (e-b+s-1)/s)
		} else {
			b, e = min(max(b, -1), d-1), min(max(e, -1), d-1)
			dims[ax] = max(0, (b-e+(-s)-1)/(-s))
		}
		st[ax], step[ax] = b, s
	}
	out := newValue(x.DType, dims)
	xs, os := strides(x.Dims), strides(dims)
	for i := range out.Data {
		j := 0
		for d := 0; d < r; d++ {
			c := int64((i / os[d]) % int(dims[d]))
			j += int(st[d]+c*step[d]) * xs[d]
		}
		out.Data[i] = x.Data[j]
	}
	return out, nil
}

func split(n *graph.Node, opset int64, args []*Value) ([]*Value, error) {
	x := args[0]
	axis, err := normAxis(n.AttrInt("axis", 0), len(x.Dims))
	if err != nil {
		return nil, err
	}
	nOut := len(n.Outputs)
	var sizes []int64
	if opset >= 13 {
		if a := arg(args, 1); a != nil {
			sizes = ints(a)
		}
	} else {
		sizes = n.AttrInts("split")
	}
	if sizes == nil {
		d := x.Dims[axis]
		chunk := (d + int64(nOut) - 1) / int64(nOut)
		for i := 0; i < nOut; i++ {
			sizes = append(sizes, min(chunk, d-chunk*int64(i)))
		}
	}
	var outs []*Value
	var start int64
	for _, s := range sizes {
		v, err := slice([]*Value{x, {Data: []float64{float64(start)}}, {Data: []float64{float64(start + s)}}, {Data: []float64{float64(axis)}}})
		if err != nil {
			return nil, err
		}
		outs = append(outs, v)
		start += s
	}
	return outs, nil
}

func trilu(n *graph.Node, args []*Value) (*Value, error) {
	x := args[0]
	k := int64(0)
	if a := arg(args, 1); a != nil {
		k = int64(scalar(a))
	}
	upper := n.AttrInt("upper", 1) != 0
	r := len(x.Dims)
	if r < 2 {
		return nil, fmt.Errorf("Trilu needs rank 2")
	}
	rows, cols := x.Dims[r-2], x.Dims[r-1]
	out := newValue(x.DType, append([]int64{}, x.Dims...))
	for i, v := range x.Data {
		c := int64(i) % cols
		row := (int64(i) / cols) % rows
		keep := c-row >= k
		if !upper {
			keep = c-row <= k
		}
		if keep {
			out.Data[i] = v
		}
	}
	return out, nil
}

func batchNorm(n *graph.Node, args []*Value) (*Value, error) {
	// Training mode normalizes by the batch's own statistics (and has more outputs): this
	// evaluator covers the inference form only, so constant folding leaves such a node alone.
	if n.AttrInt("training_mode", 0) != 0 {
		return nil, fmt.Errorf("BatchNormalization with training_mode %d is not supported, only inference", n.AttrInt("training_mode", 0))
	}
	x, scale, bias, mean, variance := args[0], args[1], args[2], args[3], args[4]
	eps := float64(n.AttrFloat("epsilon", 1e-5))
	out := newValue(x.DType, append([]int64{}, x.Dims...))
	c := int(x.Dims[1])
	inner := numel(x.Dims[2:])
	for i, v := range x.Data {
		ch := (i / inner) % c
		out.Data[i] = (v-mean.Data[ch])/math.Sqrt(variance.Data[ch]+eps)*scale.Data[ch] + bias.Data[ch]
	}
	return out.finish(), nil
}

func layerNorm(n *graph.Node, args []*Value) ([]*Value, error) {
	x, scale := args[0], args[1]
	bias := arg(args, 2)
	axis, err := normAxis(n.AttrInt("axis", -1), len(x.Dims))
	if err != nil {
		return nil, err
	}
	eps := float64(n.AttrFloat("epsilon", 1e-5))
	outer, inner := groups(x.Dims, axis)
	if inner == 0 && outer > 0 {
		return nil, fmt.Errorf("the statistics of an empty normalized axis are not covered (shape %v, axis %d)", x.Dims, axis)
	}
	out := newValue(x.DType, append([]int64{}, x.Dims...))
	statDims := append([]int64{}, x.Dims...)
	for i := axis; i < len(statDims); i++ {
		statDims[i] = 1
	}
	meanV, invV := newValue(graph.Float, statDims), newValue(graph.Float, statDims)
	for o := 0; o < outer; o++ {
		row := x.Data[o*inner : (o+1)*inner]
		mean := 0.0
		for _, v := range row {
			mean += v
		}
		mean /= float64(inner)
		vr := 0.0
		for _, v := range row {
			vr += (v - mean) * (v - mean)
		}
		vr /= float64(inner)
		inv := 1 / math.Sqrt(vr+eps)
		meanV.Data[o], invV.Data[o] = mean, inv
		for i, v := range row {
			y := (v - mean) * inv * scale.Data[i%len(scale.Data)]
			if bias != nil {
				y += bias.Data[i%len(bias.Data)]
			}
			out.Data[o*inner+i] = y
		}
	}
	return []*Value{out.finish(), meanV.finish(), invV.finish()}, nil
}

func activation(name string, params []float32, v float64) float64 {
	p := func(i int, def float64) float64 {
		if i < len(params) {
			return float64(params[i])
		}
		return def
	}
	switch name {
	case "Relu":
		return math.Max(v, 0)
	case "Sigmoid":
		return sigmoid(v)
	case "Tanh":
		return math.Tanh(v)
	case "LeakyRelu":
		return leaky(v, p(0, 0.01))
	case "Clip":
		return math.Min(math.Max(v, p(0, math.Inf(-1))), p(1, math.Inf(1)))
	case "HardSigmoid":
		return math.Max(0, math.Min(1, p(0, 0.2)*v+p(1, 0.5)))
	case "HardSwish":
		return hardSwish(v)
	case "Swish":
		return v * sigmoid(p(0, 1)*v)
	}
	return v
}

func hardSwish(v float64) float64 { return v * math.Max(0, math.Min(1, v/6+0.5)) }

// conv is a direct N-D convolution with groups, pads, strides and dilations (auto_pad NOTSET
// or VALID); FusedConv applies its activation afterwards.
func conv(n *graph.Node, args []*Value) (*Value, error) {
	x, w := args[0], args[1]
	b := arg(args, 2)
	r := len(x.Dims)
	ns := r - 2
	if ns < 1 || len(w.Dims) != r {
		return nil, fmt.Errorf("Conv ranks %v %v", x.Dims, w.Dims)
	}
	group := int(n.AttrInt("group", 1))
	get := func(name string, cnt int, def int64) []int64 {
		v := n.AttrInts(name)
		if v == nil {
			v = make([]int64, cnt)
			for i := range v {
				v[i] = def
			}
		}
		return v
	}
	st, dil, pads := get("strides", ns, 1), get("dilations", ns, 1), get("pads", 2*ns, 0)
	kernel := w.Dims[2:]
	pads = autoPads(n.AttrString("auto_pad", "NOTSET"), x.Dims[2:], kernel, st, dil, pads)
	outDims := []int64{x.Dims[0], w.Dims[0]}
	for i := 0; i < ns; i++ {
		eff := (kernel[i]-1)*dil[i] + 1
		outDims = append(outDims, (x.Dims[2+i]+pads[i]+pads[i+ns]-eff)/st[i]+1)
	}
	out := newValue(x.DType, outDims)
	cinG := int(w.Dims[1])
	coutG := int(w.Dims[0]) / group
	os := strides(outDims)
	xs := strides(x.Dims)
	ws := strides(w.Dims)
	kn := numel(kernel)
	ks := strides(kernel)
	pos := make([]int64, ns)
	for i := range out.Data {
		nb := i / os[0]
		oc := (i / os[1]) % int(outDims[1])
		g := oc / coutG
		s := 0.0
		if b != nil {
			s = b.Data[oc]
		}
		for ic := 0; ic < cinG; ic++ {
			c := g*cinG + ic
			for k := 0; k < kn; k++ {
				ok := true
				off := nb*xs[0] + c*xs[1]
				for d := 0; d < ns; d++ {
					o := int64((i / os[2+d]) % int(outDims[2+d]))
					kd := int64((k / ks[d]) % int(kernel[d]))
					pos[d] = o*st[d] - pads[d] + kd*dil[d]
					if pos[d] < 0 || pos[d] >= x.Dims[2+d] {
						ok = false
						break
					}
					off += int(pos[d]) * xs[2+d]
				}
				if ok {
					s += x.Data[off] * w.Data[oc*ws[0]+ic*ws[1]+k]
				}
			}
		}
		if act := n.AttrString("activation", ""); act != "" {
			s = activation(act, n.AttrFloats("activation_params"), round(x.DType, s))
		}
		if n.OpType == "FusedConv" {
			s = float64(n.AttrFloat("output_scale", 1))*round(x.DType, s) + float64(n.AttrFloat("output_shift", 0))
		}
		out.Data[i] = s
	}
	return out.finish(), nil
}

// attention computes softmax(Q Kᵀ scale ⊕ mask) V for Loom's fused Attention (see
// graph.LoomDomain for the mask modes).
func attention(n *graph.Node, args []*Value) (*Value, error) {
	q, k, v := args[0], args[1], args[2]
	mask := arg(args, 3)
	var err error
	if n.AttrInt("k_transposed", 0) == 0 {
		perm := make([]int64, len(k.Dims))
		for i := range perm {
			perm[i] = int64(i)
		}
		perm[len(perm)-1], perm[len(perm)-2] = perm[len(perm)-2], perm[len(perm)-1]
		if k, err = transpose(k, perm); err != nil {
			return nil, err
		}
	}
	s, err := matmul(q, k)
	if err != nil {
		return nil, err
	}
	scale := float64(n.AttrFloat("scale", 1))
	for i := range s.Data {
		s.Data[i] = round(s.DType, s.Data[i]*scale)
	}
	if mask != nil {
		fill := float64(n.AttrFloat("mask_fill", float32(math.Inf(-1))))
		mode := n.AttrInt("mask_mode", 1)
		var fn func(x []float64) float64
		switch mode {
		case 1:
			fn = func(x []float64) float64 { return x[0] + x[1] }
		case 2, 3:
			keepWhen := mode == 2
			fn = func(x []float64) float64 {
				if (x[1] != 0) == keepWhen {
					return x[0]
				}
				return fill
			}
		default:
			return nil, fmt.Errorf("mask_mode %d", mode)
		}
		if s, err = elementwise(s.DType, []*Value{s, mask}, fn); err != nil {
			return nil, err
		}
	}
	axis := int64(-1)
	sm := &graph.Node{OpType: "Softmax", Attrs: []*graph.Attribute{graph.IntAttr("axis", axis)}}
	p, err := softmax(sm, 13, s)
	if err != nil {
		return nil, err
	}
	return matmul(p, v)
}

// pool is MaxPool or AveragePool over N spatial axes (auto_pad NOTSET or VALID, floor or ceil
// mode; AveragePool divides by the window cells inside the input unless count_include_pad).
func pool(n *graph.Node, x *Value) (*Value, error) {
	r := len(x.Dims)
	ns := r - 2
	kernel := n.AttrInts("kernel_shape")
	if ns < 1 || len(kernel) != ns {
		return nil, fmt.Errorf("pool kernel %v for input %v", kernel, x.Dims)
	}
	get := func(name string, cnt int, def int64) []int64 {
		if v := n.AttrInts(name); v != nil {
			return v
		}
		v := make([]int64, cnt)
		for i := range v {
			v[i] = def
		}
		return v
	}
	st, dil, pads := get("strides", ns, 1), get("dilations", ns, 1), get("pads", 2*ns, 0)
	pads = autoPads(n.AttrString("auto_pad", "NOTSET"), x.Dims[2:], kernel, st, dil, pads)
	ceil := n.AttrInt("ceil_mode", 0) != 0
	includePad := n.AttrInt("count_include_pad", 0) != 0
	outDims := append([]int64{}, x.Dims[:2]...)
	for i := 0; i < ns; i++ {
		eff := (kernel[i]-1)*dil[i] + 1
		span := x.Dims[2+i] + pads[i] + pads[i+ns] - eff
		o := span/st[i] + 1
		if ceil {
			o = (span+st[i]-1)/st[i] + 1
			if (o-1)*st[i] >= x.Dims[2+i]+pads[i] {
				o--
			}
		}
		outDims = append(outDims, o)
	}
	out := newValue(x.DType, outDims)
	os, xs, ks := strides(outDims), strides(x.Dims), strides(kernel)
	kn := numel(kernel)
	isMax := n.OpType == "MaxPool"
	for i := range out.Data {
		base := (i / os[1]) * xs[1] // batch*channels plane
		acc, cnt := 0.0, 0
		if isMax {
			acc = math.Inf(-1)
		}
		padded := 0
		for k := 0; k < kn; k++ {
			off, inside, inPadded := base, true, true
			for d := 0; d < ns; d++ {
				o := int64((i / os[2+d]) % int(outDims[2+d]))
				p := o*st[d] - pads[d] + int64((k/ks[d])%int(kernel[d]))*dil[d]
				if p < -pads[d] || p >= x.Dims[2+d]+pads[d+ns] {
					inPadded = false
				}
				if p < 0 || p >= x.Dims[2+d] {
					inside = false
					continue
				}
				off += int(p) * xs[2+d]
			}
			if inPadded {
				padded++
			}
			if !inside {
				continue
			}
			v := x.Data[off]
			if isMax {
				acc = math.Max(acc, v)
			} else {
				acc += v
			}
			cnt++
		}
		if !isMax {
			if includePad {
				cnt = padded
			}
			if cnt > 0 {
				acc /= float64(cnt)
			}
		}
		out.Data[i] = acc
	}
	return out.finish(), nil
}

// autoPads turns auto_pad into explicit pads: SAME_* pads so that out = ceil(in/stride), the
// odd cell at the end (UPPER) or the beginning (LOWER); VALID pads nothing.
func autoPads(mode string, in, kernel, st, dil, pads []int64) []int64 {
	ns := len(in)
	switch mode {
	case "VALID":
		return make([]int64, 2*ns)
	case "SAME_UPPER", "SAME_LOWER":
		out := make([]int64, 2*ns)
		for i := 0; i < ns; i++ {
			o := (in[i] + st[i] - 1) / st[i]
			total := max(0, (o-1)*st[i]+(kernel[i]-1)*dil[i]+1-in[i])
			small := total / 2
			if mode == "SAME_UPPER" {
				out[i], out[i+ns] = small, total-small
			} else {
				out[i], out[i+ns] = total-small, small
			}
		}
		return out
	}
	return pads
}

// intRange is the range of an integer element type; ok is false for the others.
func intRange(dt graph.DataType) (lo, hi float64, ok bool) { return dt.IntRange() }
