package epcontext

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"sort"
	"strconv"

	"github.com/loomrt/loom/go/graph"
)

// Partitions of an EP context model (docs/epcontext.md, "Partitions"): a session's optimized
// graph is split into one partition per execution provider, each written as an EPContext node
// whose payload (a context blob) holds the partition's graph fragment and the kernels its
// provider compiled. Split makes the fragments and the context model's wiring; Join puts the
// fragments of a loaded context model back together into the graph the session runs.

// Notes is the JSON of an EPContext node's notes attribute. Provider, Nodes and SourceKey
// are those of a partition; a context model written before partitions (one node whose blob
// holds the whole graph) has none of them.
type Notes struct {
	LoomTarget  string `json:"loom_target"`
	LoomBackend string `json:"loom_backend"`
	BlobFormat  string `json:"blob_format"`
	Kernels     int    `json:"kernels"`
	// Provider is the execution provider that compiled the partition (and restores it).
	Provider string `json:"provider,omitempty"`
	// Nodes are the ids (NodeIDs) of the session graph's nodes the partition covers.
	Nodes []string `json:"nodes,omitempty"`
	// SourceKey is SourceKey(Provider, hardware_architecture, payload).
	SourceKey string `json:"source_key,omitempty"`
}

// Legacy reports whether the notes are those of a context model written before partitions.
func (n Notes) Legacy() bool { return n.SourceKey == "" && n.Provider == "" && n.Nodes == nil }

// sourceKeyDomain separates the source key's hash from any other SHA-256 of the same bytes.
const sourceKeyDomain = "loom-epcontext-partition/1"

// SourceKey binds a partition's payload to the provider that compiled it and the device
// target its kernels run on: the hex SHA-256 of a domain string, the provider, the target and
// the payload, each length-prefixed. A payload fed to another partition, provider or target,
// or changed in any byte, no longer matches.
func SourceKey(provider, target string, payload []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(sourceKeyDomain), []byte(provider), []byte(target), payload} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":"))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NodeIDs returns the id of each of g's nodes, in order: the node's name when it has one that
// no other node of g shares, else "<output Y>" after its first named output (unique in a
// graph in SSA form), else "<unnamed>". The ids do not depend on the nodes' order.
func NodeIDs(g *graph.Graph) []string {
	count := map[string]int{}
	for _, n := range g.Nodes {
		count[n.Name]++
	}
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		if n.Name != "" && count[n.Name] == 1 {
			ids[i] = n.Name
			continue
		}
		ids[i] = "<unnamed>"
		for _, o := range n.Outputs {
			if o != "" {
				ids[i] = "<output " + o + ">"
				break
			}
		}
	}
	return ids
}

// Wiring is the inputs and outputs of one partition's EPContext node in the context model.
type Wiring struct {
	Inputs, Outputs []string
}

// reads returns the names n reads: its inputs and its subgraphs' outer references.
func reads(n *graph.Node) []string {
	var out []string
	for _, in := range n.Inputs {
		if in != "" {
			out = append(out, in)
		}
	}
	return append(out, n.ImplicitInputs()...)
}

// Split cuts m's main graph into parts fragments: owner[i] is the partition of node i. Each
// fragment is a model with m's metadata and opsets whose graph holds the partition's nodes,
// the initializers they read, as inputs the graph inputs they read and the values other
// partitions make that they read, and as outputs the values they make that other partitions
// or the graph's outputs read. The first fragment also takes the initializers no node reads
// and those that are graph outputs, so that joining the fragments loses none. The fragments
// share m's nodes, tensors and value records: they are for marshaling, not for changing.
//
// The wiring is each partition's EPContext node in the context model: as inputs, the graph
// inputs (initializers aside) it reads and the values earlier partitions make that it reads;
// as outputs, the graph outputs it makes and the values later partitions read. A value a
// partition reads from a later one (placements that interleave, cuda then host then cuda) is
// left out of the wiring, which stays acyclic; the fragments carry it.
func Split(m *graph.Model, owner []int, parts int) ([]*graph.Model, []Wiring, error) {
	g := m.Graph
	if len(owner) != len(g.Nodes) {
		return nil, nil, fmt.Errorf("%d owners for %d nodes", len(owner), len(g.Nodes))
	}
	if parts < 1 {
		return nil, nil, fmt.Errorf("%d partitions", parts)
	}
	producer := map[string]int{} // value -> partition making it
	for i, n := range g.Nodes {
		if owner[i] < 0 || owner[i] >= parts {
			return nil, nil, fmt.Errorf("node %s: partition %d of %d", n.Label(), owner[i], parts)
		}
		for _, o := range n.Outputs {
			if o != "" {
				producer[o] = owner[i]
			}
		}
	}
	readBy := map[string]map[int]bool{} // value -> partitions reading it
	partReads := make([][]string, parts)
	seen := make([]map[string]bool, parts)
	for p := range seen {
		seen[p] = map[string]bool{}
	}
	for i, n := range g.Nodes {
		p := owner[i]
		for _, name := range reads(n) {
			if readBy[name] == nil {
				readBy[name] = map[int]bool{}
			}
			readBy[name][p] = true
			if !seen[p][name] {
				seen[p][name] = true
				partReads[p] = append(partReads[p], name)
			}
		}
	}
	isInput := map[string]*graph.Value{}
	for _, v := range g.Inputs {
		isInput[v.Name] = v
	}
	typed := func(name string) graph.Type {
		if v := g.Values[name]; v != nil {
			if v.Type.Kind != graph.KindUnknown {
				return v.Type.Clone()
			}
			return v.Declared.Clone()
		}
		return graph.Type{}
	}
	frags := make([]*graph.Model, parts)
	wiring := make([]Wiring, parts)
	for p := range parts {
		fg := &graph.Graph{Name: g.Name, Doc: g.Doc, Initializers: map[string]*graph.Tensor{}, Values: g.Values}
		for _, name := range g.InitOrder {
			t := g.Initializers[name]
			_, produced := producer[name]
			take := seen[p][name]
			if p == 0 && !produced && (len(readBy[name]) == 0 || g.IsOutput(name)) {
				take = true
			}
			if take && t != nil {
				fg.Initializers[name] = t
				fg.InitOrder = append(fg.InitOrder, name)
			}
		}
		// Graph inputs first, in the graph's order, then the values of other partitions.
		for _, v := range g.Inputs {
			if seen[p][v.Name] || fg.Initializers[v.Name] != nil {
				in := graph.Input(v.Name, v.Declared)
				in.Doc = v.Doc
				fg.Inputs = append(fg.Inputs, in)
				if fg.Initializers[v.Name] == nil && g.Initializers[v.Name] == nil {
					wiring[p].Inputs = append(wiring[p].Inputs, v.Name)
				}
			}
		}
		for _, name := range partReads[p] {
			q, produced := producer[name]
			if !produced || q == p {
				continue
			}
			fg.Inputs = append(fg.Inputs, graph.Input(name, typed(name)))
			if q < p {
				wiring[p].Inputs = append(wiring[p].Inputs, name)
			}
		}
		for i, n := range g.Nodes {
			if owner[i] != p {
				continue
			}
			fg.Nodes = append(fg.Nodes, n)
			for _, o := range n.Outputs {
				if o == "" {
					continue
				}
				later, other := false, false
				for q := range readBy[o] {
					if q != p {
						other = true
						later = later || q > p
					}
				}
				if other || g.IsOutput(o) {
					fg.Outputs = append(fg.Outputs, graph.Output(o, typed(o)))
				}
				if later || g.IsOutput(o) {
					wiring[p].Outputs = append(wiring[p].Outputs, o)
				}
			}
		}
		if p == 0 {
			// Graph outputs no node makes: the initializers the first fragment took.
			for _, o := range g.Outputs {
				if _, produced := producer[o.Name]; !produced && fg.Initializers[o.Name] != nil {
					fg.Outputs = append(fg.Outputs, graph.Output(o.Name, typed(o.Name)))
					wiring[p].Outputs = append(wiring[p].Outputs, o.Name)
				}
			}
		}
		frags[p] = &graph.Model{Name: m.Name, IRVersion: m.IRVersion, ProducerName: m.ProducerName,
			ProducerVersion: m.ProducerVersion, Domain: m.Domain, ModelVersion: m.ModelVersion, Doc: m.Doc,
			MetadataProps: maps.Clone(m.MetadataProps), Opsets: maps.Clone(m.Opsets), Graph: fg}
	}
	return frags, wiring, nil
}

// Part is one partition of a context model being loaded: its EPContext node's name, the
// fragment its payload holds (loaded, resolved) and the node ids it says it covers (nil: all
// of the fragment's, for a context model written before partitions).
type Part struct {
	Node     string
	Fragment *graph.Model
	Nodes    []string
}

// NodeError is an error of one EPContext node.
type NodeError struct {
	Node string
	Err  error
}

func (e *NodeError) Error() string { return fmt.Sprintf("EPContext node %q: %v", e.Node, e.Err) }

// Unwrap is the cause.
func (e *NodeError) Unwrap() error { return e.Err }

func nodeErr(node, format string, args ...any) error {
	return &NodeError{Node: node, Err: fmt.Errorf(format, args...)}
}

// Join puts the partitions' fragments back together into the graph the session runs: named
// name, with ctx's (the context model's graph's) name, doc, inputs and outputs, the overridable
// initializers (inputs with a default) the fragments declare, every fragment's initializers
// (a shared one must be the same tensor in each) and nodes, and the first fragment's model
// metadata. Each partition must cover exactly its fragment's nodes (ids of the joined graph);
// no value may be made twice. The result is resolved (in topological order), not checked or
// shape-inferred. Errors are *NodeError naming the partition at fault, or plain errors for the
// graph as a whole.
func Join(name string, ctx *graph.Graph, parts []Part) (*graph.Model, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("no partitions")
	}
	g := &graph.Graph{Name: ctx.Name, Doc: ctx.Doc, Initializers: map[string]*graph.Tensor{}, Values: map[string]*graph.Value{}}
	initFrom := map[string]int{}
	madeBy := map[string]int{}
	partOf := []int{}
	declared := map[string]bool{}
	for _, v := range ctx.Inputs {
		in := graph.Input(v.Name, v.Declared)
		in.Doc = v.Doc
		g.Inputs = append(g.Inputs, in)
		declared[v.Name] = true
	}
	for p, part := range parts {
		if part.Fragment == nil || part.Fragment.Graph == nil {
			return nil, nodeErr(part.Node, "no graph")
		}
		fg := part.Fragment.Graph
		for _, iname := range fg.InitOrder {
			t := fg.Initializers[iname]
			if t == nil {
				continue
			}
			if q, dup := initFrom[iname]; dup {
				if u := g.Initializers[iname]; !sameTensor(u, t) {
					return nil, nodeErr(part.Node, "initializer %q differs from the one of EPContext node %q", iname, parts[q].Node)
				}
				continue
			}
			initFrom[iname] = p
			g.Initializers[iname] = t
			g.InitOrder = append(g.InitOrder, iname)
			if v := fg.Values[iname]; v != nil {
				g.Values[iname] = v
			}
		}
		for _, n := range fg.Nodes {
			for _, o := range n.Outputs {
				if o == "" {
					continue
				}
				if q, dup := madeBy[o]; dup {
					return nil, nodeErr(part.Node, "value %q is made by a node of EPContext node %q too", o, parts[q].Node)
				}
				madeBy[o] = p
				if v := fg.Values[o]; v != nil {
					v.Producer = nil
					g.Values[o] = v
				}
			}
			g.Nodes = append(g.Nodes, n)
			partOf = append(partOf, p)
		}
	}
	// The overridable initializers: inputs of a fragment that hold a default.
	for _, part := range parts {
		for _, v := range part.Fragment.Graph.Inputs {
			if declared[v.Name] || g.Initializers[v.Name] == nil {
				continue
			}
			declared[v.Name] = true
			in := graph.Input(v.Name, v.Declared)
			in.Doc = v.Doc
			g.Inputs = append(g.Inputs, in)
		}
	}
	for _, v := range ctx.Outputs {
		o := graph.Output(v.Name, v.Declared)
		o.Doc = v.Doc
		g.Outputs = append(g.Outputs, o)
	}
	// Each partition covers exactly its fragment's nodes.
	ids := NodeIDs(g)
	byPart := make([]map[string]bool, len(parts))
	for i, id := range ids {
		p := partOf[i]
		if byPart[p] == nil {
			byPart[p] = map[string]bool{}
		}
		byPart[p][id] = true
	}
	for p, part := range parts {
		if part.Nodes == nil {
			continue
		}
		listed := map[string]bool{}
		for _, id := range part.Nodes {
			if listed[id] {
				return nil, nodeErr(part.Node, "covered node %q is listed twice", id)
			}
			listed[id] = true
			if !byPart[p][id] {
				return nil, nodeErr(part.Node, "covered node %q is not in its payload's graph", id)
			}
		}
		var extra []string
		for id := range byPart[p] {
			if !listed[id] {
				extra = append(extra, id)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return nil, nodeErr(part.Node, "its payload's graph has node %q, which it does not list as covered", extra[0])
		}
	}
	f := parts[0].Fragment
	opsets := map[string]int64{}
	for _, part := range parts {
		for d, v := range part.Fragment.Opsets {
			opsets[d] = max(opsets[d], v)
		}
	}
	m := &graph.Model{Name: name, IRVersion: f.IRVersion, ProducerName: f.ProducerName, ProducerVersion: f.ProducerVersion,
		Domain: f.Domain, ModelVersion: f.ModelVersion, Doc: f.Doc, MetadataProps: maps.Clone(f.MetadataProps),
		Opsets: opsets, Graph: g}
	if m.MetadataProps == nil {
		m.MetadataProps = map[string]string{}
	}
	if err := m.Resolve(); err != nil {
		return nil, fmt.Errorf("the partitions' graphs do not join: %w", err)
	}
	return m, nil
}

// sameTensor reports whether a and b hold the same constant.
func sameTensor(a, b *graph.Tensor) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.DType != b.DType || len(a.Dims) != len(b.Dims) || len(a.Strings) != len(b.Strings) {
		return false
	}
	for i := range a.Dims {
		if a.Dims[i] != b.Dims[i] {
			return false
		}
	}
	for i := range a.Strings {
		if !bytes.Equal(a.Strings[i], b.Strings[i]) {
			return false
		}
	}
	return bytes.Equal(a.Raw, b.Raw)
}
