package loom_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

const reverseSrc = `
// reverse reverses each block's slice of x through shared memory.
kernel reverse[BLOCK index = 64] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
		shared = BLOCK * sizeof(f32)
	}
	device(x buffer[f32] read, y buffer[f32] write, n index) {
		assume len(x) >= n && len(y) >= n
		S := shared(f32, [BLOCK])
		i := block_id.x * BLOCK + thread_id.x
		if i < n {
			S[thread_id.x] = x[i]
		}
		barrier()
		// i is recomputed after the barrier; the mirrored element was written by another thread.
		mirror := BLOCK - 1 - thread_id.x
		if i < n && block_id.x * BLOCK + mirror < n {
			y[i] = S[mirror]
		}
	}
}
`

func TestBarrierAndSharedMemory(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	a := compileInline(t, c, reverseSrc, "reverse", map[string]string{"BLOCK": "32"})
	require.Equal(t, 0, generatedGuards(a.Source), a.Source)
	n := 100 + r.IntN(100)
	x := randF32(r, n)
	y := make([]float32, n)
	want := make([]float32, n)
	for b := 0; b*32 < n; b++ {
		for t := 0; t < 32; t++ {
			i, m := b*32+t, b*32+31-t
			if i < n && m < n {
				want[i] = x[m]
			}
		}
	}
	res := launch(t, a, [][]byte{hostrun.F32(x), hostrun.F32(y)}, 2, int64(n))
	require.Zero(t, res.Violation)
	require.Equal(t, want, hostrun.ToF32(res.Buffers[1]))
	cuda, err := loom.Emit(loom.KernelSource{Name: "r.loom", Source: []byte(reverseSrc)}, sm90, loom.EmitCUDA)
	require.NoError(t, err)
	require.Contains(t, cuda, "__syncthreads();")
}

// TestValidTestdataCompiles takes the checker's all-constructs file through the whole pipeline.
func TestValidTestdataCompiles(t *testing.T) {
	c := newCompiler(t)
	data, err := os.ReadFile(filepath.Join("types", "testdata", "valid.loom"))
	require.NoError(t, err)
	src := loom.KernelSource{Name: "valid.loom", Source: data, Specialization: loom.Specialization{Symbol: "valid"}}
	_, err = c.Compile(src, loom.HostTarget())
	require.NoError(t, err)
	src.Specialization.Config = map[string]string{"T": "f16", "FAST": "false", "VL": "8"}
	_, err = c.Compile(src, loom.HostTarget())
	require.NoError(t, err)
	_, err = c.Compile(src, sm90)
	require.NoError(t, err)
}
