package infer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// compareDeclared checks every graph output (of the main graph and of subgraphs) whose declared
// and inferred types are both known, returning how many dimensions were compared and a
// description of each disagreement.
func compareDeclared(m *graph.Model) (dims int, problems []string) {
	m.Graph.Walk(func(g *graph.Graph) {
		for _, o := range g.Outputs {
			d, inf := o.Declared, o.Inferred
			if d.Kind != graph.KindTensor || inf.Kind != graph.KindTensor {
				continue
			}
			if d.Elem != graph.Undefined && inf.Elem != graph.Undefined && d.Elem != inf.Elem {
				problems = append(problems, fmt.Sprintf("%s: declared %v, inferred %v", o.Name, d, inf))
				continue
			}
			if !d.Ranked || !inf.Ranked {
				continue
			}
			if len(d.Shape) != len(inf.Shape) {
				problems = append(problems, fmt.Sprintf("%s: declared %v, inferred %v", o.Name, d, inf))
				continue
			}
			for i := range d.Shape {
				if d.Shape[i].Known() && inf.Shape[i].Known() {
					dims++
					if d.Shape[i].Value != inf.Shape[i].Value {
						problems = append(problems, fmt.Sprintf("%s: declared %v, inferred %v", o.Name, d, inf))
						break
					}
				}
			}
		}
	})
	return dims, problems
}

// declaredUnmatched counts the known declared output dimensions inference left unknown.
func declaredUnmatched(m *graph.Model) int {
	n := 0
	for _, o := range m.Graph.Outputs {
		if o.Declared.Ranked && o.Inferred.Ranked && len(o.Declared.Shape) == len(o.Inferred.Shape) {
			for i, d := range o.Declared.Shape {
				if d.Known() && !o.Inferred.Shape[i].Known() {
					n++
				}
			}
		} else if o.Declared.Ranked && o.Declared.Kind == graph.KindTensor {
			n += len(o.Declared.Shape)
		}
	}
	return n
}

func TestInferNodeTests(t *testing.T) {
	models := nodeTestModels(t)
	var failed, compared, missed int
	for _, p := range models {
		name := testDirName(p)
		m, err := graph.Load(p)
		require.NoError(t, err, name)
		if err := Shapes(m); err != nil {
			failed++
			t.Errorf("%s: infer: %v", name, err)
			m.Close()
			continue
		}
		if err := m.Check(); err != nil {
			failed++
			t.Errorf("%s: check after inference: %v", name, err)
		}
		d, probs := compareDeclared(m)
		compared += d
		missed += declaredUnmatched(m)
		for _, pr := range probs {
			t.Errorf("%s: %s", name, pr)
		}
		require.NoError(t, m.Close())
	}
	t.Logf("%d node-test models: %d failed; %d declared output dims matched by inference, %d left unknown",
		len(models), failed, compared, missed)
}

func TestInferReferenceModels(t *testing.T) {
	eachReferenceModel(t, func(t *testing.T, m *graph.Model) {
		require.NoError(t, m.Check())
		d, probs := compareDeclared(m)
		require.Empty(t, probs)
		for _, o := range m.Graph.Outputs {
			t.Logf("output %s: declared %v inferred %v", o.Name, o.Declared, o.Inferred)
		}
		t.Logf("%d declared dims matched", d)
	})
}
