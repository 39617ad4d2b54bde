package scratch

import (
	"os"
	"testing"

	"github.com/loomrt/loom/go/loom"
)

func TestRev(t *testing.T) {
	data, _ := os.ReadFile("/tmp/scratch/rev.loom")
	out, err := loom.Emit(loom.KernelSource{Name: "r.loom", Source: data}, loom.HostTarget(), loom.EmitC)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile("/tmp/scratch/rev.c", []byte(out), 0o644)
}
