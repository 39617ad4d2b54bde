package graph

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadNodeTests(t *testing.T) {
	models := nodeTestModels(t)
	failed := 0
	for _, p := range models {
		m, err := Load(p)
		if err != nil {
			failed++
			t.Errorf("%s: %v", testDirName(p), err)
			continue
		}
		require.NoError(t, m.Close())
	}
	t.Logf("loaded %d of %d node-test models", len(models)-failed, len(models))
}
