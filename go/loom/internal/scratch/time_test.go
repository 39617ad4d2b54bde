package scratch

import (
	"os"
	"testing"
	"time"

	"github.com/loomrt/loom/go/loom"
)

func TestTiming(t *testing.T) {
	for _, f := range []struct{ file, sym string }{{"reduce.loom", "reduce_sum"}, {"gemm.loom", "sgemm"}} {
		data, _ := os.ReadFile("../../../../kernels/" + f.file)
		src := loom.KernelSource{Name: f.file, Source: data, Specialization: loom.Specialization{Symbol: f.sym}}
		t0 := time.Now()
		_, err := loom.Emit(src, loom.HostTarget(), loom.EmitC)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s frontend %v", f.sym, time.Since(t0))
		c := loom.NewCompiler(loom.Config{NoCache: true})
		t0 = time.Now()
		_, err = c.Compile(src, loom.HostTarget())
		t.Logf("%s full %v %v", f.sym, time.Since(t0), err)
		c.Close()
	}
}
