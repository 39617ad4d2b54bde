package session

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// Scan (opset 8 and 9+): the body runs once per slice of the scan inputs along their scan
// axes, threading the state variables; scan outputs are stacked along their axes.

// scanOnce runs Scan-9 semantics on states and scan inputs (no batch axis).
func (rc *runCtx) scanOnce(n *graph.Node, g *graph.Graph, states, scans []Tensor, sc *scope) ([]Tensor, error) {
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
		ax, err := normAxis(pick(inAxes, i), len(t.shape))
		if err != nil {
			return nil, fmt.Errorf("scan input %d: %v", i, err)
		}
		axes[i] = ax
		if steps >= 0 && int(t.shape[ax]) != steps {
			return nil, fmt.Errorf("scan inputs have %d and %d steps", steps, t.shape[ax])
		}
		steps = int(t.shape[ax])
	}
	if steps < 0 {
		return nil, fmt.Errorf("Scan without scan inputs")
	}
	if len(g.Inputs) != len(states)+m {
		return nil, fmt.Errorf("body has %d inputs, want %d", len(g.Inputs), len(states)+m)
	}
	carried := append([]Tensor{}, states...)
	collected := make([][]Tensor, nOut)
	for it := 0; it < steps; it++ {
		inner := &scope{vals: map[string]Tensor{}, parent: sc}
		for i, t := range carried {
			inner.vals[g.Inputs[i].Name] = t
		}
		for i, t := range scans {
			k := it
			if pick(inDirs, i) != 0 {
				k = steps - 1 - it
			}
			s := sliceAxis(t, axes[i], int64(k), 1)
			shape := append(append([]int64{}, t.shape[:axes[i]]...), t.shape[axes[i]+1:]...)
			inner.vals[g.Inputs[len(states)+i].Name] = s.reshaped(shape)
		}
		outs, err := rc.evalBody(n.OpType, g, inner)
		if err != nil {
			return nil, err
		}
		carried = outs[:len(states)]
		for j, t := range outs[len(states):] {
			collected[j] = append(collected[j], t)
		}
	}
	res := append([]Tensor{}, carried...)
	for j, ts := range collected {
		if len(ts) == 0 {
			return nil, fmt.Errorf("scan output %d has no iterations", j)
		}
		if pick(outDirs, j) != 0 {
			for a, b := 0, len(ts)-1; a < b; a, b = a+1, b-1 {
				ts[a], ts[b] = ts[b], ts[a]
			}
		}
		joined, err := concatFlat(ts...)
		if err != nil {
			return nil, err
		}
		stacked := joined.reshaped(append([]int64{int64(len(ts))}, ts[0].shape...))
		ax, err := normAxis(pick(outAxes, j), len(stacked.shape))
		if err != nil {
			return nil, fmt.Errorf("scan output %d: %v", j, err)
		}
		if ax != 0 {
			// Move the iteration axis 0 to ax: p lists, per output axis, its source axis.
			p := make([]int, 0, len(stacked.shape))
			for k := 1; k <= ax; k++ {
				p = append(p, k)
			}
			p = append(p, 0)
			for k := ax + 1; k < len(stacked.shape); k++ {
				p = append(p, k)
			}
			s, idx := transposeIndex(stacked.shape, p)
			stacked = take(stacked, s, idx)
		}
		res = append(res, stacked)
	}
	return res, nil
}

func (rc *runCtx) scan(n *graph.Node, in []Tensor, sc *scope) ([]Tensor, error) {
	body := n.Attr("body")
	if body == nil || body.Graph == nil {
		return nil, fmt.Errorf("Scan has no body")
	}
	m := int(n.AttrInt("num_scan_inputs", 0))
	if rc.opset >= 9 {
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
	for _, t := range append(append([]Tensor{}, states...), scans...) {
		if len(t.shape) == 0 || (batch >= 0 && int(t.shape[0]) != batch) {
			return nil, fmt.Errorf("inputs disagree on the batch axis")
		}
		batch = int(t.shape[0])
	}
	unbatch := func(t Tensor, b int) Tensor {
		return sliceAxis(t, 0, int64(b), 1).reshaped(t.shape[1:])
	}
	var perBatch [][]Tensor
	for b := 0; b < batch; b++ {
		st := make([]Tensor, len(states))
		for i, t := range states {
			st[i] = unbatch(t, b)
		}
		sn := make([]Tensor, len(scans))
		for i, t := range scans {
			sn[i] = unbatch(t, b)
		}
		outs, err := rc.scanOnce(n, body.Graph, st, sn, sc)
		if err != nil {
			return nil, err
		}
		perBatch = append(perBatch, outs)
	}
	res := make([]Tensor, len(perBatch[0]))
	for j := range res {
		parts := make([]Tensor, batch)
		for b := range parts {
			parts[b] = perBatch[b][j]
		}
		joined, err := concatFlat(parts...)
		if err != nil {
			return nil, err
		}
		res[j] = joined.reshaped(append([]int64{int64(batch)}, parts[0].shape...))
	}
	return res, nil
}

func init() {
	hostOps["Scan"] = func(*runCtx, *graph.Node, []Tensor) ([]Tensor, error) {
		return nil, fmt.Errorf("Scan runs through controlFlow")
	}
}
