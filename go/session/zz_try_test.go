package session

import (
	"testing"

	"github.com/loomrt/loom/go/loom"
)

func TestZZTry(t *testing.T) {
	c := loom.NewCompiler(loom.Config{NoCache: true})
	defer c.Close()
	src := `
kernel fill[T type = f32, BLOCK index = 64] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
		shared = 0
	}
	device(out buffer[T] write, value T, n index) {
		i := block_id.x * BLOCK + thread_id.x
		if i < n {
			out[i] = value
		}
	}
}
`
	a, err := c.Compile(loom.KernelSource{Name: "fill.loom", Source: []byte(src)}, loom.HostTarget())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("target %s entry %s params %+v workload %+v scalarbytes %d blob %d hidden %v launch %+v", a.Target, a.Entry, a.Params, a.Workload, a.ScalarBytes, a.BlobBytes, a.HiddenOffsets, a.Launch)
}
