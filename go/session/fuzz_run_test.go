package session

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/refeval"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The run-path fuzzers (issue 18): FuzzRunOneOp and FuzzRunTwoOps build small models of one op,
// or of one op feeding another, from the fuzzer's bytes (the op among those the host provider
// supports, its opset, attributes, the element types, shapes and values of its inputs, which of
// them are graph inputs and which initializers) and run them on both executors under a tight
// element limit and memory budget. A run may fail, but only with an *Error naming a node; it never panics (a
// recovered panic, ErrInternal, fails the target as well), hangs or allocates more than
// fuzzRunMaxAlloc bytes; the two executors agree; and where go/graph's reference evaluator
// computes the model, Loom's outputs match its outputs.
//
//	cd go/session && go test -run '^$' -fuzz '^FuzzRunOneOp$' -fuzztime 10m -parallel 1
//
// The seed corpus (f.Add, one model per op family) and what the fuzzer kept
// (testdata/fuzz/FuzzRunOneOp, testdata/fuzz/FuzzRunTwoOps) run as ordinary tests.

// fuzzOps are the ops a fuzz input picks from, by index: the host provider's ai.onnx ops
// (SupportedOps) as they were when the corpus was made. New ops go at the end, so that the
// corpus keeps its meaning; TestFuzzOpsCoverSupportedOps fails when one is missing.
var fuzzOps = []string{
	"Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
	"AveragePool", "BatchNormalization", "Bernoulli", "BitShift", "BitwiseAnd", "BitwiseNot",
	"BitwiseOr", "BitwiseXor", "BlackmanWindow", "Cast", "CastLike", "Ceil", "Celu", "Clip",
	"Compress", "Concat", "ConcatFromSequence", "Constant", "ConstantOfShape", "Conv",
	"ConvInteger", "ConvTranspose", "Cos", "Cosh", "CumSum", "DepthToSpace", "DequantizeLinear",
	"Det", "Div", "Dropout", "DynamicQuantizeLinear", "Einsum", "Elu", "Equal", "Erf", "Exp",
	"Expand", "EyeLike", "Flatten", "Floor", "GRU", "Gather", "GatherElements", "GatherND", "Gelu",
	"Gemm", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "Greater", "GreaterOrEqual",
	"GridSample", "HammingWindow", "HannWindow", "HardSigmoid", "HardSwish", "Hardmax", "Identity",
	"If", "InstanceNormalization", "IsInf", "IsNaN", "LRN", "LSTM", "LayerNormalization",
	"LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "Loop", "LpPool", "MatMul",
	"MatMulInteger", "Max", "MaxPool", "MaxUnpool", "Mean", "MeanVarianceNormalization",
	"MelWeightMatrix", "Min", "Mish", "Mod", "Mul", "Multinomial", "Neg",
	"NegativeLogLikelihoodLoss", "NonMaxSuppression", "NonZero", "Not", "OneHot", "Optional",
	"OptionalGetElement", "OptionalHasElement", "Or", "PRelu", "Pad", "Pow", "QLinearConv",
	"QLinearMatMul", "QuantizeLinear", "RNN", "RandomNormal", "RandomNormalLike", "RandomUniform",
	"RandomUniformLike", "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum",
	"ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
	"ReduceSumSquare", "Relu", "Reshape", "Resize", "ReverseSequence", "RoiAlign", "Round", "Scan",
	"Scatter", "ScatterElements", "ScatterND", "Selu", "SequenceAt", "SequenceConstruct",
	"SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength", "SequenceMap", "Shape",
	"Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Size", "Slice", "Softmax",
	"SoftmaxCrossEntropyLoss", "Softplus", "Softsign", "SpaceToDepth", "Split", "SplitToSequence",
	"Sqrt", "Squeeze", "StringNormalizer", "Sub", "Sum", "Tan", "Tanh", "TfIdfVectorizer",
	"ThresholdedRelu", "Tile", "TopK", "Transpose", "Trilu", "Unique", "Unsqueeze", "Upsample",
	"Where", "Xor",
	// Added after the corpus was made.
	"CumProd", "Swish", "RotaryEmbedding", "RMSNormalization", "BitCast", "LpNormalization", "Attention",
	"GroupNormalization", "StringConcat", "StringSplit", "RegexFullMatch",
	"TensorScatter", "CenterCropPad", "Col2Im", "AffineGrid", "DeformConv", "LinearAttention", "CausalConvWithState",
	// Ops of another domain, by their registry key "domain:Op" (see fuzzOpDomain).
	"ai.onnx.ml:Binarizer", "ai.onnx.ml:ArrayFeatureExtractor", "ai.onnx.ml:LabelEncoder", "ai.onnx.ml:TreeEnsemble",
	// ONNX Runtime's contrib ops: no ONNX schema, so the fuzzers cannot make them (addNode skips
	// them); testdata/msops and msops_test.go cover them (MatMulNBits and GatherBlockQuantized:
	// testdata/msquant, msquant_test.go and msquant_refs_test.go).
	"SimplifiedLayerNormalization", "com.microsoft:SkipLayerNormalization", "com.microsoft:SkipSimplifiedLayerNormalization",
	"com.microsoft:FastGelu", "com.microsoft:BiasGelu", "com.microsoft:RotaryEmbedding", "com.microsoft:MultiHeadAttention",
	"com.microsoft:GroupQueryAttention", "com.microsoft:MatMulNBits", "com.microsoft:GatherBlockQuantized",
	// Added 2026-12-05.
	"DFT", "STFT", "ai.onnx.preview.training:Adagrad", "ai.onnx.preview.training:Adam", "ai.onnx.preview.training:Momentum",
	"ImageDecoder",
}

// fuzzOpDomain splits an entry of fuzzOps into its domain ("" for ai.onnx) and op type.
func fuzzOpDomain(key string) (domain, op string) {
	if d, o, ok := strings.Cut(key, ":"); ok {
		return d, o
	}
	return "", key
}

// opsetOf is the version of domain the model imports: m.opset for ai.onnx, the newest one
// Loom knows for another domain.
func (m *fuzzModel) opsetOf(domain string) int64 {
	if domain == "" {
		return m.opset
	}
	return graph.MaxOpset(domain)
}

// fuzzRandomOps draw random numbers: their values are not compared.
var fuzzRandomOps = map[string]bool{
	"Bernoulli": true, "Multinomial": true, "RandomNormal": true, "RandomNormalLike": true,
	"RandomUniform": true, "RandomUniformLike": true, "Dropout": true,
}

const (
	// fuzzRunMaxElements is the element limit of the fuzzed sessions (WithLimits).
	fuzzRunMaxElements = 1 << 16
	// fuzzRunBudget is the fuzzed sessions' memory budget (WithMemoryBudget).
	fuzzRunBudget = 64 << 20
	// fuzzRunMaxAlloc bounds the Go heap the runs of one fuzz input allocate in all: with every
	// tensor under fuzzRunMaxElements elements (512 KiB of int64), a run that allocates more
	// made something the limit should have stopped.
	fuzzRunMaxAlloc = 256 << 20
	// fuzzRunHang is how long one fuzz input may take (both executors, three runs) before the
	// target reports a hang by crashing the process.
	fuzzRunHang = 60 * time.Second
	// fuzzInputMaxElements bounds each input the fuzzer makes, so that one exec stays fast.
	fuzzInputMaxElements = 1 << 10
)

func TestFuzzOpsCoverSupportedOps(t *testing.T) {
	for op := range SupportedOps() {
		if !slices.Contains(fuzzOps, op) {
			t.Errorf("%s is supported but the run fuzzers never pick it: append it to fuzzOps", op)
		}
	}
}

// fuzzBytes hands out the fuzzer's bytes as decisions; past the end every read is 0.
type fuzzBytes struct {
	b []byte
	i int
}

func (f *fuzzBytes) u8() byte {
	if f.i >= len(f.b) {
		return 0
	}
	f.i++
	return f.b[f.i-1]
}

// n is a number in [0, k).
func (f *fuzzBytes) n(k int) int {
	if k <= 1 {
		return 0
	}
	if k <= 256 {
		return int(f.u8()) % k
	}
	return (int(f.u8())<<8 | int(f.u8())) % k
}

func pickOf[T any](f *fuzzBytes, xs []T) T { return xs[f.n(len(xs))] }

var (
	fuzzSpecialInts = []int64{0, 1, -1, 2, -2, 3, 4, 5, 7, 8, 16, 64, 255, 256, 1000, 1 << 16, math.MaxInt32,
		math.MinInt32, 1 << 32, 1 << 40, 1 << 62, math.MinInt64, 1e6, 1e12, -1e12, -1 << 62}
	fuzzSpecialFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 2, 3, 1e-3, 1e-40, -1e-40, 1e6, -1e6,
		1e30, -1e30, 3e38, -3e38, math.Inf(1), math.Inf(-1), math.NaN(), 65504, 100, 0.1, 1e-7}
	fuzzDims = []int64{1, 2, 3, 4, 1, 2, 0, 5, 3, 1, 6, 2, 1, 8, 16, 33}
	// fuzzDTypes are the element types the fuzzers make values of.
	fuzzDTypes = []graph.DataType{graph.Float, graph.Int64, graph.Int32, graph.Double, graph.Float16, graph.Bool,
		graph.Uint8, graph.Int8, graph.Int16, graph.Uint16, graph.Uint32, graph.Uint64, graph.BFloat16}
	// fuzzStrings are the values of string attributes, by attribute name; "" for any other.
	fuzzStrings = map[string][]string{
		"auto_pad": {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"},
		"mode": {"constant", "reflect", "edge", "wrap", "nearest", "linear", "cubic", "bilinear", "bicubic",
			"DCR", "CRD", "avg", "max", "constant", "sum"},
		"coordinate_transformation_mode": {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
			"tf_crop_and_resize", "half_pixel_symmetric", "output_half_pixel"},
		"nearest_mode":             {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"},
		"keep_aspect_ratio_policy": {"stretch", "not_larger", "not_smaller"},
		"direction":                {"LEFT", "RIGHT", "forward", "reverse", "bidirectional"},
		"reduction":                {"none", "mean", "sum", "add", "mul", "max", "min"},
		"padding_mode":             {"zeros", "border", "reflection"},
		"approximate":              {"none", "tanh"},
		"equation": {"ij,jk->ik", "ij->ji", "i,i->", "ii->i", "bij,bjk->bik", "ij->", "...ij->...ji", "i,j->ij",
			"ij,ij->ij", "ijk->kji", "a", "ij,jk", "->", "i->ii"},
		"": {"", "x", "NOTSET", "constant", "none"},
	}
)

// fuzzInt is an attribute or shape value: mostly small, sometimes one of the special values.
func fuzzInt(f *fuzzBytes) int64 {
	b := f.u8()
	if b < 192 {
		return int64(b%20) - 3
	}
	return fuzzSpecialInts[int(b-192)%len(fuzzSpecialInts)]
}

func fuzzFloat(f *fuzzBytes) float64 {
	b := f.u8()
	if b < 160 {
		return float64(int(b%33)-16) / 4
	}
	return fuzzSpecialFloats[int(b-160)%len(fuzzSpecialFloats)]
}

// fuzzNormalize makes v a value dtype holds exactly, so that a tensor of it, an initializer of
// it and the reference evaluator's value all hold the same numbers.
func fuzzNormalize(dt graph.DataType, v float64) float64 {
	clampInt := func(lo, hi float64) float64 {
		if math.IsNaN(v) {
			return 0
		}
		return math.Trunc(math.Max(lo, math.Min(hi, v))) + 0 // no -0
	}
	switch dt {
	case graph.Float:
		return float64(float32(v))
	case graph.Float16:
		return float64(graph.Float16ToFloat32(graph.Float32ToFloat16(float32(v))))
	case graph.BFloat16:
		return float64(graph.BFloat16ToFloat32(graph.Float32ToBFloat16(float32(v))))
	case graph.Bool:
		if v != 0 && !math.IsNaN(v) {
			return 1
		}
		return 0
	case graph.Int8:
		return clampInt(math.MinInt8, math.MaxInt8)
	case graph.Uint8:
		return clampInt(0, math.MaxUint8)
	case graph.Int16:
		return clampInt(math.MinInt16, math.MaxInt16)
	case graph.Uint16:
		return clampInt(0, math.MaxUint16)
	case graph.Int32:
		return clampInt(math.MinInt32, math.MaxInt32)
	case graph.Uint32:
		return clampInt(0, math.MaxUint32)
	case graph.Int64:
		return clampInt(-(1 << 63), 1<<62) // within int64 and exact in float64
	case graph.Uint64:
		return clampInt(0, 1<<62)
	}
	return v
}

// fuzzValue is one input of a fuzzed model: its element type, dims and values.
type fuzzValue struct {
	dt   graph.DataType
	dims []int64
	vals []float64
}

func (v fuzzValue) String() string {
	const most = 12
	vals := v.vals
	more := ""
	if len(vals) > most {
		vals, more = vals[:most], fmt.Sprintf(" ... (%d)", len(v.vals))
	}
	return fmt.Sprintf("%s%v %v%s", v.dt, v.dims, vals, more)
}

// fuzzShape is a shape: like like's (broadcasting ops need matching shapes) or drawn anew.
func fuzzShape(f *fuzzBytes, like []int64) []int64 {
	var dims []int64
	switch m := f.n(16); {
	case like != nil && m < 7:
		dims = slices.Clone(like)
	case like != nil && m < 9 && len(like) > 0:
		dims = slices.Clone(like[f.n(len(like)):]) // a suffix: broadcasts
	case m == 9:
		dims = []int64{} // a scalar
	default:
		dims = make([]int64, f.n(5))
		for i := range dims {
			dims[i] = pickOf(f, fuzzDims)
		}
	}
	for n := int64(1); ; n = 1 {
		for _, d := range dims {
			n *= d
		}
		if n <= fuzzInputMaxElements {
			return dims
		}
		for i := range dims {
			if dims[i] > 1 {
				dims[i] /= 2
				break
			}
		}
	}
}

// fuzzTensor draws the values of a tensor of dt and dims: small integers (indices, axes,
// sizes), quarter steps, special values (huge, tiny, NaN, infinite) or a ramp.
func fuzzTensor(f *fuzzBytes, dt graph.DataType, dims []int64) fuzzValue {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	vals := make([]float64, n)
	mode := f.n(5)
	for i := range vals {
		switch mode {
		case 0:
			vals[i] = float64(fuzzInt(f))
		case 1, 2:
			vals[i] = fuzzFloat(f)
		case 3:
			vals[i] = float64(i)
		case 4:
			vals[i] = float64(int(f.u8()%8)) - 2
		}
		vals[i] = fuzzNormalize(dt, vals[i])
	}
	return fuzzValue{dt: dt, dims: dims, vals: vals}
}

// fuzzDType picks an element type a formal parameter allows (nil when it allows none the
// fuzzers make): a type parameter keeps the type it got first.
func fuzzDType(f *fuzzBytes, s *graph.OpSchema, typeStr string, bound map[string]graph.DataType) (graph.DataType, bool) {
	if dt, ok := bound[typeStr]; ok {
		return dt, true
	}
	allowed := []string{typeStr}
	if c, ok := s.TypeConstraints[typeStr]; ok {
		allowed = c
	} else if !strings.HasPrefix(typeStr, "tensor(") {
		allowed = nil
		for _, dt := range fuzzDTypes {
			allowed = append(allowed, "tensor("+dt.String()+")")
		}
	}
	var dts []graph.DataType
	for _, a := range allowed {
		for _, dt := range fuzzDTypes {
			if a == "tensor("+dt.String()+")" {
				dts = append(dts, dt)
			}
		}
	}
	if len(dts) == 0 {
		return 0, false
	}
	// The first types a schema lists (float, double, float16...) come first more often.
	dt := dts[0]
	if f.n(3) > 0 {
		dt = pickOf(f, dts)
	}
	bound[typeStr] = dt
	return dt, true
}

// fuzzAttrs draws attributes for node n of schema s: each present or not, values from the
// pools above, lists of up to four.
func fuzzAttrs(f *fuzzBytes, s *graph.OpSchema, n *graph.Node) bool {
	names := make([]string, 0, len(s.Attrs))
	for name := range s.Attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := s.Attrs[name]
		if !spec.Required && f.n(2) == 0 {
			continue
		}
		switch spec.Type {
		case graph.AttrInt:
			n.Attrs = append(n.Attrs, graph.IntAttr(name, fuzzInt(f)))
		case graph.AttrFloat:
			n.Attrs = append(n.Attrs, graph.FloatAttr(name, float32(fuzzFloat(f))))
		case graph.AttrInts:
			v := make([]int64, f.n(5))
			for i := range v {
				v[i] = fuzzInt(f)
			}
			n.Attrs = append(n.Attrs, graph.IntsAttr(name, v...))
		case graph.AttrFloats:
			v := make([]float32, f.n(5))
			for i := range v {
				v[i] = float32(fuzzFloat(f))
			}
			n.Attrs = append(n.Attrs, &graph.Attribute{Name: name, Type: graph.AttrFloats, Floats: v})
		case graph.AttrString:
			pool, ok := fuzzStrings[name]
			if !ok || f.n(8) == 0 {
				pool = fuzzStrings[""]
			}
			n.Attrs = append(n.Attrs, graph.StringAttr(name, pickOf(f, pool)))
		case graph.AttrTensor:
			dt := pickOf(f, fuzzDTypes)
			dims := []int64{}
			if f.n(2) == 0 {
				dims = []int64{int64(f.n(4))}
			}
			v := fuzzTensor(f, dt, dims)
			t, err := graph.TensorFromValues(name, v.dt, v.dims, v.vals)
			if err != nil {
				return false
			}
			n.Attrs = append(n.Attrs, graph.TensorAttr(name, t))
		default:
			if spec.Required {
				return false // a graph, strings, a type: not made here
			}
		}
	}
	return true
}

// fuzzModel is a fuzzed model: how to build it (a fresh graph each time: sessions and the
// reference evaluator may change what they are given) and the values of its graph inputs.
type fuzzModel struct {
	opset  int64
	nodes  []*graph.Node
	inputs map[string]fuzzValue // graph inputs
	inits  map[string]fuzzValue // initializers
	order  []string             // input and initializer names, in the order drawn
	// dynamic marks the graph inputs declared with unknown dimensions.
	dynamic map[string]bool
	outputs []string
}

func (m *fuzzModel) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "opset %d\n", m.opset)
	for _, n := range m.nodes {
		op := n.OpType
		if n.Domain != "" {
			op = n.Domain + ":" + op
		}
		fmt.Fprintf(&b, "node %q %s(%s) -> %s", n.Name, op, strings.Join(n.Inputs, ", "), strings.Join(n.Outputs, ", "))
		for _, a := range n.Attrs {
			switch a.Type {
			case graph.AttrInt:
				fmt.Fprintf(&b, " %s=%d", a.Name, a.Int)
			case graph.AttrFloat:
				fmt.Fprintf(&b, " %s=%v", a.Name, a.Float)
			case graph.AttrInts:
				fmt.Fprintf(&b, " %s=%v", a.Name, a.Ints)
			case graph.AttrFloats:
				fmt.Fprintf(&b, " %s=%v", a.Name, a.Floats)
			case graph.AttrString:
				fmt.Fprintf(&b, " %s=%q", a.Name, a.String)
			case graph.AttrTensor:
				vals, _ := a.Tensor.Float64s()
				fmt.Fprintf(&b, " %s=%s%v %v", a.Name, a.Tensor.DType, a.Tensor.Dims, vals)
			}
		}
		b.WriteString("\n")
	}
	for _, name := range m.order {
		if v, ok := m.inputs[name]; ok {
			dyn := ""
			if m.dynamic[name] {
				dyn = " (unknown dims)"
			}
			fmt.Fprintf(&b, "input %s%s: %s\n", name, dyn, v)
		} else {
			fmt.Fprintf(&b, "initializer %s: %s\n", name, m.inits[name])
		}
	}
	return b.String()
}

// build makes the model, or returns the loader's refusal.
func (m *fuzzModel) build() (*graph.Model, error) {
	g := &graph.Graph{Name: "fuzz"}
	for _, name := range m.order {
		if v, ok := m.inits[name]; ok {
			t, err := graph.TensorFromValues(name, v.dt, v.dims, v.vals)
			if err != nil {
				return nil, err
			}
			g.AddInitializer(t)
			continue
		}
		v := m.inputs[name]
		shape := graph.ShapeOf(v.dims...)
		if m.dynamic[name] {
			shape = make(graph.Shape, len(v.dims))
			for i := range shape {
				shape[i] = graph.UnknownDim()
			}
		}
		g.Inputs = append(g.Inputs, graph.Input(name, graph.TensorType(v.dt, shape)))
	}
	for _, o := range m.outputs {
		g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
	}
	for _, n := range m.nodes {
		c := *n
		c.Inputs, c.Outputs = slices.Clone(n.Inputs), slices.Clone(n.Outputs)
		c.Attrs = slices.Clone(n.Attrs)
		g.Nodes = append(g.Nodes, &c)
	}
	opsets := map[string]int64{"": m.opset}
	for _, n := range m.nodes {
		if n.Domain != "" {
			opsets[n.Domain] = m.opsetOf(n.Domain)
		}
	}
	return graph.FromGraph(g.Name, g, opsets)
}

// fuzzOpset picks an opset in which op exists (a version it changed in, or a recent one).
func fuzzOpset(f *fuzzBytes, op string) int64 {
	var vs []int64
	for _, v := range graph.SchemaVersions("", op) {
		if v >= 7 && v <= graph.MaxOpset("") {
			vs = append(vs, v)
		}
	}
	vs = append(vs, 13, 17, 18, 21)
	return pickOf(f, vs)
}

// addNode draws node number k of op into m: its attributes, how many inputs and outputs, and
// each input's type, shape and values; an input index listed in chained takes that name
// instead. It reports false when the fuzzers cannot make the op (a graph attribute, say).
func (m *fuzzModel) addNode(f *fuzzBytes, k int, op string, chained map[int]string) bool {
	domain, opType := fuzzOpDomain(op)
	s, _ := graph.LookupSchema(domain, opType, m.opsetOf(domain))
	if s == nil {
		return false
	}
	n := graph.NewNode(fmt.Sprintf("n%d_%s", k, strings.ToLower(opType)), opType, nil, nil)
	n.Domain = domain
	if !fuzzAttrs(f, s, n) {
		return false
	}
	nIn := s.MinInputs
	if hi := min(s.MaxInputs, s.MinInputs+4, 8); hi > nIn {
		nIn += f.n(hi - nIn + 1)
	}
	nOut := s.MinOutputs
	if hi := min(s.MaxOutputs, 4); hi > nOut {
		nOut += f.n(hi - nOut + 1)
	}
	bound := map[string]graph.DataType{}
	var like []int64
	for i := range nIn {
		if name, ok := chained[i]; ok {
			n.Inputs = append(n.Inputs, name)
			continue
		}
		param := s.Inputs[min(i, len(s.Inputs)-1)]
		if param.Option == graph.ParamOptional && f.n(4) == 0 {
			n.Inputs = append(n.Inputs, "") // omitted
			continue
		}
		dt, ok := fuzzDType(f, s, param.TypeStr, bound)
		if !ok {
			return false
		}
		dims := fuzzShape(f, like)
		if like == nil {
			like = dims
		}
		v := fuzzTensor(f, dt, dims)
		name := fmt.Sprintf("n%d_in%d", k, i)
		n.Inputs = append(n.Inputs, name)
		m.order = append(m.order, name)
		switch f.n(4) {
		case 0:
			m.inits[name] = v
		case 1:
			m.inputs[name] = v
			m.dynamic[name] = true
		default:
			m.inputs[name] = v
		}
	}
	for len(n.Inputs) > 0 && n.Inputs[len(n.Inputs)-1] == "" {
		n.Inputs = n.Inputs[:len(n.Inputs)-1]
	}
	for i := range nOut {
		n.Outputs = append(n.Outputs, fmt.Sprintf("n%d_out%d", k, i))
	}
	m.nodes = append(m.nodes, n)
	return true
}

func newFuzzModel(opset int64) *fuzzModel {
	return &fuzzModel{opset: opset, inputs: map[string]fuzzValue{}, inits: map[string]fuzzValue{}, dynamic: map[string]bool{}}
}

// fuzzOneOp is the model of FuzzRunOneOp: one node, every output a graph output.
func fuzzOneOp(data []byte) *fuzzModel {
	f := &fuzzBytes{b: data}
	op := fuzzOps[f.n(len(fuzzOps))]
	m := newFuzzModel(fuzzOpset(f, op))
	if !m.addNode(f, 0, op, nil) {
		return nil
	}
	m.outputs = slices.Clone(m.nodes[0].Outputs)
	return m
}

// fuzzTwoOps is the model of FuzzRunTwoOps: a first node, one of whose outputs feeds an input
// of a second; the graph outputs are the second node's and, sometimes, the first's.
func fuzzTwoOps(data []byte) *fuzzModel {
	f := &fuzzBytes{b: data}
	op0 := fuzzOps[f.n(len(fuzzOps))]
	op1 := fuzzOps[f.n(len(fuzzOps))]
	opset := fuzzOpset(f, op0)
	if vs := graph.SchemaVersions("", op1); len(vs) > 0 && vs[0] > opset {
		opset = max(vs[0], 7)
	}
	m := newFuzzModel(opset)
	if !m.addNode(f, 0, op0, nil) || len(m.nodes[0].Outputs) == 0 {
		return nil
	}
	first := m.nodes[0]
	domain1, opType1 := fuzzOpDomain(op1)
	s1, _ := graph.LookupSchema(domain1, opType1, m.opsetOf(domain1))
	if s1 == nil || s1.MaxInputs == 0 {
		return nil
	}
	slot := f.n(min(s1.MaxInputs, s1.MinInputs+2, 8))
	from := first.Outputs[f.n(len(first.Outputs))]
	if !m.addNode(f, 1, op1, map[int]string{slot: from}) || !slices.Contains(m.nodes[1].Inputs, from) {
		return nil
	}
	m.outputs = slices.Clone(m.nodes[1].Outputs)
	if f.n(3) == 0 {
		m.outputs = append(m.outputs, from)
	}
	return m
}

// fuzzOutcome is what one executor made of a fuzzed model: the outputs of each run, or the
// error that ended it.
type fuzzOutcome struct {
	executor string
	runs     [][]fuzzValue
	loadErr  error
	runErr   error
}

func fuzzOptions(executor string) []LoadOption {
	return tracedOptions(nil, executor, WithLimits(graph.Limits{MaxElements: fuzzRunMaxElements}),
		WithMemoryBudget(fuzzRunBudget), WithIntraOpThreads(1))
}

// runFuzzModel loads m on executor and runs it (twice on the compiled plan's executor: the
// first run traces, the second runs the plan), checking what only this run can.
func runFuzzModel(t *testing.T, m *fuzzModel, executor string) fuzzOutcome {
	out := fuzzOutcome{executor: executor}
	gm, err := m.build()
	if err != nil {
		return fuzzOutcome{executor: executor, loadErr: err}
	}
	s, err := FromGraph(gm, fuzzOptions(executor)...)
	if err != nil {
		checkFuzzError(t, m, "loading", err, false)
		out.loadErr = err
		return out
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Fatalf("%s: Close: %v\n%s", executor, err, m)
		}
		// Every byte the runs and plans charged to the memory budget went back.
		if _, held := s.MemoryBudget(); held != 0 {
			t.Fatalf("%s: the closed session still holds %d bytes of its memory budget\n%s", executor, held, m)
		}
	}()
	var feeds []tensor.NamedValue
	for _, name := range m.order {
		if v, ok := m.inputs[name]; ok {
			tt, err := tensor.FromFloat64s(v.dt, v.dims, v.vals)
			if err != nil {
				t.Fatalf("input %s: %v", name, err)
			}
			feeds = append(feeds, tensor.NamedValue{Name: name, Value: tensor.TensorValue(tt)})
		}
	}
	runs := 1
	if executor == exec.ExecutorPlan {
		runs = 2
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocBefore := ms.TotalAlloc
	for range runs {
		outs, err := s.RunValues(context.Background(), feeds)
		if err != nil {
			checkFuzzError(t, m, executor+" run", err, true)
			out.runErr = err
			break
		}
		var vals []fuzzValue
		for _, o := range outs {
			vals = append(vals, fuzzValueOf(o))
		}
		out.runs = append(out.runs, vals)
	}
	runtime.ReadMemStats(&ms)
	if a := ms.TotalAlloc - allocBefore; a > fuzzRunMaxAlloc {
		t.Fatalf("%s: the runs allocated %d MiB (limit %d elements per tensor)\n%s", executor, a>>20, fuzzRunMaxElements, m)
	}
	return out
}

// fuzzValueOf is an output as a fuzzValue: a tensor as it is; a sequence or an optional
// flattened, for the executors to be compared (dims -2 and the count for a sequence, whose
// values are each element's rank, dims and values; -3 for an empty optional, -4 before what
// one holds).
func fuzzValueOf(o tensor.Value) fuzzValue {
	if t, err := o.Tensor(); err == nil {
		return fuzzValue{dt: t.DType(), dims: slices.Clone(t.Dims()), vals: tensor.Float64s(t)}
	}
	if elems, err := o.Sequence(); err == nil {
		v := fuzzValue{dt: o.ElemType(), dims: []int64{-2, int64(len(elems))}}
		for _, e := range elems {
			v.vals = append(v.vals, float64(len(e.Dims())))
			for _, d := range e.Dims() {
				v.vals = append(v.vals, float64(d))
			}
			v.vals = append(v.vals, tensor.Float64s(e)...)
		}
		return v
	}
	if e, ok := o.Element(); ok {
		v := fuzzValueOf(e)
		v.dims = append([]int64{-4}, v.dims...)
		return v
	}
	return fuzzValue{dt: o.ElemType(), dims: []int64{-3}}
}

// checkFuzzError fails t unless err is an *Error that is not ErrInternal (a recovered panic)
// and, for a run's error, names a node.
func checkFuzzError(t *testing.T, m *fuzzModel, what string, err error, named bool) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s failed with %T, not an *Error: %v\n%s", what, err, err, m)
	}
	if errors.Is(err, ErrInternal) {
		t.Fatalf("%s panicked:\n%v\n%s", what, err, m)
	}
	if named && e.Node == "" {
		t.Fatalf("%s failed naming no node: %v\n%s", what, err, m)
	}
}

// fuzzTolerance is how far apart a and b (of element type dt) may be.
func fuzzClose(dt graph.DataType, want, got float64, scale float64) bool {
	if lo, hi, ok := fuzzIntRange(dt); ok && !(want >= lo && want <= hi && math.Abs(want) < 1<<53) {
		// An integer result out of the type's range (or not finite: 0 to a negative power,
		// say) has no defined value to compare (Loom wraps around), and the reference
		// evaluator's float64 holds integers exactly only below 2^53.
		return true
	}
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got)
	}
	if math.IsInf(want, 0) || math.IsInf(got, 0) {
		return want == got
	}
	var rel, abs float64
	switch dt {
	case graph.Float:
		rel, abs = 1e-4, 1e-5
	case graph.Double:
		rel, abs = 1e-9, 1e-12
	case graph.Float16, graph.BFloat16:
		rel, abs = 1e-2, 1e-3
	default:
		return want == got
	}
	return math.Abs(want-got) <= abs*math.Max(1, scale)+rel*math.Abs(want)
}

// fuzzIntRange is the range of an integer type; ok is false for the others.
func fuzzIntRange(dt graph.DataType) (lo, hi float64, ok bool) { return dt.IntRange() }

// compareFuzzOutputs reports how got differs from want (output by output), or "". scale is
// the largest finite magnitude among the inputs, which bounds the rounding of sums.
func compareFuzzOutputs(want, got []fuzzValue, names []string, scale float64) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d outputs, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.dt != g.dt {
			return fmt.Sprintf("output %s is %s, want %s", names[i], g.dt, w.dt)
		}
		if !slices.Equal(w.dims, g.dims) {
			return fmt.Sprintf("output %s has the shape %v, want %v", names[i], g.dims, w.dims)
		}
		if len(w.vals) != len(g.vals) {
			return fmt.Sprintf("output %s of shape %v holds %d values, want %d", names[i], g.dims, len(g.vals), len(w.vals))
		}
		for j := range w.vals {
			if !fuzzClose(w.dt, w.vals[j], g.vals[j], scale) {
				return fmt.Sprintf("output %s element %d is %v, want %v\n got %s\nwant %s", names[i], j, g.vals[j], w.vals[j], g, w)
			}
		}
	}
	return ""
}

// fuzzScale is the largest finite magnitude among m's inputs and initializers, and at least 1.
func (m *fuzzModel) fuzzScale() float64 {
	scale := 1.0
	for _, vs := range []map[string]fuzzValue{m.inputs, m.inits} {
		for _, v := range vs {
			for _, x := range v.vals {
				if !math.IsInf(x, 0) && !math.IsNaN(x) {
					scale = math.Max(scale, math.Abs(x))
				}
			}
		}
	}
	return scale
}

// reference runs m through go/graph's reference evaluator; ok is false where it does not
// compute the model (an op or an attribute it does not cover, a value it refuses).
func (m *fuzzModel) reference() (outs []fuzzValue, ok bool) {
	gm, err := m.build()
	if err != nil {
		return nil, false
	}
	in := map[string]*refeval.Value{}
	for name, v := range m.inputs {
		in[name] = &refeval.Value{DType: v.dt, Dims: slices.Clone(v.dims), Data: slices.Clone(v.vals)}
	}
	res, err := refeval.Run(gm, in)
	if err != nil {
		return nil, false
	}
	for _, name := range m.outputs {
		v := res[name]
		if v == nil {
			return nil, false
		}
		outs = append(outs, fuzzValue{dt: v.DType, dims: v.Dims, vals: v.Data})
	}
	return outs, true
}

// checkFuzzModel runs m on both executors and checks them against each other and against the
// reference evaluator.
func checkFuzzModel(t *testing.T, m *fuzzModel) {
	if m == nil {
		return
	}
	desc := m.String()
	hang := time.AfterFunc(fuzzRunHang, func() {
		panic(fmt.Sprintf("the fuzzed model ran for over %v:\n%s", fuzzRunHang, desc))
	})
	defer hang.Stop()
	random := false
	for _, n := range m.nodes {
		random = random || fuzzRandomOps[n.OpType]
	}
	var results []fuzzOutcome
	for _, executor := range traceExecutors {
		results = append(results, runFuzzModel(t, m, executor))
	}
	if random {
		return
	}
	scale := m.fuzzScale()
	var ok []fuzzOutcome
	for _, r := range results {
		if r.loadErr == nil && r.runErr == nil {
			for i := 1; i < len(r.runs); i++ {
				if d := compareFuzzOutputs(r.runs[0], r.runs[i], m.outputs, scale); d != "" {
					t.Fatalf("%s: run %d differs from run 1: %s\n%s", r.executor, i+1, d, desc)
				}
			}
			ok = append(ok, r)
		}
	}
	if len(ok) == 2 {
		if d := compareFuzzOutputs(ok[0].runs[0], ok[1].runs[0], m.outputs, scale); d != "" {
			t.Fatalf("the %s and %s executors disagree: %s\n%s", ok[0].executor, ok[1].executor, d, desc)
		}
	}
	if len(ok) == 1 {
		for _, r := range results {
			if r.loadErr == nil && r.runErr != nil {
				t.Fatalf("the %s executor ran the model and the %s executor failed: %v\n%s", ok[0].executor, r.executor, r.runErr, desc)
			}
		}
	}
	if len(ok) == 0 {
		return
	}
	want, covered := m.reference()
	if !covered {
		return
	}
	if d := compareFuzzOutputs(want, ok[0].runs[0], m.outputs, scale); d != "" {
		t.Fatalf("%s executor vs the reference evaluator: %s\n%s", ok[0].executor, d, desc)
	}
}

// fuzzSeed is a seed input: the op's index, then the decision bytes.
func fuzzSeed(op string, rest ...byte) []byte {
	i := slices.Index(fuzzOps, op)
	if i < 0 {
		panic("no op " + op)
	}
	return append([]byte{byte(i)}, rest...)
}

// fuzzSeedOps are the ops of the seed corpus: one or more of each family.
var fuzzSeedOps = []string{
	"Add", "Div", "Pow", "Mod", "Where", "Relu", "Exp", "Sqrt", "Cast", "Clip", "MatMul", "Gemm", "Conv",
	"ConvTranspose", "MaxPool", "AveragePool", "BatchNormalization", "LayerNormalization", "Softmax",
	"ReduceSum", "ReduceMax", "ArgMax", "TopK", "CumSum", "Reshape", "Transpose", "Concat", "Split",
	"Slice", "Gather", "GatherND", "ScatterND", "ScatterElements", "Expand", "Tile", "Pad", "Resize",
	"ConstantOfShape", "Range", "OneHot", "NonZero", "Unique", "Einsum", "LSTM", "GRU", "Trilu",
	"QuantizeLinear", "DequantizeLinear", "Shape", "Squeeze", "Unsqueeze", "DepthToSpace",
	"SequenceConstruct", "Det", "GridSample", "RoiAlign", "NonMaxSuppression",
}

func FuzzRunOneOp(f *testing.F) {
	for i, op := range fuzzSeedOps {
		f.Add(fuzzSeed(op, byte(i), 1, 2, 3, 200, 5, 6, 7, 8, 9, 10, 220, 12, 13, 14, 15))
		f.Add(fuzzSeed(op))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFuzzModel(t, fuzzOneOp(data))
	})
}

func FuzzRunTwoOps(f *testing.F) {
	for i, op := range fuzzSeedOps {
		next := fuzzSeedOps[(i*7+3)%len(fuzzSeedOps)]
		f.Add(append(fuzzSeed(op, byte(slices.Index(fuzzOps, next))), byte(i), 3, 1, 4, 1, 5, 9, 2, 6))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFuzzModel(t, fuzzTwoOps(data))
	})
}
