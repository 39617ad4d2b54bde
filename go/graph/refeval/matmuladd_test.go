package refeval

import (
	"math"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MatMulAdd's activation is GELU of the sum, exact or in tanh form.
func TestMatMulAddGeluEpilogue(t *testing.T) {
	a := val([]int64{2, 2}, 1, -2, 0.5, 3)
	b := val([]int64{2, 2}, 0.25, -1, 1.5, 0.5)
	c := val([]int64{2}, -0.5, 0.75)
	mma := func(attrs ...*graph.Attribute) *graph.Node {
		n := graph.NewNode("mma", "MatMulAdd", []string{"a", "b", "c"}, []string{"y"}, attrs...)
		n.Domain = graph.LoomDomain
		return n
	}
	sum := eval(t, mma(), a, b, c)
	for _, tc := range []struct {
		attrs []*graph.Attribute
		want  func(float64) float64
	}{
		{[]*graph.Attribute{graph.StringAttr("activation", "")}, func(v float64) float64 { return v }},
		{[]*graph.Attribute{graph.StringAttr("activation", "Gelu")}, func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }},
		{[]*graph.Attribute{graph.StringAttr("activation", "Gelu"), graph.StringAttr("approximate", "none")}, func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }},
		{[]*graph.Attribute{graph.StringAttr("activation", "Gelu"), graph.StringAttr("approximate", "tanh")},
			func(v float64) float64 { return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) }},
	} {
		got := eval(t, mma(tc.attrs...), a, b, c)
		require.Equal(t, sum.Dims, got.Dims)
		for i, v := range sum.Data {
			assert.InDelta(t, float64(float32(tc.want(v))), got.Data[i], 1e-7, "%v [%d]", tc.attrs, i)
		}
	}
}

func TestMatMulAddRejectsUnknownActivation(t *testing.T) {
	a := val([]int64{1, 1}, 1)
	for _, tc := range []struct {
		attr *graph.Attribute
		msg  string
	}{
		{graph.StringAttr("activation", "Relu"), `MatMulAdd node "mma": unknown activation "Relu"`},
		{graph.StringAttr("approximate", "fast"), `MatMulAdd node "mma": unknown approximate "fast"`},
		{graph.IntAttr("activation", 1), `MatMulAdd node "mma": attribute activation must be a string`},
	} {
		n := graph.NewNode("mma", "MatMulAdd", []string{"a", "b", "c"}, []string{"y"})
		n.Domain = graph.LoomDomain
		n.Attrs = []*graph.Attribute{tc.attr}
		if tc.attr.Name == "approximate" {
			n.Attrs = append(n.Attrs, graph.StringAttr("activation", "Gelu"))
		}
		_, err := Eval(n, 1, []*Value{a, a, a})
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.msg)
	}
}
