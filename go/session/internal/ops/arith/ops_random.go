package arith

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the random generators Bernoulli, RandomUniform(Like), RandomNormal(Like)
// and Multinomial, and for Dropout (its training mode draws the mask).

func init() {
	ops.HostOps["Bernoulli"] = OpBernoulli
	ops.HostOps["RandomUniform"] = OpRandomUniform
	ops.HostOps["RandomUniformLike"] = OpRandomUniform
	ops.HostOps["RandomNormal"] = OpRandomNormal
	ops.HostOps["RandomNormalLike"] = OpRandomNormal
	ops.HostOps["Multinomial"] = OpMultinomial
	ops.HostOps["Dropout"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if t := ops.Optional(in, 2); rc.OpsetVersion() >= 12 && t.IsValid() && t.Len() == 1 && tensor.Float64s(t)[0] != 0 {
			return dropoutTraining(n, in)
		}
		return dropoutInference(rc, n, in)
	}
}

// dropoutInference is Dropout outside training: the input, and a mask of all true.
func dropoutInference(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	mask := make([]bool, in[0].Len())
	for i := range mask {
		mask[i] = true
	}
	return []tensor.Tensor{in[0], tensor.Raw(graph.Bool, in[0].Shape(), mask)}, nil
}

// randomSource is the generator one random node draws from in one run. With the node's seed
// attribute (a float for the generators, an int for Dropout) it is seeded from the seed, so
// every run (and every session) of that node draws the same values; without one it is freshly
// seeded each run, as the spec's "if not specified we will auto generate one" asks.
func randomSource(n *graph.Node) *rand.Rand {
	if a := n.Attr("seed"); a != nil && (a.Type == graph.AttrFloat || a.Type == graph.AttrInt) {
		bits := uint64(math.Float32bits(a.Float))
		if a.Type == graph.AttrInt {
			bits = uint64(a.Int) ^ 1<<63 // apart from the float seeds' bit patterns
		}
		return rand.New(rand.NewPCG(bits, bits^0x9e3779b97f4a7c15))
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// randomOutputType is the element type of a generator's output: the dtype attribute when given,
// else def (the input's type for the *Like ops and Bernoulli, float for the others). allowed
// lists the types the op's schema accepts.
func randomOutputType(n *graph.Node, def tensor.DType, allowed func(tensor.DType) bool) (tensor.DType, error) {
	dt := def
	if a := n.Attr("dtype"); a != nil {
		dt = tensor.DType(a.Int)
	}
	if !allowed(dt) {
		how := "the input's type"
		if n.Attr("dtype") != nil {
			how = "attribute dtype"
		} else if n.OpType == "RandomUniform" || n.OpType == "RandomNormal" {
			how = "the default type"
		}
		return 0, fmt.Errorf("%s: output element type %s (%s) is not supported", n.OpType, dt, how)
	}
	return dt, nil
}

// isRandomFloat reports whether dt is one of the float types the generators produce.
func isRandomFloat(dt tensor.DType) bool {
	return dt == graph.Float || dt == graph.Double || dt == graph.Float16 || dt == graph.BFloat16
}

// roundTo rounds v to the nearest value of the float type dt.
func roundTo(dt tensor.DType, v float64) float64 {
	switch dt {
	case graph.Float:
		return float64(float32(v))
	case graph.Float16:
		return float64(tensor.ToFloat16(float32(v)).Float32())
	case graph.BFloat16:
		return float64(tensor.ToBFloat16(float32(v)).Float32())
	}
	return v
}

// randomShape is the generator's output shape: the shape attribute for RandomUniform and
// RandomNormal, the input's shape for the *Like ops.
func randomShape(n *graph.Node, in []tensor.Tensor) ([]int64, error) {
	if n.OpType == "RandomUniformLike" || n.OpType == "RandomNormalLike" {
		if len(in) == 0 || !in[0].IsValid() {
			return nil, fmt.Errorf("%s: input is missing", n.OpType)
		}
		return append([]int64{}, in[0].Dims()...), nil
	}
	a := n.Attr("shape")
	if a == nil || a.Type != graph.AttrInts {
		return nil, fmt.Errorf("%s: attribute shape is required", n.OpType)
	}
	if _, err := tensor.ElementCount(a.Ints); err != nil {
		return nil, fmt.Errorf("%s: shape: %w", n.OpType, err)
	}
	return append([]int64{}, a.Ints...), nil
}

// randomFloatType resolves a generator's output type: dtype, else the input's type for the
// *Like ops, else float.
func randomFloatType(n *graph.Node, in []tensor.Tensor) (tensor.DType, error) {
	def := tensor.DType(graph.Float)
	if len(in) > 0 && in[0].IsValid() {
		def = in[0].DType()
	}
	return randomOutputType(n, def, isRandomFloat)
}

// OpRandomUniform draws from the uniform distribution on [low, high). A draw that rounds to
// high (or below low) in the output type is drawn again, so the bounds hold after rounding too.
func OpRandomUniform(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	shape, err := randomShape(n, in)
	if err != nil {
		return nil, err
	}
	dt, err := randomFloatType(n, in)
	if err != nil {
		return nil, err
	}
	low, high := float64(n.AttrFloat("low", 0)), float64(n.AttrFloat("high", 1))
	if !(low <= high) || math.IsInf(low, 0) || math.IsInf(high, 0) {
		return nil, fmt.Errorf("%s: low %g and high %g must be finite with low <= high", n.OpType, low, high)
	}
	// The output and its float64 staging, reserved from the run's memory budget before
	// either is allocated: a hostile shape attribute is refused, not allocated.
	if err := ops.ReserveShape(rc, "the output", dt, shape, 8); err != nil {
		return nil, err
	}
	r := randomSource(n)
	out := make([]float64, ops.Numel(shape))
	for i := range out {
		if low == high {
			out[i] = low
			continue
		}
		const attempts = 64
		for k := 0; ; k++ {
			v := roundTo(dt, low+(high-low)*r.Float64())
			if v >= low && v < high {
				out[i] = v
				break
			}
			if k == attempts {
				return nil, fmt.Errorf("%s: [%g, %g) holds (almost) no %s value", n.OpType, low, high, dt)
			}
		}
	}
	return ops.FloatResult(dt, shape, out)
}

// OpRandomNormal draws from the normal distribution with the mean and scale (standard
// deviation) attributes.
func OpRandomNormal(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	shape, err := randomShape(n, in)
	if err != nil {
		return nil, err
	}
	dt, err := randomFloatType(n, in)
	if err != nil {
		return nil, err
	}
	mean, scale := float64(n.AttrFloat("mean", 0)), float64(n.AttrFloat("scale", 1))
	if math.IsNaN(mean) || math.IsInf(mean, 0) || !(scale >= 0) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("%s: mean %g must be finite and scale %g finite and not negative", n.OpType, mean, scale)
	}
	if err := ops.ReserveShape(rc, "the output", dt, shape, 8); err != nil {
		return nil, err
	}
	r := randomSource(n)
	out := make([]float64, ops.Numel(shape))
	for i := range out {
		out[i] = mean + scale*r.NormFloat64()
	}
	return ops.FloatResult(dt, shape, out)
}

// OpBernoulli draws 1 with probability p and 0 otherwise for every element p of the input,
// which must lie in [0, 1]; the output has the dtype attribute's type, else the input's.
func OpBernoulli(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if !isRandomFloat(x.DType()) {
		return nil, fmt.Errorf("Bernoulli: input element type %s is not a float type", x.DType())
	}
	dt, err := randomOutputType(n, x.DType(), func(dt tensor.DType) bool {
		return isRandomFloat(dt) || dt == graph.Bool || dt.IsInteger()
	})
	if err != nil {
		return nil, err
	}
	p := tensor.Float64s(x)
	r := randomSource(n)
	out := make([]float64, len(p))
	for i, v := range p {
		if !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("Bernoulli: probability %g at element %d is outside [0, 1]", v, i)
		}
		if r.Float64() < v {
			out[i] = 1
		}
	}
	return ops.FloatResult(dt, x.Dims(), out)
}

// OpMultinomial draws sample_size class indices per batch row of the (batch, classes) input of
// unnormalized log-probabilities, class k with probability softmax(row)[k].
func OpMultinomial(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if !isRandomFloat(x.DType()) || len(x.Dims()) != 2 {
		return nil, fmt.Errorf("Multinomial: input must be a float (batch, classes) tensor, got %s %v", x.DType(), x.Dims())
	}
	dt, err := randomOutputType(n, graph.Int32, func(dt tensor.DType) bool { return dt == graph.Int32 || dt == graph.Int64 })
	if err != nil {
		return nil, err
	}
	samples := n.AttrInt("sample_size", 1)
	batch, classes := int(x.Dims()[0]), int(x.Dims()[1])
	shape := []int64{x.Dims()[0], samples}
	if _, err := tensor.ElementCount(shape); err != nil || samples < 0 {
		return nil, fmt.Errorf("Multinomial: sample_size %d with batch %d is out of range", samples, batch)
	}
	if classes == 0 && samples > 0 && batch > 0 {
		return nil, fmt.Errorf("Multinomial: input %v has no classes to draw from", x.Dims())
	}
	if err := ops.ReserveShape(rc, "the output", dt, shape, 8); err != nil {
		return nil, err
	}
	logits := tensor.Float64s(x)
	r := randomSource(n)
	out := make([]float64, 0, batch*int(samples))
	cdf := make([]float64, classes)
	for b := 0; b < batch; b++ {
		row := logits[b*classes : (b+1)*classes]
		top := math.Inf(-1)
		for k, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 1) {
				return nil, fmt.Errorf("Multinomial: log-probability %g at row %d class %d", v, b, k)
			}
			top = max(top, v)
		}
		if math.IsInf(top, -1) && samples > 0 {
			return nil, fmt.Errorf("Multinomial: row %d has no class with nonzero probability", b)
		}
		total := 0.0
		for k, v := range row {
			total += math.Exp(v - top)
			cdf[k] = total
		}
		for s := int64(0); s < samples; s++ {
			u := r.Float64() * total
			// The first class whose cumulative mass exceeds u; a class of zero mass never is.
			out = append(out, float64(sort.Search(classes, func(k int) bool { return cdf[k] > u })))
		}
	}
	return ops.FloatResult(dt, shape, out)
}

// dropoutTraining is Dropout with training_mode true (opset 12 on): each element is kept with
// probability 1 - ratio and scaled by 1/(1 - ratio), or dropped to zero; the mask output says
// which were kept. Ratio 0 keeps everything.
func dropoutTraining(n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if !x.DType().IsFloat() {
		return nil, fmt.Errorf("Dropout: data element type %s is not a float type", x.DType())
	}
	ratio := 0.5
	if t := ops.Optional(in, 1); t.IsValid() {
		if t.Len() != 1 {
			return nil, fmt.Errorf("Dropout: ratio must be a scalar, got shape %v", t.Dims())
		}
		ratio = tensor.Float64s(t)[0]
	}
	if !(ratio >= 0 && ratio < 1) {
		return nil, fmt.Errorf("Dropout: ratio %g is outside [0, 1)", ratio)
	}
	v := tensor.Float64s(x)
	mask := make([]bool, len(v))
	r := randomSource(n)
	scale := 1 / (1 - ratio)
	for i := range v {
		mask[i] = ratio == 0 || r.Float64() >= ratio
		if mask[i] {
			v[i] *= scale
		} else {
			v[i] = 0
		}
	}
	y, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{y, tensor.Raw(graph.Bool, append([]int64{}, x.Dims()...), mask)}, nil
}
