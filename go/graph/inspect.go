package graph

import (
	"fmt"
	"sort"
	"strings"
)

// PassResult records one optimization pass applied to a model.
type PassResult struct {
	Name        string
	NodesBefore int
	NodesAfter  int
	Changed     bool
}

// IOInfo is one graph input or output as a report shows it.
type IOInfo struct {
	Name string
	Type string
}

// OpCount is one entry of an operator histogram.
type OpCount struct {
	Op    string // "domain.Op" outside ai.onnx
	Count int
}

// Report summarizes a model for `loom inspect`.
type Report struct {
	Name            string
	Producer        string
	IRVersion       int64
	Opsets          map[string]int64
	Inputs          []IOInfo
	Outputs         []IOInfo
	Nodes           int // over all graphs
	Subgraphs       int
	Ops             []OpCount // most frequent first
	Initializers    int
	Parameters      int64 // elements over all initializers
	ParameterBytes  int64
	ExternalWeights int // initializers whose bytes live in external files
	Passes          []PassResult
	Plan            *MemoryPlan // set by the caller when a plan was made
}

// Inspect gathers a report from a loaded (and possibly inferred and optimized) model.
func Inspect(m *Model) *Report {
	r := &Report{Name: m.Name, Producer: strings.TrimSpace(m.ProducerName + " " + m.ProducerVersion), IRVersion: m.IRVersion,
		Opsets: map[string]int64{}, Passes: append([]PassResult{}, m.Passes...)}
	for d, v := range m.Opsets {
		r.Opsets[domainName(d)] = v
	}
	if m.Graph == nil {
		return r
	}
	for _, in := range m.Graph.Inputs {
		if in.Initializer == nil {
			r.Inputs = append(r.Inputs, IOInfo{in.Name, in.Type.String()})
		}
	}
	for _, o := range m.Graph.Outputs {
		r.Outputs = append(r.Outputs, IOInfo{o.Name, o.Type.String()})
	}
	hist := map[string]int{}
	m.Graph.Walk(func(g *Graph) {
		if g != m.Graph {
			r.Subgraphs++
		}
		for _, n := range g.Nodes {
			op := n.OpType
			if n.Domain != "" {
				op = n.Domain + "." + op
			}
			hist[op]++
			r.Nodes++
		}
		for _, name := range g.InitOrder {
			t := g.Initializers[name]
			r.Initializers++
			r.Parameters += t.NumElements()
			r.ParameterBytes += t.DType.ByteSize(t.NumElements())
			if !t.Ref.Inline() {
				r.ExternalWeights++
			}
		}
	})
	for op, c := range hist {
		r.Ops = append(r.Ops, OpCount{op, c})
	}
	sort.Slice(r.Ops, func(i, j int) bool {
		if r.Ops[i].Count != r.Ops[j].Count {
			return r.Ops[i].Count > r.Ops[j].Count
		}
		return r.Ops[i].Op < r.Ops[j].Op
	})
	return r
}

// String renders the report as aligned text.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model     %s\n", r.Name)
	if r.Producer != "" {
		fmt.Fprintf(&b, "producer  %s\n", r.Producer)
	}
	doms := make([]string, 0, len(r.Opsets))
	for d := range r.Opsets {
		doms = append(doms, d)
	}
	sort.Strings(doms)
	var ops []string
	for _, d := range doms {
		ops = append(ops, fmt.Sprintf("%s %d", d, r.Opsets[d]))
	}
	fmt.Fprintf(&b, "ir        %d; opsets %s\n", r.IRVersion, strings.Join(ops, ", "))
	for _, in := range r.Inputs {
		fmt.Fprintf(&b, "input     %s: %s\n", in.Name, in.Type)
	}
	for _, o := range r.Outputs {
		fmt.Fprintf(&b, "output    %s: %s\n", o.Name, o.Type)
	}
	fmt.Fprintf(&b, "nodes     %d (%d subgraphs)\n", r.Nodes, r.Subgraphs)
	fmt.Fprintf(&b, "weights   %d initializers, %d parameters, %s", r.Initializers, r.Parameters, humanBytes(r.ParameterBytes))
	if r.ExternalWeights > 0 {
		fmt.Fprintf(&b, " (%d external)", r.ExternalWeights)
	}
	b.WriteString("\nops      ")
	for i, o := range r.Ops {
		if i > 0 {
			b.WriteString(",")
		}
		if i > 0 && i%6 == 0 {
			b.WriteString("\n          ")
		} else {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s×%d", o.Op, o.Count)
	}
	b.WriteString("\n")
	for _, p := range r.Passes {
		mark := " "
		if p.Changed {
			mark = "*"
		}
		fmt.Fprintf(&b, "pass    %s %-34s %5d -> %d nodes\n", mark, p.Name, p.NodesBefore, p.NodesAfter)
	}
	if r.Plan != nil {
		fmt.Fprintf(&b, "memory    %v\n", r.Plan)
	}
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
