package scratch

import (
	"os"
	"testing"
	"time"

	"github.com/loomrt/loom/go/loom"
)

func TestCompileTimes(t *testing.T) {
	data, _ := os.ReadFile("../../../../kernels/gemm.loom")
	for _, spec := range []map[string]string{{}, {"MR": "4", "NV": "1", "VL": "8", "MB": "32", "NB": "64"}, {"MR": "12", "NV": "2", "VL": "16", "MB": "96", "NB": "256"}} {
		src := loom.KernelSource{Name: "gemm.loom", Source: data, Specialization: loom.Specialization{Symbol: "sgemm", Config: spec}}
		t0 := time.Now()
		out, err := loom.Emit(src, loom.HostTarget(), loom.EmitC)
		if err != nil {
			t.Fatal(err)
		}
		fe := time.Since(t0)
		c := loom.NewCompiler(loom.Config{NoCache: true})
		t0 = time.Now()
		_, err = c.Compile(src, loom.HostTarget())
		t.Logf("%v: frontend %v (%d bytes C), full %v %v", spec, fe, len(out), time.Since(t0), err)
		c.Close()
	}
}
