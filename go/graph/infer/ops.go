package infer

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
)

type inferFunc func(c *inferNode) error

var inferFuncs map[string]inferFunc

var inferMLFuncs = map[string]inferFunc{}

// inferMSFuncs holds the shape rules of the com.microsoft (ONNX Runtime contrib) operators, by
// op type; each op's file adds its own in an init.
var inferMSFuncs = map[string]inferFunc{}

func init() {
	inferFuncs = map[string]inferFunc{}
	for _, op := range []string{"Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Celu", "Cos",
		"Cosh", "Elu", "Erf", "Exp", "Floor", "HardSigmoid", "HardSwish", "Hardmax", "LeakyRelu", "Log",
		"LogSoftmax", "Neg", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softmax",
		"Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Shrink", "Mish", "Gelu", "LRN",
		"MeanVarianceNormalization", "InstanceNormalization", "BitwiseNot", "Clip", "CumSum", "Trilu",
		"ReverseSequence", "LpNormalization", "GroupNormalization", "RMSNormalization", "RotaryEmbedding",
		"Scatter", "ScatterElements", "ScatterND", "PRelu"} {
		inferFuncs[op] = inferSame
	}
	for _, op := range []string{"Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr",
		"BitwiseXor", "Max", "Min", "Mean", "Sum"} {
		inferFuncs[op] = inferBroadcast(graph.Undefined)
	}
	for _, op := range []string{"And", "Or", "Xor", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"} {
		inferFuncs[op] = inferBroadcast(graph.Bool)
	}
	for _, op := range []string{"IsInf", "IsNaN"} {
		inferFuncs[op] = inferSameAs(graph.Bool)
	}
	for op, fn := range map[string]inferFunc{
		"Identity": inferIdentity, "Dropout": inferDropout, "Not": inferNot, "Where": inferWhere,
		"Cast": inferCast, "CastLike": inferCastLike, "Reshape": inferReshape, "Flatten": inferFlatten,
		"Squeeze": inferSqueeze, "Unsqueeze": inferUnsqueeze, "Transpose": inferTranspose, "Concat": inferConcat,
		"Split": inferSplit, "Slice": inferSlice, "Gather": inferGather, "GatherElements": inferGatherElements,
		"GatherND": inferGatherND, "Expand": inferExpand, "Tile": inferTile, "Pad": inferPad, "Shape": inferShapeOp,
		"Size": inferSize, "ConstantOfShape": inferConstantOfShape, "Constant": inferConstant, "Range": inferRange,
		"OneHot": inferOneHot, "EyeLike": inferEyeLike, "Compress": inferCompress, "NonZero": inferNonZero,
		"TopK": inferTopK, "ArgMax": inferArgReduce, "ArgMin": inferArgReduce, "DepthToSpace": inferDepthToSpace,
		"SpaceToDepth": inferSpaceToDepth, "Resize": inferResize, "Upsample": inferResize, "MatMul": inferMatMul,
		"MatMulInteger": inferMatMul, "QLinearMatMul": inferQLinearMatMul, "Gemm": inferGemm,
		"BatchNormalization": inferBatchNorm, "LayerNormalization": inferLayerNorm,
		"QuantizeLinear": inferQuantize, "DequantizeLinear": inferDequantize,
		"DynamicQuantizeLinear": inferDynamicQuantize, "NonMaxSuppression": inferNMS, "Det": inferDet,
		"Unique": inferUnique, "Einsum": inferEinsum, "Optional": inferOptional,
		"OptionalGetElement": inferOptionalGet, "OptionalHasElement": inferOptionalHas,
		"SequenceConstruct": inferSeqConstruct, "SequenceEmpty": inferSeqEmpty, "SequenceInsert": inferSeqInsert,
		"SequenceAt": inferSeqAt, "SequenceLength": inferSeqLength, "SequenceErase": inferIdentity,
		"ConcatFromSequence": inferConcatFromSeq, "SplitToSequence": inferSplitToSeq,
		"RandomUniformLike": inferRandomLike, "RandomNormalLike": inferRandomLike, "Bernoulli": inferRandomLike,
		"RandomUniform": inferRandom, "RandomNormal": inferRandom, "Multinomial": inferMultinomial,
		"BlackmanWindow": inferWindow, "HammingWindow": inferWindow, "HannWindow": inferWindow,
		"MelWeightMatrix": inferMelWeight, "TfIdfVectorizer": inferTfIdf, "StringNormalizer": inferStringNormalizer,
		"NegativeLogLikelihoodLoss": inferNLLLoss, "SoftmaxCrossEntropyLoss": inferSCELoss,
		"Adagrad": inferOptimizer(3, []int{0, 2}), "Momentum": inferOptimizer(3, []int{0, 2}),
		"Adam": inferOptimizer(4, []int{0, 2, 3}),
	} {
		inferFuncs[op] = fn
	}
	for op, fn := range map[string]inferFunc{
		"Conv": inferConv, "ConvInteger": inferConv, "QLinearConv": inferConv, "DeformConv": inferConv,
		"ConvTranspose": inferConvTranspose, "AveragePool": inferPool, "MaxPool": inferPool, "LpPool": inferPool,
		"GlobalAveragePool": inferGlobalPool, "GlobalMaxPool": inferGlobalPool, "GlobalLpPool": inferGlobalPool,
		"MaxUnpool": inferMaxUnpool, "MaxRoiPool": inferRoiPool, "RoiAlign": inferRoiPool,
		"LSTM": inferRNN, "GRU": inferRNN, "RNN": inferRNN, "DFT": inferDFT, "STFT": inferSTFT,
		"GridSample": inferGridSample, "Col2Im": inferCol2Im, "CenterCropPad": inferCenterCropPad,
		"LinearAttention": inferLinearAttention, "CausalConvWithState": inferCausalConvWithState,
		"AffineGrid": inferAffineGrid, "Attention": inferAttention,
		"ReduceL1": inferReduce, "ReduceL2": inferReduce, "ReduceLogSum": inferReduce, "ReduceLogSumExp": inferReduce,
		"ReduceMax": inferReduce, "ReduceMean": inferReduce, "ReduceMin": inferReduce, "ReduceProd": inferReduce,
		"ReduceSum": inferReduce, "ReduceSumSquare": inferReduce,
		"If": inferIf, "Loop": inferLoop, "Scan": inferScan, "SequenceMap": inferSequenceMap,
	} {
		inferFuncs[op] = fn
	}
}

func tensorOut(elem graph.DataType, s graph.Shape, ranked bool) graph.Type {
	if !ranked {
		return graph.UnrankedTensor(elem)
	}
	return graph.TensorType(elem, s)
}

// inferSame gives output 0 the type of input 0.
func inferSame(c *inferNode) error { return c.out(0, c.in(0)) }

func inferSameAs(elem graph.DataType) inferFunc {
	return func(c *inferNode) error {
		t := c.in(0).Clone()
		if t.Kind == graph.KindUnknown {
			t = graph.Type{Kind: graph.KindTensor}
		}
		t.Elem = elem
		return c.out(0, t)
	}
}

func inferIdentity(c *inferNode) error {
	if d, ok := c.data(0); ok {
		c.outData(0, d)
	}
	if t := c.constant(0); t != nil {
		c.s.consts[c.n.Outputs[0]] = t
	}
	return c.out(0, c.in(0))
}

// inferNot also tracks known boolean contents, which steer If conditions.
func inferNot(c *inferNode) error {
	if d, ok := c.data(0); ok {
		out := symData{scalar: d.scalar}
		for _, v := range d.vals {
			if !v.known {
				return c.out(0, c.in(0))
			}
			out.vals = append(out.vals, knownInt(boolInt(v.v == 0)))
		}
		c.outData(0, out)
	}
	return c.out(0, c.in(0))
}

func inferDropout(c *inferNode) error {
	if err := c.out(0, c.in(0)); err != nil {
		return err
	}
	t := c.in(0).Clone()
	t.Elem = graph.Bool
	return c.out(1, t)
}

func inferBroadcast(outElem graph.DataType) inferFunc {
	return func(c *inferNode) error {
		elem := outElem
		var shapes []graph.Shape
		ranked := true
		for i := 0; i < c.numIn(); i++ {
			t := c.in(i)
			if elem == graph.Undefined {
				elem = t.Elem
			}
			if !t.Ranked || t.Kind != graph.KindTensor {
				ranked = false
				continue
			}
			shapes = append(shapes, t.Shape)
		}
		if c.n.OpType == "PRelu" {
			ranked = false
		}
		var s graph.Shape
		if ranked {
			var err error
			if s, err = broadcastShapes(shapes...); err != nil {
				return err
			}
		}
		c.propagateArith()
		return c.out(0, tensorOut(elem, s, ranked))
	}
}

// propagateArith tracks integer Add/Sub/Mul/Div over shape-derived values.
func (c *inferNode) propagateArith() {
	op := map[string]string{"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Equal": "==", "Less": "<", "Greater": ">"}[c.n.OpType]
	if op == "" || c.numIn() != 2 {
		return
	}
	a, okA := c.data(0)
	b, okB := c.data(1)
	if !okA || !okB {
		return
	}
	n := len(a.vals)
	if len(b.vals) > n {
		n = len(b.vals)
	}
	if (len(a.vals) != n && len(a.vals) != 1) || (len(b.vals) != n && len(b.vals) != 1) {
		return
	}
	out := symData{scalar: a.scalar && b.scalar}
	for i := 0; i < n; i++ {
		x, y := a.vals[0], b.vals[0]
		if len(a.vals) > 1 {
			x = a.vals[i]
		}
		if len(b.vals) > 1 {
			y = b.vals[i]
		}
		out.vals = append(out.vals, symArith(op, x, y))
	}
	c.outData(0, out)
}

func inferWhere(c *inferNode) error {
	var shapes []graph.Shape
	for i := 0; i < 3; i++ {
		s, ok := c.shape(i)
		if !ok {
			return c.out(0, graph.UnrankedTensor(c.elem(1)))
		}
		shapes = append(shapes, s)
	}
	s, err := broadcastShapes(shapes...)
	if err != nil {
		return err
	}
	return c.out(0, graph.TensorType(c.elem(1), s))
}

func inferCast(c *inferNode) error {
	t := c.in(0).Clone()
	if t.Kind == graph.KindUnknown {
		t.Kind = graph.KindTensor
	}
	to := graph.DataType(c.n.AttrInt("to", 0))
	if !to.Valid() {
		return fmt.Errorf("attribute to=%d is not an element type", to)
	}
	t.Elem = to
	if d, ok := c.data(0); ok && to == graph.Bool {
		out := symData{scalar: d.scalar}
		for _, v := range d.vals {
			if !v.known {
				return c.out(0, t)
			}
			out.vals = append(out.vals, knownInt(boolInt(v.v != 0)))
		}
		c.outData(0, out)
	} else if d, ok := c.data(0); ok && to.IsInteger() {
		c.outData(0, d)
	} else if k := c.constant(0); k != nil && to.IsInteger() && len(k.Dims) <= 1 && k.NumElements() <= maxTrackedElements {
		// Small float constants cast to integers (pads, sizes) become tracked integers.
		if vals, err := k.Float64s(); err == nil {
			d := symData{scalar: len(k.Dims) == 0}
			for _, v := range vals {
				if math.IsNaN(v) || math.Abs(v) > 1<<53 {
					return c.out(0, t)
				}
				d.vals = append(d.vals, knownInt(int64(v)))
			}
			c.outData(0, d)
		}
	}
	return c.out(0, t)
}

func inferCastLike(c *inferNode) error {
	t := c.in(0).Clone()
	if t.Kind == graph.KindUnknown {
		t.Kind = graph.KindTensor
	}
	t.Elem = c.elem(1)
	if d, ok := c.data(0); ok && t.Elem.IsInteger() {
		c.outData(0, d)
	}
	return c.out(0, t)
}

func inferReshape(c *inferNode) error {
	elem := c.elem(0)
	var target symData
	var ok bool
	if c.opset < 5 {
		target.vals = nil
		if sh := c.n.AttrInts("shape"); sh != nil {
			for _, v := range sh {
				target.vals = append(target.vals, knownInt(v))
			}
			ok = true
		}
	} else {
		target, ok = c.data(1)
	}
	if !ok {
		if s, ok := c.shape(1); ok && len(s) == 1 && s[0].Known() {
			if s[0].Value > int64(c.inf.lim.MaxRank) {
				return fmt.Errorf("shape input of %d entries gives a rank over the limit of %d", s[0].Value, c.inf.lim.MaxRank)
			}
			return c.out(0, graph.TensorType(elem, unknownDims(int(s[0].Value))))
		}
		return c.out(0, graph.UnrankedTensor(elem))
	}
	allowZero := c.n.AttrInt("allowzero", 0) != 0
	in, inRanked := c.shape(0)
	out := make(graph.Shape, len(target.vals))
	neg := -1
	for i, v := range target.vals {
		switch {
		case v.known && v.v == -1:
			if neg >= 0 {
				return fmt.Errorf("shape %v has more than one -1", target.vals)
			}
			neg = i
			out[i] = graph.UnknownDim()
		case v.known && v.v == 0 && !allowZero:
			if inRanked && i < len(in) {
				out[i] = in[i]
			} else if inRanked {
				return fmt.Errorf("shape entry %d is 0 but the input has rank %d", i, len(in))
			} else {
				out[i] = graph.UnknownDim()
			}
		case v.known && v.v < -1:
			return fmt.Errorf("shape entry %d is %d", i, v.v)
		default:
			out[i] = v.dim()
		}
	}
	if neg >= 0 && inRanked {
		out[neg] = reshapeInfer(in, out, neg)
	}
	if inRanked && neg < 0 {
		if a, b := in.NumElements(), out.NumElements(); a >= 0 && b >= 0 && a != b {
			return fmt.Errorf("cannot reshape %v (%d elements) to %v (%d elements)", in, a, out, b)
		}
	}
	if d, ok := c.data(0); ok && len(out) <= 1 {
		c.outData(0, symData{vals: d.vals, scalar: len(out) == 0})
	}
	return c.out(0, graph.TensorType(elem, out))
}

// reshapeInfer computes the -1 entry: the input's element count over the other entries',
// cancelling equal symbolic dimensions.
func reshapeInfer(in, out graph.Shape, neg int) graph.Dim {
	rest := append(graph.Shape{}, in...)
	var others graph.Shape
	for i, d := range out {
		if i == neg {
			continue
		}
		matched := false
		if !d.Known() && d.Param != "" {
			for j, r := range rest {
				if r.Same(d) {
					rest = append(rest[:j:j], rest[j+1:]...)
					matched = true
					break
				}
			}
		}
		if !matched {
			others = append(others, d)
		}
	}
	num := int64(1)
	var syms []graph.Dim
	for _, d := range rest {
		if d.Known() {
			num *= d.Value
		} else {
			syms = append(syms, d)
		}
	}
	den := int64(1)
	for _, d := range others {
		if !d.Known() {
			return graph.UnknownDim()
		}
		den *= d.Value
	}
	if den == 0 {
		return graph.UnknownDim()
	}
	if len(syms) == 0 {
		if num%den != 0 {
			return graph.UnknownDim()
		}
		return graph.DimOf(num / den)
	}
	if num%den == 0 {
		d := graph.DimOf(num / den)
		for _, s := range syms {
			d = dimMul(d, s)
		}
		return d
	}
	return graph.UnknownDim()
}

func inferFlatten(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(2)))
	}
	axis := c.n.AttrInt("axis", 1)
	if axis < 0 {
		axis += int64(len(in))
	}
	if axis < 0 || axis > int64(len(in)) {
		return fmt.Errorf("axis %d out of range for rank %d", c.n.AttrInt("axis", 1), len(in))
	}
	return c.out(0, graph.TensorType(c.elem(0), graph.Shape{dimsProduct(in[:axis]), dimsProduct(in[axis:])}))
}

// axesArg reads the axes of Squeeze, Unsqueeze and the reductions: an attribute before
// fromOpset, an optional input after.
func (c *inferNode) axesArg(fromOpset int64, input int) (axes []int64, given bool, known bool) {
	if c.opset < fromOpset {
		a := c.n.Attr("axes")
		if a == nil {
			return nil, false, true
		}
		return a.Ints, true, true
	}
	if !c.has(input) {
		return nil, false, true
	}
	v, ok := c.ints(input)
	return v, true, ok
}

func inferSqueeze(c *inferNode) error {
	in, ok := c.shape(0)
	axes, given, known := c.axesArg(13, 1)
	if !ok || !known {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	drop := map[int]bool{}
	// An empty axes list squeezes every dimension of size 1, as no list does: the session's
	// Squeeze (and ONNX Runtime's) reads it so, and inference must agree with the run.
	if given && len(axes) > 0 {
		for _, a := range axes {
			ax, err := graph.NormAxis(a, len(in))
			if err != nil {
				return err
			}
			if in[ax].Known() && in[ax].Value != 1 {
				return fmt.Errorf("cannot squeeze axis %d of size %d", ax, in[ax].Value)
			}
			drop[ax] = true
		}
	} else {
		for i, d := range in {
			if !d.Known() {
				return c.out(0, graph.UnrankedTensor(c.elem(0)))
			}
			if d.Value == 1 {
				drop[i] = true
			}
		}
	}
	var out graph.Shape
	for i, d := range in {
		if !drop[i] {
			out = append(out, d)
		}
	}
	if d, ok := c.data(0); ok {
		c.outData(0, symData{vals: d.vals, scalar: len(out) == 0})
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferUnsqueeze(c *inferNode) error {
	in, ok := c.shape(0)
	axes, _, known := c.axesArg(13, 1)
	if !ok || !known {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	rank := len(in) + len(axes)
	ins := map[int]bool{}
	for _, a := range axes {
		ax, err := graph.NormAxis(a, rank)
		if err != nil {
			return err
		}
		if ins[ax] {
			return fmt.Errorf("axis %d given twice", ax)
		}
		ins[ax] = true
	}
	out := make(graph.Shape, 0, rank)
	j := 0
	for i := 0; i < rank; i++ {
		if ins[i] {
			out = append(out, graph.DimOf(1))
		} else {
			out = append(out, in[j])
			j++
		}
	}
	if d, ok := c.data(0); ok && rank <= 1 {
		c.outData(0, symData{vals: d.vals})
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferTranspose(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	perm := c.n.AttrInts("perm")
	if perm == nil {
		for i := len(in) - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != len(in) {
		return fmt.Errorf("perm %v does not match rank %d", perm, len(in))
	}
	out := make(graph.Shape, len(in))
	seen := map[int]bool{}
	for i, p := range perm {
		ax, err := graph.NormAxis(p, len(in))
		if err != nil || seen[ax] {
			return fmt.Errorf("perm %v is not a permutation", perm)
		}
		seen[ax] = true
		out[i] = in[ax]
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferConcat(c *inferNode) error {
	elem := graph.Undefined
	var shapes []graph.Shape
	ranked := true
	for i := 0; i < c.numIn(); i++ {
		if elem == graph.Undefined {
			elem = c.elem(i)
		}
		s, ok := c.shape(i)
		if !ok {
			ranked = false
			continue
		}
		shapes = append(shapes, s)
	}
	if len(shapes) == 0 {
		return c.out(0, graph.UnrankedTensor(elem))
	}
	rank := len(shapes[0])
	ax, err := graph.NormAxis(c.n.AttrInt("axis", 0), rank)
	if err != nil {
		return err
	}
	out := shapes[0].Clone()
	for _, s := range shapes[1:] {
		if len(s) != rank {
			return fmt.Errorf("inputs have ranks %d and %d", rank, len(s))
		}
		for i := range s {
			if i == ax {
				out[i] = dimAdd(out[i], s[i])
				continue
			}
			if out[i].Known() && s[i].Known() && out[i].Value != s[i].Value {
				return fmt.Errorf("inputs differ in dimension %d: %d and %d", i, out[i].Value, s[i].Value)
			}
			if !out[i].Known() && s[i].Known() {
				out[i] = s[i]
			}
		}
	}
	if !ranked {
		out[ax] = graph.UnknownDim()
	}
	if rank == 1 {
		var vals []symInt
		all := true
		for i := 0; i < c.numIn(); i++ {
			d, ok := c.data(i)
			if !ok {
				all = false
				break
			}
			vals = append(vals, d.vals...)
		}
		if all {
			c.outData(0, symData{vals: vals})
		}
	}
	return c.out(0, graph.TensorType(elem, out))
}

func inferSplit(c *inferNode) error {
	in, ok := c.shape(0)
	nOut := len(c.n.Outputs)
	if !ok {
		for i := 0; i < nOut; i++ {
			if err := c.out(i, graph.UnrankedTensor(c.elem(0))); err != nil {
				return err
			}
		}
		return nil
	}
	ax, err := graph.NormAxis(c.n.AttrInt("axis", 0), len(in))
	if err != nil {
		return err
	}
	var split []int64
	splitKnown := true
	if c.opset < 13 {
		split = c.n.AttrInts("split")
		if split == nil && c.opset >= 2 && c.has(1) {
			split, splitKnown = c.ints(1)
		}
	} else if c.has(1) {
		split, splitKnown = c.ints(1)
	}
	sizes := make([]graph.Dim, nOut)
	switch {
	case !splitKnown:
		for i := range sizes {
			sizes[i] = graph.UnknownDim()
		}
	case split != nil:
		if len(split) != nOut {
			return fmt.Errorf("split %v has %d entries for %d outputs", split, len(split), nOut)
		}
		var sum int64
		for i, v := range split {
			if v < 0 {
				return fmt.Errorf("split %v has a negative entry", split)
			}
			sizes[i] = graph.DimOf(v)
			sum += v
		}
		if in[ax].Known() && sum != in[ax].Value {
			return fmt.Errorf("split %v sums to %d, axis %d has %d", split, sum, ax, in[ax].Value)
		}
	default:
		n := int64(nOut)
		if a := c.n.Attr("num_outputs"); a != nil {
			n = a.Int
		}
		if n <= 0 || n != int64(nOut) {
			return fmt.Errorf("num_outputs %d does not match %d outputs", n, nOut)
		}
		d := in[ax]
		for i := range sizes {
			switch {
			case !d.Known():
				sizes[i] = dimDiv(d, n, c.opset >= 18)
				if c.opset >= 18 && i == nOut-1 {
					sizes[i] = graph.UnknownDim()
				}
			case c.opset >= 18:
				chunk := (d.Value + n - 1) / n
				v := d.Value - chunk*int64(i)
				if v > chunk {
					v = chunk
				}
				if v < 0 {
					v = 0
				}
				sizes[i] = graph.DimOf(v)
			default:
				if d.Value%n != 0 {
					return fmt.Errorf("axis size %d does not split evenly in %d", d.Value, n)
				}
				sizes[i] = graph.DimOf(d.Value / n)
			}
		}
	}
	for i := 0; i < nOut; i++ {
		s := in.Clone()
		s[ax] = sizes[i]
		if err := c.out(i, graph.TensorType(c.elem(0), s)); err != nil {
			return err
		}
	}
	return nil
}

// sliceLen counts the elements a Slice takes from an axis of size dim, without overflowing
// for extreme starts, ends and steps.
func sliceLen(dim, start, end, step int64) int64 {
	if step > 1<<40 {
		step = 1 << 40
	}
	if step < -(1 << 40) {
		step = -(1 << 40)
	}
	s := graph.ClampSliceIndex(start, dim, step)
	e := graph.ClampSliceIndex(end, dim, step)
	if step > 0 && e > s {
		return (e-s-1)/step + 1
	}
	if step < 0 && s > e {
		return (s-e-1)/(-step) + 1
	}
	return 0
}

func inferSlice(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	var starts, ends, axes, steps []int64
	known := true
	if c.opset < 10 {
		starts, ends, axes = c.n.AttrInts("starts"), c.n.AttrInts("ends"), c.n.AttrInts("axes")
	} else {
		var ok1, ok2 bool
		starts, ok1 = c.ints(1)
		ends, ok2 = c.ints(2)
		known = ok1 && ok2
		if c.has(3) {
			var ok3 bool
			axes, ok3 = c.ints(3)
			if !ok3 {
				return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(in))))
			}
		}
		if c.has(4) {
			var ok4 bool
			steps, ok4 = c.ints(4)
			known = known && ok4
		}
	}
	if axes == nil {
		n := len(starts)
		if !known {
			if s, ok := c.shape(1); ok && len(s) == 1 && s[0].Known() {
				if s[0].Value > int64(len(in)) {
					return fmt.Errorf("%d starts for rank %d", s[0].Value, len(in))
				}
				n = int(s[0].Value)
			} else {
				return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(in))))
			}
		}
		for i := 0; i < n; i++ {
			axes = append(axes, int64(i))
		}
	}
	out := in.Clone()
	if !known {
		for _, a := range axes {
			ax, err := graph.NormAxis(a, len(in))
			if err != nil {
				return err
			}
			out[ax] = graph.UnknownDim()
		}
		return c.out(0, graph.TensorType(c.elem(0), out))
	}
	if len(starts) != len(axes) || len(ends) != len(axes) || (steps != nil && len(steps) != len(axes)) {
		return fmt.Errorf("starts %v, ends %v, axes %v and steps %v differ in length", starts, ends, axes, steps)
	}
	type span struct{ start, end, step int64 }
	spans := map[int]span{}
	for i, a := range axes {
		ax, err := graph.NormAxis(a, len(in))
		if err != nil {
			return err
		}
		step := int64(1)
		if steps != nil {
			step = steps[i]
		}
		if step == 0 {
			return fmt.Errorf("step 0 on axis %d", ax)
		}
		spans[ax] = span{starts[i], ends[i], step}
		d := in[ax]
		if d.Known() {
			out[ax] = graph.DimOf(sliceLen(d.Value, starts[i], ends[i], step))
		} else if step == 1 && starts[i] == 0 && ends[i] >= math.MaxInt32 {
			out[ax] = d
		} else if step == 1 && starts[i] >= 0 && ends[i] >= 0 && ends[i] < math.MaxInt32 && ends[i] >= starts[i] && false {
			out[ax] = graph.UnknownDim()
		} else {
			out[ax] = graph.UnknownDim()
		}
	}
	if d, ok := c.data(0); ok && len(in) == 1 {
		if sp, ok := spans[0]; ok {
			n := int64(len(d.vals))
			var vals []symInt
			s := graph.ClampSliceIndex(sp.start, n, sp.step)
			for k := int64(0); k < sliceLen(n, sp.start, sp.end, sp.step); k++ {
				vals = append(vals, d.vals[s+k*sp.step])
			}
			c.outData(0, symData{vals: vals})
		}
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferGather(c *inferNode) error {
	data, ok := c.shape(0)
	idx, ok2 := c.shape(1)
	if !ok || !ok2 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	ax, err := graph.NormAxis(c.n.AttrInt("axis", 0), len(data))
	if err != nil {
		return err
	}
	out := append(append(append(graph.Shape{}, data[:ax]...), idx...), data[ax+1:]...)
	if d, ok := c.data(0); ok && len(data) == 1 {
		if iv, ok := c.ints(1); ok {
			n := int64(len(d.vals))
			var vals []symInt
			for _, i := range iv {
				if i < 0 {
					i += n
				}
				if i < 0 || i >= n {
					return fmt.Errorf("index %d out of range for %d elements", i, n)
				}
				vals = append(vals, d.vals[i])
			}
			c.outData(0, symData{vals: vals, scalar: len(idx) == 0})
		}
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferGatherElements(c *inferNode) error {
	idx, ok := c.shape(1)
	return c.out(0, tensorOut(c.elem(0), idx, ok))
}

func inferGatherND(c *inferNode) error {
	data, ok := c.shape(0)
	idx, ok2 := c.shape(1)
	if !ok || !ok2 || len(idx) == 0 || !idx[len(idx)-1].Known() {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	b := int(c.n.AttrInt("batch_dims", 0))
	k := int(idx[len(idx)-1].Value)
	if b < 0 || b+k > len(data) || b >= len(idx) {
		return fmt.Errorf("indices %v with batch_dims %d do not fit data %v", idx, b, data)
	}
	out := append(append(graph.Shape{}, idx[:len(idx)-1]...), data[b+k:]...)
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferExpand(c *inferNode) error {
	in, ok := c.shape(0)
	target, ok2 := c.data(1)
	if !ok || !ok2 {
		if s, ok := c.shape(1); ok && len(s) == 1 && s[0].Known() && ok {
			if s[0].Value > int64(c.inf.lim.MaxRank) {
				return fmt.Errorf("shape input of %d entries gives a rank over the limit of %d", s[0].Value, c.inf.lim.MaxRank)
			}
			r := int(s[0].Value)
			if len(in) > r {
				r = len(in)
			}
			return c.out(0, graph.TensorType(c.elem(0), unknownDims(r)))
		}
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	ts := make(graph.Shape, len(target.vals))
	for i, v := range target.vals {
		ts[i] = v.dim()
	}
	out, err := broadcastShapes(in, ts)
	if err != nil {
		return err
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferTile(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	reps, ok := c.ints(1)
	if !ok {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(in))))
	}
	if len(reps) != len(in) {
		return fmt.Errorf("repeats %v do not match rank %d", reps, len(in))
	}
	out := make(graph.Shape, len(in))
	for i, d := range in {
		out[i] = dimMul(d, graph.DimOf(reps[i]))
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferPad(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	var pads []int64
	if c.opset < 11 {
		pads = c.n.AttrInts("pads")
		if pads == nil {
			pads = c.n.AttrInts("paddings")
		}
	} else {
		var ok bool
		if pads, ok = c.ints(1); !ok {
			return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(in))))
		}
	}
	axes := make([]int, len(in))
	for i := range axes {
		axes[i] = i
	}
	if c.opset >= 18 && c.has(3) {
		av, ok := c.ints(3)
		if !ok {
			return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(in))))
		}
		axes = axes[:0]
		for _, a := range av {
			ax, err := graph.NormAxis(a, len(in))
			if err != nil {
				return err
			}
			axes = append(axes, ax)
		}
	}
	if len(pads) != 2*len(axes) {
		return fmt.Errorf("pads %v do not fit %d axes", pads, len(axes))
	}
	out := in.Clone()
	for i, ax := range axes {
		d := in[ax]
		if d.Known() {
			v := d.Value + pads[i] + pads[i+len(axes)]
			if v < 0 {
				return fmt.Errorf("padding makes axis %d negative", ax)
			}
			out[ax] = graph.DimOf(v)
		} else {
			out[ax] = dimAddConst(d, pads[i]+pads[i+len(axes)])
		}
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferShapeOp(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.TensorType(graph.Int64, unknownDims(1)))
	}
	r := int64(len(in))
	start, end := c.n.AttrInt("start", 0), c.n.AttrInt("end", r)
	if start < 0 {
		start += r
	}
	if end < 0 {
		end += r
	}
	start = max(0, min(start, r))
	end = max(0, min(end, r))
	if end < start {
		end = start
	}
	var vals []symInt
	for _, d := range in[start:end] {
		vals = append(vals, symFromDim(d))
	}
	c.outData(0, symData{vals: vals})
	return c.out(0, graph.TensorType(graph.Int64, graph.ShapeOf(end-start)))
}

func inferSize(c *inferNode) error {
	if in, ok := c.shape(0); ok {
		p := dimsProduct(in)
		c.outData(0, symData{vals: []symInt{symFromDim(p)}, scalar: true})
	}
	return c.out(0, graph.TensorType(graph.Int64, graph.Shape{}))
}

func inferConstantOfShape(c *inferNode) error {
	elem := graph.Float
	if a := c.n.Attr("value"); a != nil && a.Tensor != nil {
		elem = a.Tensor.DType
	}
	d, ok := c.data(0)
	if !ok {
		if s, ok := c.shape(0); ok && len(s) == 1 && s[0].Known() {
			if s[0].Value > int64(c.inf.lim.MaxRank) {
				return fmt.Errorf("shape input of %d entries gives a rank over the limit of %d", s[0].Value, c.inf.lim.MaxRank)
			}
			return c.out(0, graph.TensorType(elem, unknownDims(int(s[0].Value))))
		}
		return c.out(0, graph.UnrankedTensor(elem))
	}
	out := make(graph.Shape, len(d.vals))
	for i, v := range d.vals {
		if v.known && v.v < 0 {
			return fmt.Errorf("negative dimension %d", v.v)
		}
		out[i] = v.dim()
	}
	if a := c.n.Attr("value"); elem == graph.Int64 && len(out) == 1 && out[0].Known() && out[0].Value <= maxTrackedElements && a != nil && a.Tensor != nil {
		if v, err := a.Tensor.Int64s(); err == nil && len(v) == 1 {
			vals := make([]symInt, out[0].Value)
			for i := range vals {
				vals[i] = knownInt(v[0])
			}
			c.outData(0, symData{vals: vals})
		}
	}
	return c.out(0, graph.TensorType(elem, out))
}

func inferConstant(c *inferNode) error {
	t, err := graph.ConstantValue(c.n)
	if err != nil {
		return err
	}
	if len(c.n.Outputs) > 0 && c.n.Outputs[0] != "" {
		c.s.consts[c.n.Outputs[0]] = t
		if d, ok := tensorSymData(t); ok {
			c.outData(0, d)
		}
	}
	return c.out(0, t.Type())
}

func inferRange(c *inferNode) error {
	elem := c.elem(0)
	st, lt, dt := c.constant(0), c.constant(1), c.constant(2)
	if st == nil || lt == nil || dt == nil {
		// Integer ranges over tracked (possibly symbolic) bounds with step 1.
		s, ok1 := c.data(0)
		l, ok2 := c.data(1)
		d, ok3 := c.ints(2)
		if ok1 && ok2 && ok3 && len(s.vals) == 1 && len(l.vals) == 1 && len(d) == 1 && d[0] == 1 {
			n := symArith("-", l.vals[0], s.vals[0])
			return c.out(0, graph.TensorType(elem, graph.Shape{n.dim()}))
		}
		return c.out(0, graph.TensorType(elem, unknownDims(1)))
	}
	s, e1 := st.Float64s()
	l, e2 := lt.Float64s()
	d, e3 := dt.Float64s()
	if e1 != nil || e2 != nil || e3 != nil || len(s) != 1 || len(l) != 1 || len(d) != 1 || d[0] == 0 {
		return fmt.Errorf("start, limit and delta must be non-zero-delta scalars")
	}
	n := math.Ceil((l[0] - s[0]) / d[0])
	if n < 0 || math.IsNaN(n) {
		n = 0
	}
	if n > float64(c.inf.lim.MaxElements) {
		return fmt.Errorf("range of %g elements over the limit", n)
	}
	if elem == graph.Int64 && n <= maxTrackedElements {
		vals := make([]symInt, int(n))
		for i := range vals {
			vals[i] = knownInt(int64(s[0]) + int64(i)*int64(d[0]))
		}
		c.outData(0, symData{vals: vals})
	}
	return c.out(0, graph.TensorType(elem, graph.ShapeOf(int64(n))))
}

func inferOneHot(c *inferNode) error {
	elem := c.elem(2)
	idx, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(elem))
	}
	depth := graph.UnknownDim()
	if t := c.constant(1); t != nil {
		if v, err := t.Float64s(); err == nil && len(v) == 1 {
			depth = graph.DimOf(int64(v[0]))
		}
	}
	ax, err := graph.NormAxis(c.n.AttrInt("axis", -1), len(idx)+1)
	if err != nil {
		return err
	}
	out := append(append(append(graph.Shape{}, idx[:ax]...), depth), idx[ax:]...)
	return c.out(0, graph.TensorType(elem, out))
}

func inferEyeLike(c *inferNode) error {
	t := c.in(0).Clone()
	if a := c.n.Attr("dtype"); a != nil {
		t.Elem = graph.DataType(a.Int)
	}
	if t.Kind == graph.KindUnknown {
		t.Kind = graph.KindTensor
	}
	return c.out(0, t)
}

func inferCompress(c *inferNode) error {
	in, ok := c.shape(0)
	a := c.n.Attr("axis")
	if a == nil || !ok {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(1)))
	}
	ax, err := graph.NormAxis(a.Int, len(in))
	if err != nil {
		return err
	}
	out := in.Clone()
	out[ax] = graph.UnknownDim()
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferNonZero(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.TensorType(graph.Int64, unknownDims(2)))
	}
	return c.out(0, graph.TensorType(graph.Int64, graph.Shape{graph.DimOf(int64(len(in))), graph.UnknownDim()}))
}

func inferTopK(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		if err := c.out(0, graph.UnrankedTensor(c.elem(0))); err != nil {
			return err
		}
		return c.out(1, graph.UnrankedTensor(graph.Int64))
	}
	ax, err := graph.NormAxis(c.n.AttrInt("axis", -1), len(in))
	if err != nil {
		return err
	}
	k := graph.UnknownDim()
	if c.opset < 10 {
		k = graph.DimOf(c.n.AttrInt("k", 0))
	} else if v, ok := c.ints(1); ok && len(v) == 1 {
		k = graph.DimOf(v[0])
	}
	out := in.Clone()
	out[ax] = k
	if err := c.out(0, graph.TensorType(c.elem(0), out)); err != nil {
		return err
	}
	return c.out(1, graph.TensorType(graph.Int64, out))
}

func reducedShape(in graph.Shape, axes []int64, keep bool) (graph.Shape, error) {
	red := map[int]bool{}
	if len(axes) == 0 {
		for i := range in {
			red[i] = true
		}
	}
	for _, a := range axes {
		ax, err := graph.NormAxis(a, len(in))
		if err != nil {
			return nil, err
		}
		red[ax] = true
	}
	out := graph.Shape{}
	for i, d := range in {
		switch {
		case !red[i]:
			out = append(out, d)
		case keep:
			out = append(out, graph.DimOf(1))
		}
	}
	return out, nil
}

func inferArgReduce(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(graph.Int64))
	}
	ax := c.n.AttrInt("axis", 0)
	out, err := reducedShape(in, []int64{ax}, c.n.AttrInt("keepdims", 1) != 0)
	if err != nil {
		return err
	}
	return c.out(0, graph.TensorType(graph.Int64, out))
}

func inferReduce(c *inferNode) error {
	in, ok := c.shape(0)
	fromOpset := int64(18)
	if c.n.OpType == "ReduceSum" {
		fromOpset = 13
	}
	axes, given, known := c.axesArg(fromOpset, 1)
	keep := c.n.AttrInt("keepdims", 1) != 0
	if !ok || !known {
		if ok && keep {
			return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(in))))
		}
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	if (!given || len(axes) == 0) && c.n.AttrInt("noop_with_empty_axes", 0) != 0 {
		return c.out(0, graph.TensorType(c.elem(0), in.Clone()))
	}
	out, err := reducedShape(in, axes, keep)
	if err != nil {
		return err
	}
	if c.n.OpType == "ReduceProd" && !keep && len(out) == 0 {
		if d, ok := c.data(0); ok {
			p := knownInt(1)
			for _, v := range d.vals {
				p = symArith("*", p, v)
			}
			c.outData(0, symData{vals: []symInt{p}, scalar: true})
		}
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferDepthToSpace(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok || len(in) != 4 {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(4)))
	}
	b := c.n.AttrInt("blocksize", 0)
	if b <= 0 {
		return fmt.Errorf("blocksize %d", b)
	}
	return c.out(0, graph.TensorType(c.elem(0), graph.Shape{in[0], dimDiv(in[1], b*b, false), dimMul(in[2], graph.DimOf(b)), dimMul(in[3], graph.DimOf(b))}))
}

func inferSpaceToDepth(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok || len(in) != 4 {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(4)))
	}
	b := c.n.AttrInt("blocksize", 0)
	if b <= 0 {
		return fmt.Errorf("blocksize %d", b)
	}
	return c.out(0, graph.TensorType(c.elem(0), graph.Shape{in[0], dimMul(in[1], graph.DimOf(b*b)), dimDiv(in[2], b, false), dimDiv(in[3], b, false)}))
}

func inferResize(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	var scales []float64
	var sizes []int64
	switch {
	case c.n.OpType == "Upsample" && c.opset < 9:
		for _, f := range c.n.AttrFloats("scales") {
			scales = append(scales, float64(f))
		}
	case c.n.OpType == "Upsample" || c.opset < 11:
		if t := c.constant(1); t != nil {
			scales, _ = t.Float64s()
		}
	default:
		if t := c.constant(2); t != nil && t.NumElements() > 0 {
			scales, _ = t.Float64s()
		}
		if c.has(3) {
			sizes, _ = c.ints(3)
		}
	}
	axes := make([]int, len(in))
	for i := range axes {
		axes[i] = i
	}
	if a := c.n.AttrInts("axes"); a != nil && c.n.OpType == "Resize" {
		axes = axes[:0]
		for _, v := range a {
			ax, err := graph.NormAxis(v, len(in))
			if err != nil {
				return err
			}
			axes = append(axes, ax)
		}
	}
	out := in.Clone()
	switch {
	case sizes != nil:
		if len(sizes) != len(axes) {
			return fmt.Errorf("sizes %v do not fit %d axes", sizes, len(axes))
		}
		policy := c.n.AttrString("keep_aspect_ratio_policy", "stretch")
		if policy != "stretch" {
			scale := math.Inf(1)
			if policy == "not_smaller" {
				scale = math.Inf(-1)
			}
			for i, ax := range axes {
				if !in[ax].Known() {
					return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(in))))
				}
				s := float64(sizes[i]) / float64(in[ax].Value)
				if (policy == "not_larger" && s < scale) || (policy == "not_smaller" && s > scale) {
					scale = s
				}
			}
			for _, ax := range axes {
				out[ax] = graph.DimOf(int64(math.Round(float64(in[ax].Value) * scale)))
			}
			break
		}
		for i, ax := range axes {
			out[ax] = graph.DimOf(sizes[i])
		}
	case scales != nil:
		if len(scales) != len(axes) {
			return fmt.Errorf("scales %v do not fit %d axes", scales, len(axes))
		}
		for i, ax := range axes {
			if in[ax].Known() {
				out[ax] = graph.DimOf(int64(math.Floor(float64(in[ax].Value) * scales[i])))
			} else if scales[i] != 1 {
				if scales[i] == math.Trunc(scales[i]) && scales[i] > 0 {
					out[ax] = dimMul(in[ax], graph.DimOf(int64(scales[i])))
				} else {
					out[ax] = graph.UnknownDim()
				}
			}
		}
	default:
		out = unknownDims(len(in))
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func matmulShape(a, b graph.Shape) (graph.Shape, error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("operands must have rank 1 or more, got %v and %v", a, b)
	}
	aa, bb := a, b
	if len(a) == 1 {
		aa = graph.Shape{graph.DimOf(1), a[0]}
	}
	if len(b) == 1 {
		bb = graph.Shape{b[0], graph.DimOf(1)}
	}
	k1, k2 := aa[len(aa)-1], bb[len(bb)-2]
	if k1.Known() && k2.Known() && k1.Value != k2.Value {
		return nil, fmt.Errorf("inner dimensions differ: A %v, B %v", a, b)
	}
	batch, err := broadcastShapes(aa[:len(aa)-2], bb[:len(bb)-2])
	if err != nil {
		return nil, err
	}
	out := append(batch, aa[len(aa)-2], bb[len(bb)-1])
	if len(a) == 1 {
		out = append(out[:len(out)-2], out[len(out)-1])
	}
	if len(b) == 1 {
		out = out[:len(out)-1]
	}
	return out, nil
}

func inferMatMul(c *inferNode) error {
	elem := c.elem(0)
	if c.n.OpType == "MatMulInteger" {
		elem = graph.Int32
	}
	a, ok := c.shape(0)
	b, ok2 := c.shape(1)
	if !ok || !ok2 {
		return c.out(0, graph.UnrankedTensor(elem))
	}
	out, err := matmulShape(a, b)
	if err != nil {
		return err
	}
	return c.out(0, graph.TensorType(elem, out))
}

func inferQLinearMatMul(c *inferNode) error {
	a, ok := c.shape(0)
	b, ok2 := c.shape(3)
	if !ok || !ok2 {
		return c.out(0, graph.UnrankedTensor(c.elem(7)))
	}
	out, err := matmulShape(a, b)
	if err != nil {
		return err
	}
	return c.out(0, graph.TensorType(c.elem(7), out))
}

func inferGemm(c *inferNode) error {
	a, ok := c.shape(0)
	b, ok2 := c.shape(1)
	if !ok || !ok2 || len(a) != 2 || len(b) != 2 {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(2)))
	}
	m, k1 := a[0], a[1]
	if c.n.AttrInt("transA", 0) != 0 {
		m, k1 = a[1], a[0]
	}
	k2, n := b[0], b[1]
	if c.n.AttrInt("transB", 0) != 0 {
		k2, n = b[1], b[0]
	}
	if k1.Known() && k2.Known() && k1.Value != k2.Value {
		return fmt.Errorf("inner dimensions differ: %v and %v", k1, k2)
	}
	return c.out(0, graph.TensorType(c.elem(0), graph.Shape{m, n}))
}

func inferBatchNorm(c *inferNode) error {
	if err := c.out(0, c.in(0)); err != nil {
		return err
	}
	for i := 1; i < len(c.n.Outputs); i++ {
		t := c.in(3)
		if c.opset < 9 && i >= 3 {
			t = c.in(1)
		}
		if err := c.out(i, t); err != nil {
			return err
		}
	}
	return nil
}

func inferLayerNorm(c *inferNode) error {
	if err := c.out(0, c.in(0)); err != nil {
		return err
	}
	stash := graph.DataType(c.n.AttrInt("stash_type", 1))
	in, ok := c.shape(0)
	if !ok {
		for i := 1; i < 3; i++ {
			if err := c.out(i, graph.UnrankedTensor(stash)); err != nil {
				return err
			}
		}
		return nil
	}
	ax, err := graph.NormAxis(c.n.AttrInt("axis", -1), len(in))
	if err != nil {
		return err
	}
	s := in.Clone()
	for i := ax; i < len(s); i++ {
		s[i] = graph.DimOf(1)
	}
	for i := 1; i < 3; i++ {
		if err := c.out(i, graph.TensorType(stash, s)); err != nil {
			return err
		}
	}
	return nil
}

func inferQuantize(c *inferNode) error {
	elem := graph.Uint8
	if c.has(2) {
		elem = c.elem(2)
	}
	if a := c.n.Attr("output_dtype"); a != nil && a.Int != 0 {
		elem = graph.DataType(a.Int)
	}
	t := c.in(0).Clone()
	t.Kind, t.Elem = graph.KindTensor, elem
	return c.out(0, t)
}

func inferDequantize(c *inferNode) error {
	elem := c.elem(1)
	if elem == graph.Undefined {
		elem = graph.Float
	}
	if a := c.n.Attr("output_dtype"); a != nil && a.Int != 0 {
		elem = graph.DataType(a.Int)
	}
	t := c.in(0).Clone()
	t.Kind, t.Elem = graph.KindTensor, elem
	return c.out(0, t)
}

func inferDynamicQuantize(c *inferNode) error {
	t := c.in(0).Clone()
	t.Kind, t.Elem = graph.KindTensor, graph.Uint8
	if err := c.out(0, t); err != nil {
		return err
	}
	if err := c.out(1, graph.TensorType(graph.Float, graph.Shape{})); err != nil {
		return err
	}
	return c.out(2, graph.TensorType(graph.Uint8, graph.Shape{}))
}

func inferNMS(c *inferNode) error {
	return c.out(0, graph.TensorType(graph.Int64, graph.Shape{graph.UnknownDim(), graph.DimOf(3)}))
}

func inferDet(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok || len(in) < 2 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	return c.out(0, graph.TensorType(c.elem(0), in[:len(in)-2].Clone()))
}

func inferUnique(c *inferNode) error {
	in, ok := c.shape(0)
	a := c.n.Attr("axis")
	y := graph.TensorType(c.elem(0), unknownDims(1))
	inv := graph.TensorType(graph.Int64, unknownDims(1))
	if a != nil && ok {
		ax, err := graph.NormAxis(a.Int, len(in))
		if err != nil {
			return err
		}
		s := in.Clone()
		s[ax] = graph.UnknownDim()
		y = graph.TensorType(c.elem(0), s)
		inv = graph.TensorType(graph.Int64, graph.Shape{in[ax]})
	} else if ok {
		inv = graph.TensorType(graph.Int64, graph.Shape{dimsProduct(in)})
	}
	for i, t := range []graph.Type{y, graph.TensorType(graph.Int64, unknownDims(1)), inv, graph.TensorType(graph.Int64, unknownDims(1))} {
		if err := c.out(i, t); err != nil {
			return err
		}
	}
	return nil
}

func inferOptional(c *inferNode) error {
	var inner graph.Type
	if c.has(0) {
		inner = c.in(0).Clone()
	} else if a := c.n.Attr("type"); a != nil && a.TypeProto != nil {
		inner = a.TypeProto.Clone()
	}
	return c.out(0, graph.Type{Kind: graph.KindOptional, Inner: &inner})
}

func inferOptionalGet(c *inferNode) error {
	t := c.in(0)
	if t.Kind == graph.KindOptional {
		if t.Inner == nil {
			return c.out(0, graph.Type{})
		}
		return c.out(0, *t.Inner)
	}
	return c.out(0, t)
}

func inferOptionalHas(c *inferNode) error {
	return c.out(0, graph.TensorType(graph.Bool, graph.Shape{}))
}

func seqOf(t graph.Type) graph.Type { return graph.Type{Kind: graph.KindSequence, Inner: &t} }

func inferSeqConstruct(c *inferNode) error {
	var elem graph.Type
	for i := 0; i < c.numIn(); i++ {
		if i == 0 {
			elem = c.in(0).Clone()
		} else {
			elem = unifyTypes(elem, c.in(i))
		}
	}
	return c.out(0, seqOf(elem))
}

func inferSeqEmpty(c *inferNode) error {
	elem := graph.DataType(c.n.AttrInt("dtype", int64(graph.Float)))
	return c.out(0, seqOf(graph.UnrankedTensor(elem)))
}

func inferSeqInsert(c *inferNode) error {
	s := c.in(0)
	if s.Kind != graph.KindSequence || s.Inner == nil {
		return c.out(0, seqOf(c.in(1)))
	}
	return c.out(0, seqOf(unifyTypes(*s.Inner, c.in(1))))
}

func inferSeqAt(c *inferNode) error {
	s := c.in(0)
	if s.Kind != graph.KindSequence || s.Inner == nil {
		return c.out(0, graph.Type{})
	}
	return c.out(0, *s.Inner)
}

func inferSeqLength(c *inferNode) error {
	return c.out(0, graph.TensorType(graph.Int64, graph.Shape{}))
}

func inferConcatFromSeq(c *inferNode) error {
	s := c.in(0)
	if s.Kind != graph.KindSequence || s.Inner == nil || !s.Inner.Ranked {
		elem := graph.Undefined
		if s.Inner != nil {
			elem = s.Inner.Elem
		}
		return c.out(0, graph.UnrankedTensor(elem))
	}
	in := s.Inner.Shape
	newAxis := c.n.AttrInt("new_axis", 0) != 0
	rank := len(in)
	if newAxis {
		rank++
	}
	ax, err := graph.NormAxis(c.n.AttrInt("axis", 0), rank)
	if err != nil {
		return err
	}
	var out graph.Shape
	if newAxis {
		out = append(append(append(graph.Shape{}, in[:ax]...), graph.UnknownDim()), in[ax:]...)
	} else {
		out = in.Clone()
		out[ax] = graph.UnknownDim()
	}
	return c.out(0, graph.TensorType(s.Inner.Elem, out))
}

func inferSplitToSeq(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, seqOf(graph.UnrankedTensor(c.elem(0))))
	}
	ax, err := graph.NormAxis(c.n.AttrInt("axis", 0), len(in))
	if err != nil {
		return err
	}
	out := in.Clone()
	if !c.has(1) {
		if c.n.AttrInt("keepdims", 1) == 0 {
			out = append(out[:ax:ax], in[ax+1:]...)
		} else {
			out[ax] = graph.DimOf(1)
		}
	} else if s, ok := c.shape(1); ok && len(s) == 0 {
		if v, ok := c.ints(1); ok && len(v) == 1 && in[ax].Known() && v[0] > 0 && in[ax].Value%v[0] == 0 {
			out[ax] = graph.DimOf(v[0])
		} else {
			out[ax] = graph.UnknownDim()
		}
	} else {
		out[ax] = graph.UnknownDim()
	}
	return c.out(0, seqOf(graph.TensorType(c.elem(0), out)))
}

func inferRandomLike(c *inferNode) error {
	t := c.in(0).Clone()
	if t.Kind == graph.KindUnknown {
		t.Kind = graph.KindTensor
	}
	if a := c.n.Attr("dtype"); a != nil {
		t.Elem = graph.DataType(a.Int)
	}
	return c.out(0, t)
}

func inferRandom(c *inferNode) error {
	elem := graph.DataType(c.n.AttrInt("dtype", int64(graph.Float)))
	s := c.n.AttrInts("shape")
	return c.out(0, graph.TensorType(elem, graph.ShapeOf(s...)))
}

func inferMultinomial(c *inferNode) error {
	in, ok := c.shape(0)
	elem := graph.DataType(c.n.AttrInt("dtype", int64(graph.Int32)))
	if !ok || len(in) != 2 {
		return c.out(0, graph.TensorType(elem, unknownDims(2)))
	}
	return c.out(0, graph.TensorType(elem, graph.Shape{in[0], graph.DimOf(c.n.AttrInt("sample_size", 1))}))
}

func inferWindow(c *inferNode) error {
	elem := graph.DataType(c.n.AttrInt("output_datatype", int64(graph.Float)))
	size := graph.UnknownDim()
	if v, ok := c.ints(0); ok && len(v) == 1 {
		size = graph.DimOf(v[0])
	}
	return c.out(0, graph.TensorType(elem, graph.Shape{size}))
}

func inferMelWeight(c *inferNode) error {
	elem := graph.DataType(c.n.AttrInt("output_datatype", int64(graph.Float)))
	bins, dft := graph.UnknownDim(), graph.UnknownDim()
	if v, ok := c.ints(0); ok && len(v) == 1 {
		bins = graph.DimOf(v[0])
	}
	if v, ok := c.ints(1); ok && len(v) == 1 {
		dft = graph.DimOf(v[0]/2 + 1)
	}
	return c.out(0, graph.TensorType(elem, graph.Shape{dft, bins}))
}

func inferTfIdf(c *inferNode) error {
	in, ok := c.shape(0)
	var width int64 = -1
	for _, v := range c.n.AttrInts("ngram_indexes") {
		if v+1 > width {
			width = v + 1
		}
	}
	w := graph.DimOf(width)
	if width < 0 {
		w = graph.UnknownDim()
	}
	if !ok {
		return c.out(0, graph.UnrankedTensor(graph.Float))
	}
	switch len(in) {
	case 1:
		return c.out(0, graph.TensorType(graph.Float, graph.Shape{w}))
	case 2:
		return c.out(0, graph.TensorType(graph.Float, graph.Shape{in[0], w}))
	}
	return fmt.Errorf("input must be 1-D or 2-D, got %v", in)
}

func inferStringNormalizer(c *inferNode) error {
	in, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(graph.String))
	}
	if len(in) != 1 && len(in) != 2 {
		return fmt.Errorf("input must be 1-D or 2-D, got %v", in)
	}
	out := in.Clone()
	if a := c.n.Attr("stopwords"); a != nil && len(a.Strings) > 0 {
		out[len(out)-1] = graph.UnknownDim()
	}
	return c.out(0, graph.TensorType(graph.String, out))
}

func inferNLLLoss(c *inferNode) error {
	elem := c.elem(0)
	if c.n.AttrString("reduction", "mean") == "none" {
		s, ok := c.shape(1)
		return c.out(0, tensorOut(elem, s, ok))
	}
	return c.out(0, graph.TensorType(elem, graph.Shape{}))
}

func inferSCELoss(c *inferNode) error {
	elem := c.elem(0)
	var err error
	if c.n.AttrString("reduction", "mean") == "none" {
		s, ok := c.shape(1)
		err = c.out(0, tensorOut(elem, s, ok))
	} else {
		err = c.out(0, graph.TensorType(elem, graph.Shape{}))
	}
	if err != nil {
		return err
	}
	return c.out(1, c.in(0))
}

// inferOptimizer covers the training-domain optimizers: after the two leading inputs come
// groups of n tensors each (X, G, then per-optimizer state); outputs are the updated groups
// listed in outGroups, each shaped like its input group.
func inferOptimizer(groups int, outGroups []int) inferFunc {
	return func(c *inferNode) error {
		n := (c.numIn() - 2) / groups
		for j := 0; j < len(c.n.Outputs); j++ {
			g, k := j/max(n, 1), j%max(n, 1)
			if g >= len(outGroups) {
				break
			}
			if err := c.out(j, c.in(2+outGroups[g]*n+k)); err != nil {
				return err
			}
		}
		return nil
	}
}

// MatMulDims is MatMul's shape rule (numpy's matmul) applied to concrete shapes: the operands
// as matrices (a 1-D A is the row [1, k], a 1-D B the column [k, 1]), their broadcast batch
// axes and the output shape. It is the rule shape inference uses, so every path that runs
// MatMul (host functions, kernel planners) agrees with it.
type MatMulDims struct {
	M, K, N int64
	// ABatch and BBatch are the operands' own batch axes (before broadcasting), Batch the
	// broadcast ones.
	ABatch, BBatch, Batch []int64
	// Out is the output shape: Batch, then M unless A is 1-D, then N unless B is 1-D.
	Out []int64
}

// MatMulShapes applies MatMul's shape rule to the shapes a and b of A and B.
func MatMulShapes(a, b []int64) (MatMulDims, error) {
	var d MatMulDims
	out, err := matmulShape(graph.ShapeOf(a...), graph.ShapeOf(b...))
	if err != nil {
		return d, fmt.Errorf("MatMul: %w", err)
	}
	if d.Out, _ = out.Ints(); d.Out == nil {
		d.Out = []int64{}
	}
	a2, b2 := a, b
	if len(a) == 1 {
		a2 = []int64{1, a[0]}
	}
	if len(b) == 1 {
		b2 = []int64{b[0], 1}
	}
	d.M, d.K, d.N = a2[len(a2)-2], a2[len(a2)-1], b2[len(b2)-1]
	d.ABatch, d.BBatch = a2[:len(a2)-2], b2[:len(b2)-2]
	d.Batch = d.Out[:len(d.Out)-int(boolInt(len(a) > 1)+boolInt(len(b) > 1))]
	return d, nil
}
