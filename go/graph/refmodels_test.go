package graph

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadCheckReferenceModels(t *testing.T) {
	models := referenceModels()
	if len(models) == 0 {
		t.Skip("no reference models found (go/session/testdata/models, tools/models/fetch.sh, or LOOM_ONNX_MODELS)")
	}
	for _, p := range models {
		t.Run(filepath.Base(p), func(t *testing.T) {
			m, err := Load(p)
			require.NoError(t, err)
			defer m.Close()
			require.NoError(t, m.Check())
			t.Logf("%s: opsets %v, %d nodes", filepath.Base(p), m.Opsets, m.Graph.NodeCount())
		})
	}
}
