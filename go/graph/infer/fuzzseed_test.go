package infer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteFuzzSeeds regenerates the committed seed corpus under testdata/fuzz when
// LOOM_WRITE_FUZZ_SEEDS=1; otherwise it checks that the committed corpus is present.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz")
	if os.Getenv("LOOM_WRITE_FUZZ_SEEDS") != "1" {
		for _, target := range []string{"FuzzLoadBytes", "FuzzMutateModel"} {
			files, _ := filepath.Glob(filepath.Join(dir, target, "seed-*"))
			require.NotEmpty(t, files, "seed corpus for %s missing; run with LOOM_WRITE_FUZZ_SEEDS=1", target)
		}
		return
	}
	for i, data := range seedModels(t) {
		write(t, filepath.Join(dir, "FuzzLoadBytes", fmt.Sprintf("seed-%d", i)), fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data))
		write(t, filepath.Join(dir, "FuzzMutateModel", fmt.Sprintf("seed-%d", i)),
			fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", rune(i), []byte{byte(i), 3, 7, 1, 2, 0x90, 3, 1, 4}))
	}
}

func write(t *testing.T, path, content string) {
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}
