package scratch

import (
	"fmt"
	"testing"

	"github.com/loomrt/loom/go/loom"
)

func TestIRFill(t *testing.T) {
	src, _ := loom.ReadSource("../../../../kernels/fill.loom", "fill", map[string]string{"BLOCK": "64"})
	out, err := loom.Emit(src, loom.HostTarget(), loom.EmitIR)
	fmt.Println(out, err)
}
