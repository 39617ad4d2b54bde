package epcontext

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
)

// chainModel is a random chain of n Add and Neg nodes over x, each Add reading a weight of its
// own or the shared one, with a graph output in the middle and one at the end.
func chainModel(t testing.TB, rnd *rand.Rand, n int) *graph.Model {
	g := &graph.Graph{Name: "chain"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(4)}))}
	g.AddInitializer(graph.TensorFromFloat32("shared", []int64{4}, []float32{1, 2, 3, 4}))
	prev := "x"
	for i := range n {
		out := fmt.Sprintf("v%d", i)
		if rnd.IntN(2) == 0 {
			w := "shared"
			if rnd.IntN(2) == 0 {
				w = fmt.Sprintf("w%d", i)
				g.AddInitializer(graph.TensorFromFloat32(w, []int64{4}, []float32{rnd.Float32(), 1, 2, rnd.Float32()}))
			}
			g.Nodes = append(g.Nodes, graph.NewNode(fmt.Sprintf("add%d", i), "Add", []string{prev, w}, []string{out}))
		} else {
			g.Nodes = append(g.Nodes, graph.NewNode(fmt.Sprintf("neg%d", i), "Neg", []string{prev}, []string{out}))
		}
		prev = out
	}
	g.Outputs = []*graph.Value{graph.Output(prev, graph.Type{})}
	if n > 1 {
		g.Outputs = append([]*graph.Value{graph.Output(fmt.Sprintf("v%d", (n-1)/2), graph.Type{})}, g.Outputs...)
	}
	m, err := graph.FromGraph("chain", g, map[string]int64{"": 14})
	require.NoError(t, err)
	return m
}

// splitLoad splits m by owner and loads each fragment back from its bytes.
func splitLoad(t testing.TB, m *graph.Model, owner []int, parts int) ([]Part, []Wiring) {
	frags, wiring, err := Split(m, owner, parts)
	require.NoError(t, err)
	ids := NodeIDs(m.Graph)
	out := make([]Part, parts)
	for p, f := range frags {
		data, err := f.Marshal()
		require.NoError(t, err)
		back, err := graph.LoadBytes(data)
		require.NoError(t, err, "fragment %d loads on its own", p)
		out[p] = Part{Node: fmt.Sprintf("part%d", p), Fragment: back, Nodes: []string{}}
		for i, id := range ids {
			if owner[i] == p {
				out[p].Nodes = append(out[p].Nodes, id)
			}
		}
	}
	return out, wiring
}

func TestSplitJoinRoundTrip(t *testing.T) {
	rnd := sessiontest.NewRand(t)
	for range 20 {
		n := 1 + rnd.IntN(12)
		m := chainModel(t, rnd, n)
		parts := 1 + rnd.IntN(3)
		owner := make([]int, n)
		for i := range owner {
			owner[i] = rnd.IntN(parts)
		}
		ps, wiring := splitLoad(t, m, owner, parts)
		j, err := Join("chain", m.Graph, ps)
		require.NoError(t, err)
		require.Len(t, j.Graph.Nodes, n)
		for i, node := range j.Graph.Nodes {
			assert.Equal(t, m.Graph.Nodes[i].Name, node.Name, "a chain has one topological order")
		}
		assert.Equal(t, len(m.Graph.Initializers), len(j.Graph.Initializers))
		for name, w := range m.Graph.Initializers {
			assert.True(t, sameTensor(w, j.Graph.Initializers[name]), name)
		}
		// The wiring is acyclic: each input is a graph input or an earlier partition's output.
		made := map[string]bool{"x": true}
		for p := range parts {
			for _, in := range wiring[p].Inputs {
				assert.True(t, made[in], "partition %d reads %s before it is made", p, in)
			}
			for _, o := range wiring[p].Outputs {
				made[o] = true
			}
		}
		for _, o := range m.Graph.Outputs {
			assert.True(t, made[o.Name], "graph output %s is wired", o.Name)
		}
	}
}

func TestJoinRefuses(t *testing.T) {
	rnd := sessiontest.NewRand(t)
	m := chainModel(t, rnd, 6)
	owner := []int{0, 0, 0, 1, 1, 1}
	fresh := func() []Part { ps, _ := splitLoad(t, m, owner, 2); return ps }

	ps := fresh()
	ps[1].Nodes = append(ps[1].Nodes, "ghost")
	_, err := Join("chain", m.Graph, ps)
	var ne *NodeError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, "part1", ne.Node)
	assert.Contains(t, err.Error(), `covered node "ghost" is not in its payload's graph`)

	ps = fresh()
	dropped := ps[0].Nodes[0]
	ps[0].Nodes = ps[0].Nodes[1:]
	_, err = Join("chain", m.Graph, ps)
	require.ErrorAs(t, err, &ne)
	assert.Contains(t, err.Error(), fmt.Sprintf("its payload's graph has node %q, which it does not list as covered", dropped))

	ps = fresh()
	ps[0].Nodes = append(ps[0].Nodes, ps[0].Nodes[0])
	_, err = Join("chain", m.Graph, ps)
	assert.ErrorContains(t, err, "is listed twice")

	// The same fragment twice: its values are made twice.
	ps = fresh()
	_, err = Join("chain", m.Graph, []Part{ps[0], {Node: "again", Fragment: ps[0].Fragment, Nodes: ps[0].Nodes}})
	assert.ErrorContains(t, err, `EPContext node "again": value`)

	// A partition missing: its values are never made.
	ps = fresh()
	_, err = Join("chain", m.Graph, ps[:1])
	assert.ErrorContains(t, err, "the partitions' graphs do not join")

	// A shared initializer that differs between fragments.
	ps = fresh()
	if a, b := ps[0].Fragment.Graph.Initializers["shared"], ps[1].Fragment.Graph.Initializers["shared"]; a != nil && b != nil {
		b.Raw = append([]byte{}, b.Raw...)
		b.Raw[0] ^= 1
		_, err = Join("chain", m.Graph, ps)
		assert.ErrorContains(t, err, `initializer "shared" differs`)
	}
	_, err = Join("chain", m.Graph, nil)
	assert.ErrorContains(t, err, "no partitions")
}

func TestNodeIDs(t *testing.T) {
	g := &graph.Graph{Nodes: []*graph.Node{
		graph.NewNode("a", "Neg", []string{"x"}, []string{"y"}),
		graph.NewNode("dup", "Neg", []string{"y"}, []string{"z"}),
		graph.NewNode("dup", "Neg", []string{"z"}, []string{"", "w"}),
		graph.NewNode("", "Neg", []string{"w"}, []string{"v"}),
		graph.NewNode("", "Neg", []string{"w"}, nil),
	}}
	assert.Equal(t, []string{"a", "<output z>", "<output w>", "<output v>", "<unnamed>"}, NodeIDs(g))
}

func TestSourceKey(t *testing.T) {
	rnd := sessiontest.NewRand(t)
	payload := make([]byte, 1+rnd.IntN(64))
	for i := range payload {
		payload[i] = byte(rnd.IntN(256))
	}
	k := SourceKey("cuda", "sm_90", payload)
	assert.True(t, isHexDigest(k))
	assert.Equal(t, k, SourceKey("cuda", "sm_90", append([]byte{}, payload...)))
	assert.NotEqual(t, k, SourceKey("host", "sm_90", payload))
	assert.NotEqual(t, k, SourceKey("cuda", "sm_80", payload))
	assert.NotEqual(t, SourceKey("cu", "dasm_90", payload), SourceKey("cud", "asm_90", payload), "the fields are length-prefixed")
	changed := append([]byte{}, payload...)
	changed[rnd.IntN(len(changed))] ^= 0x80
	assert.NotEqual(t, k, SourceKey("cuda", "sm_90", changed))
}

// FuzzJoinFragments feeds Join fragments decoded from arbitrary bytes and arbitrary covered
// node lists. It must never panic; what it joins must resolve.
func FuzzJoinFragments(f *testing.F) {
	rnd := rand.New(rand.NewPCG(3, 4)) // fixed seeds for a reproducible corpus
	m := chainModel(f, rnd, 5)
	frags, _, err := Split(m, []int{0, 1, 0, 1, 1}, 2)
	require.NoError(f, err)
	a, err := frags[0].Marshal()
	require.NoError(f, err)
	b, err := frags[1].Marshal()
	require.NoError(f, err)
	ids := NodeIDs(m.Graph)
	f.Add(a, b, ids[0]+"\x00"+ids[2], ids[1]+"\x00"+ids[3]+"\x00"+ids[4])
	f.Add(b, a, "", "")
	f.Add(a[:len(a)/2], b, ids[0], "x")
	f.Fuzz(func(t *testing.T, a, b []byte, na, nb string) {
		split := func(s string) []string {
			if s == "" {
				return []string{}
			}
			var out []string
			start := 0
			for i := range len(s) {
				if s[i] == 0 {
					out = append(out, s[start:i])
					start = i + 1
				}
			}
			return append(out, s[start:])
		}
		fa, err := graph.LoadBytes(a)
		if err != nil {
			return
		}
		fb, err := graph.LoadBytes(b)
		if err != nil {
			return
		}
		j, err := Join("fuzz", m.Graph, []Part{{Node: "a", Fragment: fa, Nodes: split(na)}, {Node: "b", Fragment: fb, Nodes: split(nb)}})
		if err != nil {
			return
		}
		require.NoError(t, j.Resolve(), "a joined graph resolves")
	})
}
