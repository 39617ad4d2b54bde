package scratch

import (
	"fmt"
	"os"
	"testing"

	"github.com/loomrt/loom/go/loom"
)

func TestRev(t *testing.T) {
	data, _ := os.ReadFile("/tmp/scratch/rev.loom")
	st, err := loom.EmitStages(loom.KernelSource{Name: "r.loom", Source: data}, loom.HostTarget())
	fmt.Println(err)
	if len(st) > 0 {
		fmt.Println(st[len(st)-1].IR)
	}
}
