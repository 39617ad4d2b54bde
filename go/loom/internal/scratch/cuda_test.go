package scratch

import (
	"os"
	"testing"

	"github.com/loomrt/loom/go/loom"
)

func TestCUDA(t *testing.T) {
	for _, f := range []struct{ file, sym string }{{"fill.loom", "fill"}, {"gemm.loom", "sgemm"}} {
		data, _ := os.ReadFile("../../../../kernels/" + f.file)
		src := loom.KernelSource{Name: f.file, Source: data, Specialization: loom.Specialization{Symbol: f.sym}}
		out, err := loom.Emit(src, loom.MustParseTarget("sm_90"), loom.EmitCUDA)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile("/tmp/scratch/"+f.sym+".cu", []byte(out), 0o644)
	}
}
