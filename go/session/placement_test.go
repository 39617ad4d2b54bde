package session

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/session/internal/ep"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// placementCase is a model whose nodes cover the placements: kernel ops, ops without a kernel,
// a kernel op whose inputs no kernel covers, control flow and subgraph nodes.
type placementCase struct {
	name  string
	model func(t *testing.T) *graph.Model
	feeds func(t *testing.T) []tensor.NamedTensor
}

func placementCases() []placementCase {
	rnd := inferRand()
	const l = 4
	k, w, x := randomF32(rnd, l), randomF32(rnd, l), randomF32(rnd, l)
	return []placementCase{
		{"mixed", func(t *testing.T) *graph.Model { return mixedModel(t) },
			func(t *testing.T) []tensor.NamedTensor { return mixedFeeds(t, 5) }},
		{"loop", func(t *testing.T) *graph.Model { return loopModel(t, k, w) },
			func(*testing.T) []tensor.NamedTensor {
				return []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{3})}, {Name: "x", Tensor: tensor.MustTensor([]int64{l}, x)}}
			}},
		{"if", func(t *testing.T) *graph.Model { return ifModel(t, w) },
			func(*testing.T) []tensor.NamedTensor {
				return []tensor.NamedTensor{{Name: "c", Tensor: tensor.MustTensor([]int64{}, []bool{true})}, {Name: "x", Tensor: tensor.MustTensor([]int64{l}, x)}}
			}},
	}
}

// nodesByName maps the names of g's nodes and its subgraphs' to the nodes (the test models'
// names are unique).
func nodesByName(t *testing.T, g *graph.Graph) map[string]*graph.Node {
	out := map[string]*graph.Node{}
	g.Walk(func(sg *graph.Graph) {
		for _, n := range sg.Nodes {
			require.NotContains(t, out, n.Name, "node names are unique")
			out[n.Name] = n
		}
	})
	return out
}

// TestPlacementAgreesAcrossReports checks that the placement decided when the session was
// built is what every report says: the fallback report, the op spans' variant and reason
// (for the nodes no kernel may run) under both executors, and the compiled plan's report.
func TestPlacementAgreesAcrossReports(t *testing.T) {
	for _, c := range placementCases() {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				tp, rec := recordingProvider(t)
				s, err := FromGraph(c.model(t), tracedOptions(tp, executor, WithOptimizationLevel(opt.LevelDisabled))...)
				require.NoError(t, err)
				defer s.Close()
				g := s.Graph().Graph
				nodes := nodesByName(t, g)

				// Every node, subgraphs' too, was placed once, on the host provider's terms.
				require.Len(t, s.eng.Placements, g.NodeCount())
				for _, n := range nodes {
					p, ok := s.eng.Placements[n]
					require.True(t, ok, "node %q is placed", n.Name)
					assert.Equal(t, ep.HostProvider{}.Capability(n), p, n.Name)
					assert.Equal(t, ProviderHost, p.Provider)
					assert.Equal(t, ep.KernelCapable(n) && !ep.HostNatured(n), p.Kernel, n.Name)
					assert.Equal(t, p.Kernel, p.Reason == "", n.Name)
					assert.Empty(t, p.Fallback, "the host was asked for")
				}
				assert.Empty(t, s.ExecutionProviderFallbackReport())

				feeds := c.feeds(t)
				if executor == exec.ExecutorPlan { // the signature's first run builds the plan
					_, err = s.Run(context.Background(), feeds)
					require.NoError(t, err)
				}
				ctx, _ := parentContext(t, tp)
				_, err = s.Run(ctx, feeds)
				require.NoError(t, err)

				// The spans of the nodes no kernel may run carry their placement's reason.
				spans := 0
				for _, sp := range rec.Ended() {
					name := attrOf(sp, exec.AttrNode).AsString()
					if sp.Name() == "loom.Run" || name == "" {
						continue
					}
					spans++
					n := nodes[name]
					require.NotNil(t, n, "span of node %q", name)
					p := s.eng.Placements.Of(n)
					variant, reason := attrOf(sp, exec.AttrVariant).AsString(), attrOf(sp, exec.AttrReason).AsString()
					if !p.Kernel {
						assert.Equal(t, exec.VariantHost, variant, name)
						assert.Equal(t, p.HostReason(), reason, name)
						continue
					}
					// A node a kernel may run: the run refines its placement, never to a
					// static reason.
					assert.NotEmpty(t, reason, name)
					if variant == exec.VariantHost {
						assert.NotEqual(t, p.HostReason(), reason, name)
					} else {
						assert.True(t, strings.HasPrefix(variant, "loom:"), "%s: %s", name, variant)
					}
				}
				assert.Positive(t, spans)

				plans := s.ExecutionPlans()
				if executor == exec.ExecutorInterpreter {
					assert.Empty(t, plans)
					return
				}
				require.Len(t, plans, 1)
				r := plans[0]
				require.True(t, r.Planned, r.Reason)
				// PlanReport.Nodes takes every top-level node (and inlined branches' nodes)
				// with its placement; host steps and kernel steps follow the placement.
				covered := map[string]bool{}
				kernels, hosts := 0, map[string]string{}
				for _, pn := range r.Nodes {
					n := nodes[pn.Node]
					require.NotNil(t, n, pn.Node)
					require.False(t, covered[pn.Node], "%s reported twice", pn.Node)
					covered[pn.Node] = true
					p := s.eng.Placements.Of(n)
					assert.Equal(t, n.OpType, pn.OpType)
					assert.Equal(t, p.Provider, pn.Provider, pn.Node)
					assert.Equal(t, p.Kernel, pn.Kernel, pn.Node)
					assert.Equal(t, p.Reason, pn.Placement, pn.Node)
					switch pn.Step {
					case PlanKernel:
						kernels++
						assert.True(t, p.Kernel, "%s: a kernel step of a node placed on the host", pn.Node)
					case PlanHost:
						hosts[pn.Node] = pn.Reason
						if !p.Kernel {
							assert.Equal(t, p.HostReason(), pn.Reason, pn.Node)
						}
					case PlanFolded, PlanAlias, PlanInlined:
						assert.Empty(t, pn.Reason)
					default:
						t.Errorf("%s: step %q", pn.Node, pn.Step)
					}
				}
				for _, n := range g.Nodes {
					assert.True(t, covered[n.Name], "node %q is in PlanReport.Nodes", n.Name)
				}
				assert.Equal(t, r.KernelSteps, kernels)
				require.Len(t, r.HostSteps, len(hosts))
				for _, h := range r.HostSteps {
					assert.Equal(t, hosts[h.Node], h.Reason, h.Node)
				}
			})
		}
	}
}

// TestPlacementCUDA checks the CUDA provider's placements, with a device and without one, and
// that a session's fallback report is its placements'.
func TestPlacementCUDA(t *testing.T) {
	for _, c := range placementCases() {
		t.Run(c.name, func(t *testing.T) {
			m := c.model(t)
			g := m.Graph
			nodes := nodesByName(t, g)

			avail := ep.PlaceGraph(g, ep.CUDAProvider{})
			off := ep.PlaceGraph(g, ep.CUDAProvider{Unavailable: "CUDA unavailable: no driver"})
			for _, n := range nodes {
				host := ep.HostProvider{}.Capability(n)
				p := avail[n]
				assert.Equal(t, host.Kernel, p.Kernel, n.Name)
				assert.Equal(t, host.Reason, p.Reason, n.Name)
				switch {
				case ep.HostNatured(n):
					assert.Equal(t, ProviderHost, p.Provider, n.Name)
					assert.Equal(t, ep.CauseControlFlow, p.Cause)
					assert.Contains(t, p.Fallback, "control flow", n.Name)
				case !ep.KernelCapable(n):
					assert.Equal(t, ProviderHost, p.Provider, n.Name)
					assert.Equal(t, "no Loom kernel for this op: it runs as a Go host function", p.Fallback, n.Name)
				default:
					assert.Equal(t, ProviderCUDA, p.Provider, n.Name)
					assert.Empty(t, p.Fallback, n.Name)
				}
				q := off[n]
				assert.Equal(t, ProviderHost, q.Provider, n.Name)
				assert.Equal(t, host.Kernel, q.Kernel, n.Name)
				assert.Equal(t, host.Reason, q.Reason, n.Name)
				assert.Equal(t, "CUDA unavailable: no driver", q.Fallback, n.Name)
			}

			s, err := FromGraph(m, WithExecutionProvider(ProviderCUDA), WithOptimizationLevel(opt.LevelDisabled))
			require.NoError(t, err)
			defer s.Close()
			want := []FallbackEntry{}
			for _, n := range s.Graph().Graph.Nodes {
				if p := s.eng.Placements.Of(n); p.Fallback != "" {
					want = append(want, FallbackEntry{Node: n.Name, Op: n.OpType, Provider: p.Provider, Reason: p.Fallback})
				}
			}
			assert.Equal(t, want, s.ExecutionProviderFallbackReport())
			if s.Provider() == ProviderHost {
				require.Len(t, want, len(s.Graph().Graph.Nodes), "without CUDA every node falls back")
				for _, e := range want {
					assert.Contains(t, e.Reason, "CUDA")
				}
			}
			_, err = s.Run(context.Background(), c.feeds(t))
			require.NoError(t, err)
		})
	}
}
