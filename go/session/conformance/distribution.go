package conformance

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// Random operators draw their outputs, so a test whose model holds one cannot be judged by
// value: its expected output is one draw of the reference generator. Such a test is judged by
// distribution instead. Element type and shape must match the expected output exactly; every
// output that depends on a random operator must fit the distribution the graph gives it (the
// random op's own, or one derived through Identity, Cast and comparisons with given tensors;
// training-mode Dropout counts as a random op); outputs that do not depend on one are compared
// by value as usual.
//
// The bounds. Support rules are exact (Bernoulli values in {0, 1}, p = 0 gives 0 and p = 1
// gives 1; uniform values in [low, high); Multinomial indices in range and never a class of
// zero probability; Dropout outputs 0 or data/(1 - ratio)). Every statistical check is sized so that a correct generator fails it with
// probability at most falseFailure (union bounds where one check tests several quantities):
// Bernstein's inequality for Bernoulli sums and Multinomial class counts, Hoeffding's for the
// uniform mean and variance, the exact normal tail for the normal mean and extremes, and the
// Laurent-Massart chi-square bounds for the normal variance. Rounding to the output type widens
// each bound by the largest rounding error. Outputs without a seed are sampled over repeated
// runs until about targetDraws values are in hand, which gives the checks their power (400 runs
// of a 10-element Bernoulli output detect a mean off by 0.044 and any one probability off by
// 0.18). A seeded output is judged on one run, where the statistical bounds are loose for tiny
// outputs, so two more rules apply to all outputs: a constant output of a continuous
// distribution fails, and so do two runs that drew exactly the same values without a seed,
// each only where a correct generator does that with probability below falseFailure. A seeded
// output must come out the same on every run.

// randomOps are the ONNX operators whose outputs are drawn at random; Dropout is one too when
// it has a training_mode input (see isRandomNode).
var randomOps = map[string]bool{
	"Bernoulli": true, "RandomUniform": true, "RandomUniformLike": true,
	"RandomNormal": true, "RandomNormalLike": true, "Multinomial": true,
}

// isRandomNode reports whether n may draw at random.
func isRandomNode(n *graph.Node) bool {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return false
	}
	return randomOps[n.OpType] || n.OpType == "Dropout" && n.Input(2) != ""
}

const (
	// falseFailure bounds the probability that one check fails a correct generator.
	falseFailure = 1e-7
	// targetDraws is how many values an unseeded random output is judged on, over repeated
	// runs; maxRuns caps the runs, and maxValues the values kept in all.
	targetDraws = 4096
	maxRuns     = 400
	maxValues   = 1 << 22
)

// hasRandomOps reports whether g or one of its subgraphs holds a random operator.
func hasRandomOps(g *graph.Graph) bool {
	for _, n := range g.Nodes {
		if isRandomNode(n) {
			return true
		}
		for _, sg := range n.Subgraphs() {
			if hasRandomOps(sg) {
				return true
			}
		}
	}
	return false
}

// judgeByDistribution judges one test data set of a model with random operators: got holds the
// outputs of the first run of feeds. It returns a note saying how the outputs were judged, or
// a failure message.
func judgeByDistribution(s *session.InferenceSession, g *graph.Graph, set string, feeds []session.NamedTensor, got []session.Tensor, opts Options) (note, fail string) {
	d := newDerivation(g, feeds)
	type judged struct {
		index  int
		name   string
		law    law
		seeded bool
		runs   [][]float64
	}
	var random []*judged
	smallest := math.MaxInt
	for i := range got {
		name := s.Outputs()[i].Name
		want, err := readExpected(set, i, got[i].DType())
		if err != nil {
			return "", err.Error()
		}
		if !d.dependsOnRandom(name) {
			if msg := Compare(got[i], want, opts.RTol, opts.ATol); msg != "" {
				return "", fmt.Sprintf("output %d (%s): %s", i, name, msg)
			}
			continue
		}
		if got[i].DType() != want.DType() {
			return "", fmt.Sprintf("output %d (%s): element type %s, want %s", i, name, got[i].DType(), want.DType())
		}
		if fmt.Sprint(got[i].Shape()) != fmt.Sprint(want.Shape()) {
			return "", fmt.Sprintf("output %d (%s): shape %v, want %v", i, name, got[i].Shape(), want.Shape())
		}
		l, seeded, err := d.lawOf(name, got[i].Shape())
		if err != nil {
			return "", fmt.Sprintf("output %d (%s): cannot judge by distribution: %v", i, name, err)
		}
		random = append(random, &judged{index: i, name: name, law: l, seeded: seeded, runs: [][]float64{values(got[i])}})
		smallest = min(smallest, max(got[i].Len(), 1))
	}
	if len(random) == 0 {
		return "", ""
	}
	// Two runs at least, so that seeded outputs show they repeat; more while unseeded outputs
	// need draws.
	runs := 2
	total := 0
	for _, j := range random {
		total += len(j.runs[0])
		if !j.seeded {
			runs = max(runs, min(maxRuns, (targetDraws+smallest-1)/smallest))
		}
	}
	runs = max(2, min(runs, maxValues/max(total, 1)))
	for r := 1; r < runs; r++ {
		again, err := s.Run(context.Background(), feeds)
		if err != nil {
			return "", fmt.Sprintf("run %d: %v", r+1, err)
		}
		for _, j := range random {
			t := again[j.index]
			if t.DType() != got[j.index].DType() || fmt.Sprint(t.Shape()) != fmt.Sprint(got[j.index].Shape()) {
				return "", fmt.Sprintf("output %d (%s): run %d gave %s %v, the first %s %v", j.index, j.name, r+1,
					t.DType(), t.Shape(), got[j.index].DType(), got[j.index].Shape())
			}
			j.runs = append(j.runs, values(t))
		}
	}
	var notes []string
	for _, j := range random {
		dt := got[j.index].DType()
		first, second := j.runs[0], j.runs[1]
		if j.seeded {
			for r, run := range j.runs[1:] {
				if k := firstDifference(first, run); k >= 0 {
					return "", fmt.Sprintf("output %d (%s) has a seed but run %d differs from the first at element %d (%v, first %v)",
						j.index, j.name, r+2, k, run[k], first[k])
				}
			}
			j.runs = j.runs[:1]
		} else if firstDifference(first, second) < 0 && j.law.coincidence(len(first), dt) <= falseFailure {
			return "", fmt.Sprintf("output %d (%s) has no seed but two runs drew the same %d values", j.index, j.name, len(first))
		}
		if msg := j.law.judge(j.runs, dt); msg != "" {
			return "", fmt.Sprintf("output %d (%s) does not fit %s: %s", j.index, j.name, j.law, msg)
		}
		how := fmt.Sprintf("%d runs of %d values", len(j.runs), len(first))
		if j.seeded {
			how = fmt.Sprintf("one run of %d values; seeded, and %d runs agreed", len(first), runs)
		}
		notes = append(notes, fmt.Sprintf("%s ~ %s (%s)", j.name, j.law, how))
	}
	return "checked by distribution: " + strings.Join(notes, "; "), ""
}

// readExpected reads output_i.pb of a test data set, as the value comparison does.
func readExpected(set string, i int, gotType graph.DataType) (session.Tensor, error) {
	b, err := os.ReadFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
	if err != nil {
		return session.Tensor{}, fmt.Errorf("output_%d.pb: %v", i, err)
	}
	want, _, err := DecodeTensor(b)
	if err != nil {
		return session.Tensor{}, fmt.Errorf("output_%d.pb: %v", i, err)
	}
	if gotType == graph.BFloat16 && want.DType() == graph.Uint16 {
		want = bfloat16Quirk(want, graph.BFloat16)
	}
	return want, nil
}

// firstDifference is the first index where a and b differ (NaN equals NaN), or -1.
func firstDifference(a, b []float64) int {
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return i
		}
	}
	return -1
}

// derivation finds the distribution of graph values from the random operators they come from.
type derivation struct {
	g        *graph.Graph
	producer map[string]*graph.Node
	feeds    map[string]session.Tensor
	random   map[string]bool
}

func newDerivation(g *graph.Graph, feeds []session.NamedTensor) *derivation {
	d := &derivation{g: g, producer: map[string]*graph.Node{}, feeds: map[string]session.Tensor{}, random: map[string]bool{}}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			d.producer[o] = n
		}
	}
	for _, f := range feeds {
		d.feeds[f.Name] = f.Tensor
	}
	return d
}

// dependsOnRandom reports whether a value is computed from a random operator (a node with a
// subgraph holding one counts as random itself).
func (d *derivation) dependsOnRandom(name string) bool {
	if r, ok := d.random[name]; ok {
		return r
	}
	d.random[name] = false // graphs are acyclic; this only guards malformed ones
	n := d.producer[name]
	r := false
	if n != nil {
		r = isRandomNode(n)
		for _, sg := range n.Subgraphs() {
			r = r || hasRandomOps(sg)
		}
		for _, in := range n.Inputs {
			r = r || (in != "" && d.dependsOnRandom(in))
		}
	}
	d.random[name] = r
	return r
}

// given returns a value that is known before the run: a feed, an initializer or a Constant.
func (d *derivation) given(name string) (session.Tensor, error) {
	if t, ok := d.feeds[name]; ok {
		return t, nil
	}
	if gt := d.g.Initializers[name]; gt != nil {
		return session.FromGraphTensor(gt)
	}
	if n := d.producer[name]; n != nil && n.OpType == "Constant" {
		gt, err := graph.ConstantValue(n)
		if err != nil {
			return session.Tensor{}, err
		}
		return session.FromGraphTensor(gt)
	}
	return session.Tensor{}, fmt.Errorf("%q is computed in the graph; only given tensors can parameterize a distribution", name)
}

// lawOf derives the distribution of a random value of the given shape, and whether its random
// source has a seed.
func (d *derivation) lawOf(name string, shape []int64) (law, bool, error) {
	n := d.producer[name]
	if n == nil {
		return nil, false, fmt.Errorf("%q has no producer", name)
	}
	seeded := n.Attr("seed") != nil
	switch n.OpType {
	case "Bernoulli":
		p, err := d.given(n.Input(0))
		if err != nil {
			return nil, false, fmt.Errorf("Bernoulli: %v", err)
		}
		return bernoulliLaw{p: values(p), of: n.Input(0)}, seeded, nil
	case "RandomUniform", "RandomUniformLike":
		return uniformLaw{low: float64(n.AttrFloat("low", 0)), high: float64(n.AttrFloat("high", 1))}, seeded, nil
	case "RandomNormal", "RandomNormalLike":
		return normalLaw{mean: float64(n.AttrFloat("mean", 0)), scale: float64(n.AttrFloat("scale", 1))}, seeded, nil
	case "Multinomial":
		x, err := d.given(n.Input(0))
		if err != nil {
			return nil, false, fmt.Errorf("Multinomial: %v", err)
		}
		l, err := newMultinomialLaw(x, n.Input(0))
		return l, seeded, err
	case "Dropout":
		return d.dropoutLaw(n, name)
	case "Identity":
		return d.lawOf(n.Input(0), shape)
	case "Cast":
		inner, seeded, err := d.lawOf(n.Input(0), shape)
		if err != nil {
			return nil, false, err
		}
		if b, ok := inner.(bernoulliLaw); ok { // 0 and 1 survive a cast to any numeric type
			return b, seeded, nil
		}
		return nil, false, fmt.Errorf("Cast of %s: only casts of 0/1 values are derived", inner)
	case "Greater", "GreaterOrEqual", "Less", "LessOrEqual":
		return d.comparisonLaw(n, shape)
	}
	return nil, false, fmt.Errorf("%q comes from %s, through which the runner derives no distribution", name, n.OpType)
}

// comparisonLaw derives the Bernoulli law of comparing an elementwise independent continuous
// random value with a given tensor of the output's shape (or one element).
func (d *derivation) comparisonLaw(n *graph.Node, shape []int64) (law, bool, error) {
	a, b := n.Input(0), n.Input(1)
	randomFirst := d.dependsOnRandom(a)
	rnd, fixed := a, b
	if !randomFirst {
		rnd, fixed = b, a
	}
	if d.dependsOnRandom(fixed) {
		return nil, false, fmt.Errorf("%s of two random values is not derived", n.OpType)
	}
	inner, seeded, err := d.lawOf(rnd, shape)
	if err != nil {
		return nil, false, err
	}
	c, ok := inner.(continuousLaw)
	if !ok {
		return nil, false, fmt.Errorf("%s of %s: only continuous distributions are derived", n.OpType, inner)
	}
	count := 1
	for _, v := range shape {
		count *= int(v)
	}
	// Each output element must read its own draw: a broadcast random operand would make the
	// elements dependent.
	if v := d.g.Values[rnd]; v == nil || !v.Type.Ranked {
		return nil, false, fmt.Errorf("the shape of %q is unknown", rnd)
	} else if dims, ok := v.Type.Shape.Ints(); !ok || fmt.Sprint(dims) != fmt.Sprint(shape) {
		return nil, false, fmt.Errorf("%q has shape %v, not the output's %v", rnd, v.Type.Shape, shape)
	}
	t, err := d.given(fixed)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %v", n.OpType, err)
	}
	x := values(t)
	if len(x) != count && len(x) != 1 {
		return nil, false, fmt.Errorf("%s: %q has %d elements, not 1 or the output's %d", n.OpType, fixed, len(x), count)
	}
	// Rewrite as "random above x" (Greater(r, x), Less(x, r)) or "random below x".
	above := (n.OpType == "Greater" || n.OpType == "GreaterOrEqual") == randomFirst
	strict := n.OpType == "Greater" || n.OpType == "Less"
	p := make([]float64, count)
	for i := range p {
		xi := x[min(i, len(x)-1)]
		if above {
			p[i] = c.above(xi, strict)
		} else {
			p[i] = 1 - c.above(xi, !strict) // below x strictly = not (at or above x)
		}
	}
	op := map[bool]string{true: ">", false: "<"}[above]
	if !strict {
		op += "="
	}
	return bernoulliLaw{p: p, of: fmt.Sprintf("P(%s %s %s)", inner, op, fixed)}, seeded, nil
}

// dropoutLaw derives the laws of a training-mode Dropout's outputs: the mask is Bernoulli with
// p = 1 - ratio (1 when training_mode is false or ratio 0), the output is the data scaled by
// 1/(1 - ratio) where the mask is set and zero elsewhere.
func (d *derivation) dropoutLaw(n *graph.Node, name string) (law, bool, error) {
	keep, scale := 1.0, 1.0
	training, err := d.given(n.Input(2))
	if err != nil {
		return nil, false, fmt.Errorf("Dropout training_mode: %v", err)
	}
	if t := values(training); len(t) == 1 && t[0] != 0 {
		ratio := 0.5
		if n.Input(1) != "" {
			r, err := d.given(n.Input(1))
			if err != nil {
				return nil, false, fmt.Errorf("Dropout ratio: %v", err)
			}
			if v := values(r); len(v) == 1 {
				ratio = v[0]
			}
		}
		keep, scale = 1-ratio, 1/(1-ratio)
	}
	seeded := n.Attr("seed") != nil
	mask := bernoulliLaw{p: []float64{keep}, of: fmt.Sprintf("%.6g", keep)}
	if len(n.Outputs) > 1 && name == n.Outputs[1] {
		return mask, seeded, nil
	}
	x, err := d.given(n.Input(0))
	if err != nil {
		return nil, false, fmt.Errorf("Dropout data: %v", err)
	}
	return dropoutOutput{x: values(x), scale: scale, mask: mask, of: n.Input(0)}, seeded, nil
}

// law is a distribution of an output's elements.
type law interface {
	fmt.Stringer
	// judge checks the values of one or more runs (each all of the output's elements in order)
	// of an output of element type dt; "" when they fit.
	judge(runs [][]float64, dt graph.DataType) string
	// coincidence bounds the probability that two independent runs of n elements of type dt
	// agree exactly.
	coincidence(n int, dt graph.DataType) float64
}

// continuousLaw is a law of independent elements with a distribution function.
type continuousLaw interface {
	law
	// above is the probability that an element exceeds x (or equals it, when not strict).
	above(x float64, strict bool) float64
}

// bernsteinBound is the deviation t with P(|S - E S| >= t) <= delta for a sum S of independent
// terms within 1 of their means whose variances sum to variance (Bernstein's inequality).
func bernsteinBound(variance, delta float64) float64 {
	l := math.Log(2 / delta)
	return l/3 + math.Sqrt(l*l/9+2*l*variance)
}

// epsilon is the relative spacing of the float type dt (one unit in the last place at 1).
func epsilon(dt graph.DataType) float64 {
	switch dt {
	case graph.Float16:
		return 0x1p-10
	case graph.BFloat16:
		return 0x1p-7
	case graph.Float:
		return 0x1p-23
	}
	return 0x1p-52
}

// checkFinite reports the first value that is NaN or infinite.
func checkFinite(runs [][]float64) string {
	for r, run := range runs {
		for i, v := range run {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Sprintf("run %d element %d is %v", r+1, i, v)
			}
		}
	}
	return ""
}

// constantRun reports a run of at least two elements that are all equal, when a correct
// generator whose largest probability of one value is atom does that with probability below
// falseFailure.
func constantRun(runs [][]float64, atom float64) string {
	for r, run := range runs {
		if len(run) < 2 || math.Pow(atom, float64(len(run)-1)) > falseFailure {
			continue
		}
		same := true
		for _, v := range run[1:] {
			same = same && v == run[0]
		}
		if same {
			return fmt.Sprintf("run %d is constant (all %d values %v)", r+1, len(run), run[0])
		}
	}
	return ""
}

// bernoulliLaw: element i is 1 with probability p[i] (one p for all when p has one element).
type bernoulliLaw struct {
	p  []float64
	of string // where p comes from, for messages
}

func (b bernoulliLaw) String() string { return fmt.Sprintf("Bernoulli(p = %s)", b.of) }

func (b bernoulliLaw) prob(i int) float64 { return b.p[min(i, len(b.p)-1)] }

func (b bernoulliLaw) coincidence(n int, _ graph.DataType) float64 {
	c := 1.0
	for i := 0; i < n; i++ {
		p := b.prob(i)
		c *= p*p + (1-p)*(1-p)
	}
	return c
}

func (b bernoulliLaw) judge(runs [][]float64, _ graph.DataType) string {
	n := len(runs[0])
	if len(b.p) != n && len(b.p) != 1 {
		return fmt.Sprintf("%d probabilities for %d elements", len(b.p), n)
	}
	for i := 0; i < n; i++ {
		if p := b.prob(i); !(p >= 0 && p <= 1) {
			return fmt.Sprintf("probability %v at element %d is outside [0, 1]", p, i)
		}
	}
	counts := make([]float64, n)
	for r, run := range runs {
		for i, v := range run {
			p := b.prob(i)
			switch {
			case v != 0 && v != 1:
				return fmt.Sprintf("run %d element %d is %v, not 0 or 1", r+1, i, v)
			case p == 0 && v != 0, p == 1 && v != 1:
				return fmt.Sprintf("run %d element %d is %v though p is %v", r+1, i, v, p)
			}
			counts[i] += v
		}
	}
	// The mean over all draws, then (with more than one run) each element's frequency; half
	// the failure budget each.
	runsF := float64(len(runs))
	sum, want, variance := 0.0, 0.0, 0.0
	for i, c := range counts {
		p := b.prob(i)
		sum += c
		want += runsF * p
		variance += runsF * p * (1 - p)
	}
	draws := runsF * float64(n)
	if t := bernsteinBound(variance, falseFailure/2); math.Abs(sum-want) > t {
		return fmt.Sprintf("mean of %d draws is %.4f, want %.4f ± %.4f", int(draws), sum/draws, want/draws, t/draws)
	}
	if len(runs) > 1 {
		for i, c := range counts {
			p := b.prob(i)
			if t := bernsteinBound(runsF*p*(1-p), falseFailure/2/float64(n)); math.Abs(c-runsF*p) > t {
				return fmt.Sprintf("element %d was 1 in %d of %d runs, want p = %.4f ± %.4f", i, int(c), len(runs), p, t/runsF)
			}
		}
	}
	return ""
}

// uniformLaw: independent elements uniform on [low, high).
type uniformLaw struct{ low, high float64 }

func (u uniformLaw) String() string { return fmt.Sprintf("Uniform[%g, %g)", u.low, u.high) }

func (u uniformLaw) above(x float64, strict bool) float64 {
	if u.high == u.low {
		if u.low > x || !strict && u.low == x {
			return 1
		}
		return 0
	}
	return math.Max(0, math.Min(1, (u.high-x)/(u.high-u.low)))
}

// atom bounds the probability of one value of type dt: its rounding interval's share of the
// range.
func (u uniformLaw) atom(dt graph.DataType) float64 {
	if u.high == u.low {
		return 1
	}
	return math.Min(1, 2*epsilon(dt)*math.Max(math.Abs(u.low), math.Abs(u.high))/(u.high-u.low))
}

func (u uniformLaw) coincidence(n int, dt graph.DataType) float64 {
	return math.Pow(u.atom(dt), float64(n))
}

func (u uniformLaw) judge(runs [][]float64, dt graph.DataType) string {
	if msg := checkFinite(runs); msg != "" {
		return msg
	}
	for r, run := range runs {
		for i, v := range run {
			if v < u.low || v >= u.high && !(u.low == u.high && v == u.low) {
				return fmt.Sprintf("run %d element %d is %v, outside [%g, %g)", r+1, i, v, u.low, u.high)
			}
		}
	}
	if u.high == u.low {
		return ""
	}
	if msg := constantRun(runs, u.atom(dt)); msg != "" {
		return msg
	}
	// Hoeffding for the mean and for the mean squared deviation from the centre (each term in
	// [0, width²/4]), half the failure budget each, widened by the rounding error.
	width, centre := u.high-u.low, (u.low+u.high)/2
	rounding := epsilon(dt) * math.Max(math.Abs(u.low), math.Abs(u.high))
	n := 0.0
	sum, sq := 0.0, 0.0
	for _, run := range runs {
		for _, v := range run {
			n++
			sum += v
			sq += (v - centre) * (v - centre)
		}
	}
	spread := math.Sqrt(math.Log(4/falseFailure) / (2 * n))
	if t := width*spread + rounding; math.Abs(sum/n-centre) > t {
		return fmt.Sprintf("mean of %d values is %.6g, want %.6g ± %.3g", int(n), sum/n, centre, t)
	}
	wantVar := width * width / 12
	if t := width*width/4*spread + rounding*(width+rounding); math.Abs(sq/n-wantVar) > t {
		return fmt.Sprintf("variance of %d values is %.6g, want %.6g ± %.3g", int(n), sq/n, wantVar, t)
	}
	return ""
}

// normalLaw: independent normal elements with the given mean and standard deviation.
type normalLaw struct{ mean, scale float64 }

func (g normalLaw) String() string { return fmt.Sprintf("Normal(mean %g, scale %g)", g.mean, g.scale) }

func (g normalLaw) above(x float64, strict bool) float64 {
	if g.scale == 0 {
		if g.mean > x || !strict && g.mean == x {
			return 1
		}
		return 0
	}
	return 0.5 * math.Erfc((x-g.mean)/(g.scale*math.Sqrt2))
}

// rounding bounds the error of rounding a value within reach (|x - mean| <= reach·scale) to dt.
func (g normalLaw) rounding(dt graph.DataType, reach float64) float64 {
	return epsilon(dt) * (math.Abs(g.mean) + reach*g.scale)
}

// atom bounds the probability of one value of type dt: the density's peak times the widest
// rounding interval within 10 standard deviations (beyond that, the tail is below 1e-23).
func (g normalLaw) atom(dt graph.DataType) float64 {
	if g.scale == 0 {
		return 1
	}
	return math.Min(1, 2*g.rounding(dt, 10)/(g.scale*math.Sqrt(2*math.Pi))+1e-23)
}

func (g normalLaw) coincidence(n int, dt graph.DataType) float64 {
	return math.Pow(g.atom(dt), float64(n))
}

func (g normalLaw) judge(runs [][]float64, dt graph.DataType) string {
	if msg := checkFinite(runs); msg != "" {
		return msg
	}
	n := 0
	for _, run := range runs {
		n += len(run)
	}
	if g.scale == 0 {
		for r, run := range runs {
			for i, v := range run {
				if math.Abs(v-g.mean) > g.rounding(dt, 0) {
					return fmt.Sprintf("run %d element %d is %v, want %g (scale 0)", r+1, i, v, g.mean)
				}
			}
		}
		return ""
	}
	if msg := constantRun(runs, g.atom(dt)); msg != "" {
		return msg
	}
	// A third of the failure budget each for the extremes, the mean and the variance.
	delta := falseFailure / 3
	reach := math.Sqrt2 * math.Erfcinv(delta/float64(n))
	rounding := g.rounding(dt, reach)
	sum, low, high := 0.0, 0.0, 0.0
	for r, run := range runs {
		for i, v := range run {
			dev := math.Abs(v - g.mean)
			if dev > reach*g.scale+rounding {
				return fmt.Sprintf("run %d element %d is %v, %.1f standard deviations out (a correct generator reaches %.1f with probability %.0e)",
					r+1, i, v, dev/g.scale, reach, delta)
			}
			sum += v
			low += math.Pow(math.Max(dev-rounding, 0)/g.scale, 2)
			high += math.Pow((dev+rounding)/g.scale, 2)
		}
	}
	nf := float64(n)
	if t := math.Sqrt2*math.Erfcinv(delta)*g.scale/math.Sqrt(nf) + rounding; math.Abs(sum/nf-g.mean) > t {
		return fmt.Sprintf("mean of %d values is %.6g, want %g ± %.3g", n, sum/nf, g.mean, t)
	}
	// Sum of squared standardized deviations ~ chi-square(n): Laurent and Massart's bounds.
	x := math.Log(2 / delta)
	upper, lower := nf+2*math.Sqrt(nf*x)+2*x, nf-2*math.Sqrt(nf*x)
	if low > upper || high < lower {
		return fmt.Sprintf("standard deviation of %d values is %.4g, want %g within [%.4g, %.4g]", n,
			g.scale*math.Sqrt((low+high)/2/nf), g.scale, g.scale*math.Sqrt(math.Max(lower, 0)/nf), g.scale*math.Sqrt(upper/nf))
	}
	return ""
}

// multinomialLaw: row b of the (batch, samples) output holds independent class indices drawn
// with probabilities probs[b].
type multinomialLaw struct {
	probs [][]float64
	of    string
}

func newMultinomialLaw(x session.Tensor, name string) (law, error) {
	shape := x.Shape()
	if len(shape) != 2 {
		return nil, fmt.Errorf("Multinomial input %q has shape %v, want (batch, classes)", name, shape)
	}
	v := values(x)
	classes := int(shape[1])
	m := multinomialLaw{of: name}
	for b := 0; b < int(shape[0]); b++ {
		row := v[b*classes : (b+1)*classes]
		top := math.Inf(-1)
		for _, l := range row {
			top = math.Max(top, l)
		}
		p := make([]float64, classes)
		total := 0.0
		for k, l := range row {
			p[k] = math.Exp(l - top)
			total += p[k]
		}
		for k := range p {
			p[k] /= total
		}
		m.probs = append(m.probs, p)
	}
	return m, nil
}

func (m multinomialLaw) String() string {
	return fmt.Sprintf("Multinomial(p = softmax(%s))", m.of)
}

func (m multinomialLaw) coincidence(n int, _ graph.DataType) float64 {
	if len(m.probs) == 0 {
		return 1
	}
	samples := n / len(m.probs)
	c := 1.0
	for _, p := range m.probs {
		same := 0.0
		for _, q := range p {
			same += q * q
		}
		c *= math.Pow(same, float64(samples))
	}
	return c
}

func (m multinomialLaw) judge(runs [][]float64, _ graph.DataType) string {
	batch := len(m.probs)
	n := len(runs[0])
	if batch == 0 {
		if n != 0 {
			return fmt.Sprintf("%d values for an empty batch", n)
		}
		return ""
	}
	if n%batch != 0 {
		return fmt.Sprintf("%d values do not split into %d rows", n, batch)
	}
	samples := n / batch
	classes := len(m.probs[0])
	counts := make([][]float64, batch)
	for b := range counts {
		counts[b] = make([]float64, classes)
	}
	for r, run := range runs {
		for i, v := range run {
			b := i / samples
			k := int(v)
			if v != math.Trunc(v) || k < 0 || k >= classes {
				return fmt.Sprintf("run %d row %d draw %d is %v, not a class index in [0, %d)", r+1, b, i%samples, v, classes)
			}
			if m.probs[b][k] == 0 {
				return fmt.Sprintf("run %d row %d draw %d is class %d, whose probability is 0", r+1, b, i%samples, k)
			}
			counts[b][k]++
		}
	}
	draws := float64(len(runs) * samples)
	delta := falseFailure / float64(batch*classes)
	for b, row := range counts {
		for k, c := range row {
			p := m.probs[b][k]
			if t := bernsteinBound(draws*p*(1-p), delta); math.Abs(c-draws*p) > t {
				return fmt.Sprintf("row %d drew class %d %d times in %d, want frequency %.4f ± %.4f", b, k, int(c), int(draws), p, t/draws)
			}
		}
	}
	return ""
}

// dropoutOutput: element i is x[i]·scale where the Bernoulli mask keeps it, else 0.
type dropoutOutput struct {
	x     []float64
	scale float64
	mask  bernoulliLaw
	of    string
}

func (o dropoutOutput) String() string {
	return fmt.Sprintf("Dropout(%s · %.6g, kept with p = %s)", o.of, o.scale, o.mask.of)
}

func (o dropoutOutput) coincidence(n int, dt graph.DataType) float64 {
	nonzero := 0
	for _, v := range o.x {
		if v != 0 {
			nonzero++
		}
	}
	return o.mask.coincidence(nonzero, dt)
}

// judge reads the mask back from the values (zero for dropped, data·scale for kept) where the
// data is not zero, and judges it as Bernoulli draws.
func (o dropoutOutput) judge(runs [][]float64, dt graph.DataType) string {
	if len(runs[0]) != len(o.x) {
		return fmt.Sprintf("%d values for %d data elements", len(runs[0]), len(o.x))
	}
	kept := make([][]float64, len(runs))
	for r, run := range runs {
		for i, v := range run {
			want := o.x[i] * o.scale
			switch {
			case v == 0:
				if o.x[i] != 0 {
					kept[r] = append(kept[r], 0)
				}
			case math.Abs(v-want) <= 2*epsilon(dt)*math.Abs(want):
				kept[r] = append(kept[r], 1)
			default:
				return fmt.Sprintf("run %d element %d is %v, neither 0 nor %v (data %v scaled by %.6g)", r+1, i, v, want, o.x[i], o.scale)
			}
		}
	}
	if len(kept[0]) == 0 {
		return ""
	}
	return o.mask.judge(kept, dt)
}
