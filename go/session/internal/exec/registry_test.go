package exec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// TestRunsCoverTheRegistry checks that the interpreter's runs, built in this package's init,
// hold every operator of the registry: the host packages register from their own inits, which
// Go runs before this package's only because ops_registered.go imports them all. One operator
// from each host package (arith, movement, nn) that has no kernel planner, so that only its
// host function can give it a run, is named too, and one from the kernel planners.
func TestRunsCoverTheRegistry(t *testing.T) {
	require.NotEmpty(t, ops.HostOps)
	for key := range ops.HostOps {
		// A host function of another domain is registered as "domain:Op" (ops.PlannerKey).
		n := &graph.Node{OpType: key}
		if domain, op, ok := strings.Cut(key, ":"); ok {
			n = &graph.Node{OpType: op, Domain: domain}
			require.Equal(t, key, ops.PlannerKey(n))
		}
		_, ok := LookupOp(n)
		require.True(t, ok, "%s is registered but the interpreter has no run for it", key)
	}
	for op := range ops.LoomOps {
		_, ok := LookupOp(&graph.Node{OpType: op, Domain: graph.LoomDomain})
		require.True(t, ok, "ai.loom %s is registered but the interpreter has no run for it", op)
	}
	for _, op := range []string{"Det", "NonZero", "NonMaxSuppression"} {
		require.NotContains(t, KernelRuns, op)
		_, ok := LookupOp(&graph.Node{OpType: op})
		require.True(t, ok, "%s: its host package did not register before the runs were built", op)
	}
	require.Contains(t, KernelRuns, "Conv", "the kernel planners registered before the runs were built")
}
