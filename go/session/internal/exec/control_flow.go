package exec

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/movement"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ControlFlow runs If, Loop, Scan and SequenceMap with their subgraphs in a child scope. Loop
// carries sequences and optionals like tensors; its trip count, condition and scan outputs
// must be tensors.
func (rc *RunCtx) ControlFlow(n *graph.Node, in []tensor.Tensor, sc *Scope) ([]tensor.Tensor, error) {
	switch n.OpType {
	case "If":
		if len(in) > 0 && tensor.Box(in[0]) != nil {
			return nil, fmt.Errorf("If condition is %s (%s), not a tensor", tensor.Article(in[0]), in[0])
		}
		if len(in) == 0 || !in[0].IsValid() || in[0].Len() != 1 {
			return nil, fmt.Errorf("If condition must be one element")
		}
		branch := "else_branch"
		if tensor.Float64s(in[0])[0] != 0 {
			branch = "then_branch"
		}
		a := n.Attr(branch)
		if a == nil || a.Graph == nil {
			return nil, fmt.Errorf("If has no %s", branch)
		}
		outs, err := rc.evalBody(n.OpType, a.Graph, &Scope{Vals: map[string]tensor.Tensor{}, parent: sc})
		if err == nil && sc != nil && sc.parent == nil && rc.TraceUntaken != nil && rc.TraceUntaken(n) {
			rc.traceUntaken(n, branch, sc)
		}
		return outs, err
	case "Loop":
		body := n.Attr("body")
		if body == nil || body.Graph == nil {
			return nil, fmt.Errorf("Loop has no body")
		}
		g := body.Graph
		if len(in) < 2 {
			return nil, fmt.Errorf("Loop needs the trip count and condition inputs (possibly empty)")
		}
		for i, what := range []string{"trip count", "condition"} {
			if tensor.Box(in[i]) != nil {
				return nil, fmt.Errorf("Loop %s is %s (%s), not a tensor", what, tensor.Article(in[i]), in[i])
			}
			if in[i].IsValid() && in[i].Len() != 1 {
				return nil, fmt.Errorf("Loop %s has %d elements, want 1", what, in[i].Len())
			}
		}
		maxTrip := int64(math.MaxInt64)
		if in[0].IsValid() {
			maxTrip = tensor.Int64s(in[0])[0]
		}
		cond := true
		if in[1].IsValid() {
			cond = tensor.Float64s(in[1])[0] != 0
		}
		carried := append([]tensor.Tensor{}, in[2:]...)
		nCarried := len(carried)
		if len(g.Inputs) != 2+nCarried {
			return nil, fmt.Errorf("Loop body has %d inputs for %d loop-carried values (want 2 + %d)", len(g.Inputs), nCarried, nCarried)
		}
		if len(g.Outputs) < 1+nCarried {
			return nil, fmt.Errorf("Loop body has %d outputs for %d loop-carried values (want at least 1 + %d)", len(g.Outputs), nCarried, nCarried)
		}
		var scans [][]tensor.Tensor
		var scanElems []int64 // each scan output's elements so far: checked against the limit as it grows
		// What the node holds between iterations is reserved from the memory budget: the
		// carried values (those of the last iteration only) and the scan outputs so far.
		var carriedBytes uint64
		for it := int64(0); it < maxTrip && cond; it++ {
			if err := rc.iteration(n, it); err != nil {
				return nil, err
			}
			inner := &Scope{Vals: map[string]tensor.Tensor{}, parent: sc}
			inner.Vals[g.Inputs[0].Name] = ops.I64Tensor(nil, []int64{it})
			inner.Vals[g.Inputs[1].Name] = tensor.Raw(graph.Bool, nil, []bool{cond})
			for i, t := range carried {
				inner.Vals[g.Inputs[2+i].Name] = t
			}
			outs, err := rc.evalBody(n.OpType, g, inner)
			if err != nil {
				return nil, err
			}
			if tensor.Box(outs[0]) != nil || outs[0].Len() != 1 {
				return nil, fmt.Errorf("Loop body condition output is %s, want one element", outs[0])
			}
			cond = tensor.Float64s(outs[0])[0] != 0
			carried = outs[1 : 1+nCarried]
			if err := rc.reserveCarried(&carriedBytes, carried, "the loop-carried values", it+1); err != nil {
				return nil, err
			}
			if scans == nil {
				scans = make([][]tensor.Tensor, len(outs)-1-nCarried)
				scanElems = make([]int64, len(scans))
			}
			for i, t := range outs[1+nCarried:] {
				if tensor.Box(t) != nil {
					return nil, fmt.Errorf("Loop scan output %d is %s (%s); scan outputs must be tensors", i, tensor.Article(t), t)
				}
				scanElems[i] += int64(t.Len())
				what := fmt.Sprintf("Loop scan output %d after %d iterations", i, it+1)
				if err := ops.CheckCount(rc, what, float64(scanElems[i])); err != nil {
					return nil, err
				}
				if err := rc.Reserve(what, valueBytes(t)); err != nil {
					return nil, err
				}
				scans[i] = append(scans[i], t)
			}
		}
		res := append([]tensor.Tensor{}, carried...)
		for i := range len(n.Outputs) - nCarried {
			if i >= len(scans) || len(scans[i]) == 0 {
				return nil, fmt.Errorf("Loop produced no iterations for scan output %d", i)
			}
			if err := reserveJoined(rc, fmt.Sprintf("Loop scan output %d", i), scans[i]); err != nil {
				return nil, err
			}
			joined, err := ops.ConcatFlat(scans[i]...)
			if err != nil {
				return nil, err
			}
			res = append(res, tensor.Reshaped(joined, append([]int64{int64(len(scans[i]))}, scans[i][0].Dims()...)))
		}
		return res, nil
	case "Scan":
		return rc.scan(n, in, sc)
	case "SequenceMap":
		return rc.sequenceMap(n, in, sc)
	}
	return nil, fmt.Errorf("%s is not supported", n.OpType)
}

// scanOnce runs Scan-9 semantics on states and scan inputs (no batch axis).
func (rc *RunCtx) scanOnce(n *graph.Node, g *graph.Graph, states, scans []tensor.Tensor, sc *Scope) ([]tensor.Tensor, error) {
	m := len(scans)
	inAxes, inDirs := n.AttrInts("scan_input_axes"), n.AttrInts("scan_input_directions")
	nOut := len(g.Outputs) - len(states)
	outAxes, outDirs := n.AttrInts("scan_output_axes"), n.AttrInts("scan_output_directions")
	pick := func(v []int64, i int) int64 {
		if i < len(v) {
			return v[i]
		}
		return 0
	}
	steps := -1
	axes := make([]int, m)
	for i, t := range scans {
		ax, err := ops.NormAxis(pick(inAxes, i), len(t.Dims()))
		if err != nil {
			return nil, fmt.Errorf("scan input %d: %v", i, err)
		}
		axes[i] = ax
		if steps >= 0 && int(t.Dims()[ax]) != steps {
			return nil, fmt.Errorf("scan inputs have %d and %d steps", steps, t.Dims()[ax])
		}
		steps = int(t.Dims()[ax])
	}
	if steps < 0 {
		return nil, fmt.Errorf("Scan without scan inputs")
	}
	if len(g.Inputs) != len(states)+m {
		return nil, fmt.Errorf("body has %d inputs, want %d", len(g.Inputs), len(states)+m)
	}
	carried := append([]tensor.Tensor{}, states...)
	collected := make([][]tensor.Tensor, nOut)
	var carriedBytes uint64
	for it := 0; it < steps; it++ {
		if err := rc.iteration(n, int64(it)); err != nil {
			return nil, err
		}
		inner := &Scope{Vals: map[string]tensor.Tensor{}, parent: sc}
		for i, t := range carried {
			inner.Vals[g.Inputs[i].Name] = t
		}
		for i, t := range scans {
			k := it
			if pick(inDirs, i) != 0 {
				k = steps - 1 - it
			}
			s := movement.SliceAxis(t, axes[i], int64(k), 1)
			shape := append(append([]int64{}, t.Dims()[:axes[i]]...), t.Dims()[axes[i]+1:]...)
			inner.Vals[g.Inputs[len(states)+i].Name] = tensor.Reshaped(s, shape)
		}
		outs, err := rc.evalBody(n.OpType, g, inner)
		if err != nil {
			return nil, err
		}
		carried = outs[:len(states)]
		if err := rc.reserveCarried(&carriedBytes, carried, "the state values", int64(it+1)); err != nil {
			return nil, err
		}
		for j, t := range outs[len(states):] {
			if err := rc.Reserve(fmt.Sprintf("scan output %d after %d iterations", j, it+1), valueBytes(t)); err != nil {
				return nil, err
			}
			collected[j] = append(collected[j], t)
		}
	}
	res := append([]tensor.Tensor{}, carried...)
	for j, ts := range collected {
		if len(ts) == 0 {
			return nil, fmt.Errorf("scan output %d has no iterations", j)
		}
		if pick(outDirs, j) != 0 {
			for a, b := 0, len(ts)-1; a < b; a, b = a+1, b-1 {
				ts[a], ts[b] = ts[b], ts[a]
			}
		}
		if err := reserveJoined(rc, fmt.Sprintf("scan output %d", j), ts); err != nil {
			return nil, err
		}
		joined, err := ops.ConcatFlat(ts...)
		if err != nil {
			return nil, err
		}
		stacked := tensor.Reshaped(joined, append([]int64{int64(len(ts))}, ts[0].Dims()...))
		ax, err := ops.NormAxis(pick(outAxes, j), len(stacked.Dims()))
		if err != nil {
			return nil, fmt.Errorf("scan output %d: %v", j, err)
		}
		if ax != 0 {
			// Move the iteration axis 0 to ax: p lists, per output axis, its source axis.
			p := make([]int, 0, len(stacked.Dims()))
			for k := 1; k <= ax; k++ {
				p = append(p, k)
			}
			p = append(p, 0)
			for k := ax + 1; k < len(stacked.Dims()); k++ {
				p = append(p, k)
			}
			s, idx := ops.TransposeIndex(stacked.Dims(), p)
			stacked = tensor.Take(stacked, s, idx)
		}
		res = append(res, stacked)
	}
	return res, nil
}

func (rc *RunCtx) scan(n *graph.Node, in []tensor.Tensor, sc *Scope) ([]tensor.Tensor, error) {
	body := n.Attr("body")
	if body == nil || body.Graph == nil {
		return nil, fmt.Errorf("Scan has no body")
	}
	m := int(n.AttrInt("num_scan_inputs", 0))
	if rc.Opset >= 9 {
		if m <= 0 || m > len(in) {
			return nil, fmt.Errorf("num_scan_inputs %d for %d inputs", m, len(in))
		}
		k := len(in) - m
		return rc.scanOnce(n, body.Graph, in[:k], in[k:], sc)
	}
	// Scan-8: a leading optional sequence_lens and a batch axis 0 on every input and output;
	// the scan axis is 1.
	if len(in) < 1+m || m <= 0 {
		return nil, fmt.Errorf("num_scan_inputs %d for %d inputs", m, len(in))
	}
	if in[0].IsValid() {
		return nil, fmt.Errorf("Scan-8 sequence_lens is not supported")
	}
	states, scans := in[1:len(in)-m], in[len(in)-m:]
	if len(n.AttrInts("directions")) > 0 {
		for _, d := range n.AttrInts("directions") {
			if d != 0 {
				return nil, fmt.Errorf("Scan-8 reverse directions are not supported")
			}
		}
	}
	batch := -1
	for _, t := range append(append([]tensor.Tensor{}, states...), scans...) {
		if len(t.Dims()) == 0 || (batch >= 0 && int(t.Dims()[0]) != batch) {
			return nil, fmt.Errorf("inputs disagree on the batch axis")
		}
		batch = int(t.Dims()[0])
	}
	unbatch := func(t tensor.Tensor, b int) tensor.Tensor {
		return tensor.Reshaped(movement.SliceAxis(t, 0, int64(b), 1), t.Dims()[1:])
	}
	var perBatch [][]tensor.Tensor
	for b := 0; b < batch; b++ {
		st := make([]tensor.Tensor, len(states))
		for i, t := range states {
			st[i] = unbatch(t, b)
		}
		sn := make([]tensor.Tensor, len(scans))
		for i, t := range scans {
			sn[i] = unbatch(t, b)
		}
		outs, err := rc.scanOnce(n, body.Graph, st, sn, sc)
		if err != nil {
			return nil, err
		}
		perBatch = append(perBatch, outs)
	}
	res := make([]tensor.Tensor, len(perBatch[0]))
	for j := range res {
		parts := make([]tensor.Tensor, batch)
		for b := range parts {
			parts[b] = perBatch[b][j]
		}
		if err := reserveJoined(rc, fmt.Sprintf("output %d", j), parts); err != nil {
			return nil, err
		}
		joined, err := ops.ConcatFlat(parts...)
		if err != nil {
			return nil, err
		}
		res[j] = tensor.Reshaped(joined, append([]int64{int64(batch)}, parts[0].Dims()...))
	}
	return res, nil
}

// sequenceMap runs n's body once per element of the input sequence: sequence inputs bind their
// i-th element, tensor inputs bind whole; each body output collects into an output sequence.
func (rc *RunCtx) sequenceMap(n *graph.Node, in []tensor.Tensor, sc *Scope) ([]tensor.Tensor, error) {
	body := n.Attr("body")
	if body == nil || body.Graph == nil {
		return nil, fmt.Errorf("SequenceMap has no body")
	}
	g := body.Graph
	s, err := movement.SeqInput(in, 0, "input_sequence")
	if err != nil {
		return nil, err
	}
	steps := len(tensor.SeqElems(s))
	if len(g.Inputs) != len(in) {
		return nil, fmt.Errorf("the body has %d inputs for %d node inputs", len(g.Inputs), len(in))
	}
	for i, t := range in {
		switch {
		case !t.IsValid():
			return nil, fmt.Errorf("input %d is missing", i)
		case tensor.IsOpt(t):
			return nil, fmt.Errorf("input %d is an optional; SequenceMap takes sequences and tensors", i)
		case tensor.IsSeq(t) && len(tensor.SeqElems(t)) != steps:
			return nil, fmt.Errorf("input %d has %d elements, input 0 has %d", i, len(tensor.SeqElems(t)), steps)
		}
	}
	if len(n.Outputs) > len(g.Outputs) {
		return nil, fmt.Errorf("the body has %d outputs for %d node outputs", len(g.Outputs), len(n.Outputs))
	}
	collected := make([][]tensor.Tensor, len(g.Outputs))
	for it := range steps {
		if err := rc.iteration(n, int64(it)); err != nil {
			return nil, err
		}
		inner := &Scope{Vals: make(map[string]tensor.Tensor, len(in)), parent: sc}
		for i, t := range in {
			if tensor.IsSeq(t) {
				t = tensor.SeqElems(t)[it]
			}
			inner.Vals[g.Inputs[i].Name] = t
		}
		outs, err := rc.evalBody(n.OpType, g, inner)
		if err != nil {
			return nil, err
		}
		for k, t := range outs {
			if tensor.Box(t) != nil {
				return nil, fmt.Errorf("body output %d is %s (%s); SequenceMap collects tensors", k, tensor.Article(t), t)
			}
			if it > 0 && t.DType() != collected[k][0].DType() {
				return nil, fmt.Errorf("body output %d has element type %s in iteration %d, %s before", k, t.DType(), it, collected[k][0].DType())
			}
			collected[k] = append(collected[k], t)
		}
	}
	res := make([]tensor.Tensor, len(collected))
	for k, ts := range collected {
		dt := graph.Undefined
		if len(ts) > 0 {
			dt = ts[0].DType()
		} else if v := g.Outputs[k]; v.Type.Kind == graph.KindTensor {
			dt = v.Type.Elem
		} else {
			dt = v.Declared.Elem
		}
		res[k] = tensor.SeqOf(dt, ts)
	}
	return res, nil
}

// DefaultMaxLoopIterations is the iterations one run of a Loop, Scan or SequenceMap node may
// take unless the session sets another limit (session.WithMaxLoopIterations).
const DefaultMaxLoopIterations = 1 << 24

// MaxLoopIterations is the session's iteration limit of one control-flow node's run.
func (rc *RunCtx) MaxLoopIterations() int64 {
	if rc != nil && rc.Eng != nil && rc.Eng.MaxLoopIterations > 0 {
		return rc.Eng.MaxLoopIterations
	}
	return DefaultMaxLoopIterations
}

// iteration is what Loop, Scan and SequenceMap check before iteration it of n: the run stops
// once its context is done (also when the body has no node that would notice), and at the
// iteration limit with an error of kind ErrOverBudget naming it.
func (rc *RunCtx) iteration(n *graph.Node, it int64) error {
	if limit := rc.MaxLoopIterations(); it >= limit {
		return tensor.NewError("Run", tensor.ErrOverBudget, "%s would run more than %d iterations, the session's limit (WithMaxLoopIterations)", n.OpType, limit)
	}
	return rc.Canceled(n)
}

// reserveJoined reserves from the memory budget the bytes of what, the concatenation of ts,
// before it is made.
func reserveJoined(rc *RunCtx, what string, ts []tensor.Tensor) error {
	return rc.Reserve(what, valuesBytes(ts))
}

// reserveCarried replaces the reservation *held of a loop's carried values by one for
// carried, those after iterations iterations (what names them in the error).
func (rc *RunCtx) reserveCarried(held *uint64, carried []tensor.Tensor, what string, iterations int64) error {
	rc.Unreserve(*held)
	*held = valuesBytes(carried)
	if err := rc.Reserve(fmt.Sprintf("%s after %d iterations", what, iterations), *held); err != nil {
		*held = 0
		return err
	}
	return nil
}

// valuesBytes is the bytes of ts's storages.
func valuesBytes(ts []tensor.Tensor) uint64 {
	var n uint64
	for _, t := range ts {
		n += valueBytes(t)
	}
	return n
}

// traceUntaken evaluates the branch of If n that its condition did not take, for the trace a
// compiled run plan is built from (RunCtx.TraceUntaken): a plan holds both branches and picks
// one per run. Its values are dropped with its scope, its spans are not traced, and its
// failure is not the run's: the trace then lacks the branch's nodes, and the plan runs the If
// as a host step.
func (rc *RunCtx) traceUntaken(n *graph.Node, taken string, sc *Scope) {
	other := "then_branch"
	if taken == other {
		other = "else_branch"
	}
	a := n.Attr(other)
	if a == nil || a.Graph == nil {
		return
	}
	saved := rc.Trace
	rc.Trace = nil
	defer func() { rc.Trace = saved }()
	_, _ = rc.evalBody(n.OpType, a.Graph, &Scope{Vals: map[string]tensor.Tensor{}, parent: sc})
}
