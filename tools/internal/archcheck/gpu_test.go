package archcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeviceCheckBuildsTheGPUTestTargets keeps docs/bazel.md's promise that the device check's
// build half (tools/devicecheck/build.sh) builds exactly the binaries of the gpu_test targets
// (tools/defs.bzl), the tests `bazel test --config=gpu` routes to GPU executors, so the two
// ways of running the CUDA tests on a GPU cannot drift apart.
func TestDeviceCheckBuildsTheGPUTestTargets(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	gpuTest := regexp.MustCompile(`(?s)\bgpu_test\(\s*name = "([^"]+)",.*?\btest = ":([^"]+)",`)
	var wrapped []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "out" || strings.HasPrefix(d.Name(), "bazel-")) {
			return filepath.SkipDir
		}
		if d.Name() != "BUILD.bazel" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, root+string(filepath.Separator))))
		for _, m := range gpuTest.FindAllStringSubmatch(string(data), -1) {
			require.True(t, strings.HasSuffix(m[1], "_gpu_test"), "//%s:%s: a gpu_test's name ends in _gpu_test", pkg, m[1])
			wrapped = append(wrapped, "//"+pkg+":"+m[2])
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, wrapped, "no gpu_test targets found")

	script, err := os.ReadFile(filepath.Join(root, "tools", "devicecheck", "build.sh"))
	require.NoError(t, err)
	// The test binaries are the lines of build.sh's binaries=( ... ) array (its tools=( ... ),
	// what the benchmarks run, are not tests).
	block := regexp.MustCompile(`(?s)\nbinaries=\((.*?)\n\)`).FindStringSubmatch(string(script))
	require.NotNil(t, block, "tools/devicecheck/build.sh has no binaries=( ... ) array")
	built := regexp.MustCompile(`(?m)^  "(//[^ ]+) `).FindAllStringSubmatch(block[1], -1)
	var labels []string
	for _, m := range built {
		labels = append(labels, m[1])
	}
	slices.Sort(wrapped)
	slices.Sort(labels)
	require.Equal(t, wrapped, labels, "the tests wrapped by gpu_test targets and the binaries tools/devicecheck/build.sh builds")
}
