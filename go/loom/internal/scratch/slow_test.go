package scratch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/passes"
	"github.com/loomrt/loom/go/loom/types"
)

func TestSlowInputs(t *testing.T) {
	files, _ := filepath.Glob(os.Getenv("FUZZDIR") + "/*")
	for _, p := range files {
		data, _ := os.ReadFile(p)
		lines := strings.SplitN(string(data), "\n", 3)
		s := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		src, err := strconv.Unquote(s)
		if err != nil {
			continue
		}
		t0 := time.Now()
		f, err := parser.ParseFile("x", []byte(src))
		tp := time.Since(t0)
		if err == nil && types.CheckAll(f) == nil {
			for _, name := range types.Kernels(f) {
				k, err := types.Check(f, name, nil)
				if err != nil {
					continue
				}
				fn, l, err := ir.Build(k)
				if err != nil {
					continue
				}
				passes.OptimizeLaunch(l)
				passes.Optimize(fn, nil)
			}
		}
		if d := time.Since(t0); d > 5*time.Millisecond {
			t.Logf("%s: %v (parse %v) %d bytes", filepath.Base(p), d, tp, len(src))
		}
	}
}
