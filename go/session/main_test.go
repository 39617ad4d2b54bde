package session

import (
	"os"
	"strconv"
	"testing"

	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
)

// TestMain runs the package's tests as sessiontest.Main does. LOOM_TEST_SHARED_ARENA_MIN=N
// runs them with plans on shared arenas from N bytes of arena (0: every host plan), to put
// the whole suite through the arenas' rebinding.
func TestMain(m *testing.M) {
	if v := os.Getenv("LOOM_TEST_SHARED_ARENA_MIN"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			plan.SetSharedArenaMin(n)
		}
	}
	sessiontest.Main(m)
}
