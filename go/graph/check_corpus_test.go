package graph

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckNodeTests(t *testing.T) {
	models := nodeTestModels(t)
	failed := 0
	for _, p := range models {
		m, err := Load(p)
		require.NoError(t, err)
		if err := m.Check(); err != nil {
			failed++
			t.Errorf("%s: %v", testDirName(p), err)
		}
		require.NoError(t, m.Close())
	}
	t.Logf("checked %d of %d node-test models", len(models)-failed, len(models))
}
