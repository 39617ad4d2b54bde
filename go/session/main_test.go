package session

import (
	"testing"

	"github.com/loomrt/loom/go/session/internal/sessiontest"
)

func TestMain(m *testing.M) { sessiontest.Main(m) }
