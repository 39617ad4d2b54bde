package device

import (
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

const fillLoom = `
// fill writes value into out[0:n].
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

func fillSource(elem string) KernelSource {
	return KernelSource{Name: "fill.loom", Source: []byte(fillLoom), Specialization: loom.Specialization{Config: map[string]string{"T": elem}}}
}

func TestCompile(t *testing.T) {
	s := hostSession(t)
	ids, err := s.Compile([]KernelSource{fillSource("f32"), fillSource("u16"), fillSource("f32")})
	require.NoError(t, err)
	require.Len(t, ids, 3)
	require.Len(t, s.modules, 2, "the same kernel compiled twice shares one module")
	cfg, err := s.LaunchConfig(ids[0], []uint64{1000})
	require.NoError(t, err)
	require.Equal(t, LaunchConfig{Grid: native.Dim3{X: 16, Y: 1, Z: 1}, Block: native.Dim3{X: 64, Y: 1, Z: 1}}, cfg)
	// The artifact's metadata gave the binding its access mode: bound for read, it is refused.
	out, err := s.AllocateShared(4 * 1000)
	require.NoError(t, err)
	err = s.Record("bad", []Command{Dispatch{Kernel: ids[0], Args: []uint64{0, 1000}, Bindings: []Binding{out.Read()}}})
	require.ErrorContains(t, err, "declared write by the kernel but bound for read")

	rnd := sessiontest.NewRand(t)
	value := rnd.Float32()
	half, err := out.Slice(0, 2*1000)
	require.NoError(t, err)
	require.NoError(t, s.Record("fill", []Command{
		// The workload (n) comes from the scalar arguments when not given.
		Dispatch{Kernel: ids[0], Args: []uint64{uint64(math.Float32bits(value)), 1000}, Bindings: []Binding{out.Write()}},
		Dispatch{Kernel: ids[1], Args: []uint64{0xBEEF, 1000}, Workload: []uint64{1000}, Bindings: []Binding{half.Write()}},
		// An empty grid launches nothing.
		Dispatch{Kernel: ids[2], Args: []uint64{0, 0}, Bindings: []Binding{out.Write()}},
	}))
	require.NoError(t, s.Replay("fill"))
	got := make([]byte, 4*1000)
	require.NoError(t, s.Read(out, got))
	for i := range 500 {
		require.Equal(t, uint32(0xBEEFBEEF), binary.NativeEndian.Uint32(got[4*i:]), "element %d", i)
	}
	for i := 500; i < 1000; i++ {
		require.Equal(t, value, math.Float32frombits(binary.NativeEndian.Uint32(got[4*i:])), "element %d", i)
	}
}

func TestCompileErrors(t *testing.T) {
	s := hostSession(t)
	_, err := s.Compile(nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	broken := KernelSource{Name: "broken.loom", Source: []byte("kernel k[ {")}
	_, err = s.Compile([]KernelSource{fillSource("f32"), broken})
	require.ErrorIs(t, err, tensor.ErrCompile)
	require.ErrorContains(t, err, "source 1 (broken.loom) does not compile")
	require.ErrorContains(t, err, "broken.loom:1")
	require.Empty(t, s.kernels, "a failed Compile adds nothing")
	require.Empty(t, s.modules)

	two := KernelSource{Name: "two.loom", Source: []byte(fillLoom + `
kernel other {
	launch() {
		grid = (1, 1, 1)
		block = (1, 1, 1)
	}
	device(out buffer[f32] write) {
		out[0] = 1.0
	}
}
`)}
	_, err = s.Compile([]KernelSource{two})
	require.ErrorIs(t, err, tensor.ErrCompile)
	require.ErrorContains(t, err, "name the kernel")
	two.Specialization.Symbol = "other"
	ids, err := s.Compile([]KernelSource{two})
	require.NoError(t, err, "naming the symbol selects it")
	require.Len(t, ids, 1)

	badSpec := fillSource("f32")
	badSpec.Specialization.Config["BLOCK"] = "many"
	_, err = s.Compile([]KernelSource{badSpec})
	require.ErrorIs(t, err, tensor.ErrCompile)
	require.ErrorContains(t, err, "BLOCK")

	// A dispatch whose workload disagrees with its scalars is refused.
	fill, err := s.Compile([]KernelSource{fillSource("f32")})
	require.NoError(t, err)
	out, err := s.Allocate(64)
	require.NoError(t, err)
	err = s.Record("x", []Command{Dispatch{Kernel: fill[0], Args: []uint64{0, 16}, Workload: []uint64{8}, Bindings: []Binding{out.Write()}}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "launch argument 0")
	err = s.Record("x", []Command{Dispatch{Kernel: fill[0], Args: []uint64{0, 16}, Workload: []uint64{8, 8}, Bindings: []Binding{out.Write()}}})
	require.ErrorContains(t, err, "takes 1 launch arguments")
	_, err = s.LaunchConfig(fill[0], []uint64{1 << 62})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument, "the launch program's own checks apply")
}

func TestContextCompiler(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	ctx, err := NewContext(dev, Unlimited)
	require.NoError(t, err)
	c1, err := ctx.Compiler()
	require.NoError(t, err)
	c2, err := ctx.Compiler()
	require.NoError(t, err)
	require.Same(t, c1.Loom, c2.Loom, "created once, then shared")
	require.Equal(t, dev.Target(), c1.Target.String())
	a, b := testSession(t, ctx), testSession(t, ctx)
	_, err = a.Compile([]KernelSource{fillSource("f32")})
	require.NoError(t, err)
	_, err = b.Compile([]KernelSource{fillSource("f32")})
	require.NoError(t, err)
	stats := c1.Loom.Stats()
	require.Equal(t, int64(2), stats.Hits+stats.Misses, "both sessions compiled with the shared compiler")
	require.GreaterOrEqual(t, stats.Hits, int64(1), "the second compilation came from its cache")
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, ctx.Close())
	_, err = c1.Loom.Compile(fillSource("f32"), c1.Target)
	require.ErrorIs(t, err, loom.ErrClosed, "the context closed the compiler it made")
}

// TestNVRTCImagesAreCachedOnDisk: a CUDA artifact's cubin is compiled by NVRTC once (no GPU
// needed) and then read from the compiler's image cache, by a new compiler on the same
// directory too; another driver version or target is another entry. The image is a CUDA ELF
// for the artifact's SM (e_machine 190, the SM in e_flags' low byte).
func TestNVRTCImagesAreCachedOnDisk(t *testing.T) {
	sessiontest.RequireNVRTC(t)
	dir := t.TempDir()
	lc := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer lc.Close()
	for _, target := range []string{"sm_90", "sm_80"} {
		tgt, err := loom.ParseTarget(target)
		require.NoError(t, err)
		src := fillSource("f32")
		a, err := lc.Compile(loom.KernelSource{Name: src.Name, Source: src.Source, Specialization: src.Specialization}, tgt)
		require.NoError(t, err)
		before := lc.Stats()
		image, err := CUDAImage(lc, a, 12080)
		require.NoError(t, err)
		require.Equal(t, before.ImageMisses+1, lc.Stats().ImageMisses, "compiled by NVRTC")
		require.Greater(t, len(image), 64)
		require.Equal(t, []byte("\x7fELF"), image[:4])
		require.Equal(t, uint16(190), binary.LittleEndian.Uint16(image[18:]), "e_machine EM_CUDA")
		sm, _ := strconv.Atoi(target[3:])
		require.Equal(t, uint32(sm), binary.LittleEndian.Uint32(image[48:])&0xff, "e_flags' SM")

		again, err := CUDAImage(lc, a, 12080)
		require.NoError(t, err)
		require.Equal(t, image, again)
		require.Equal(t, before.ImageHits+1, lc.Stats().ImageHits, "read back, not compiled")

		other := loom.NewCompiler(loom.Config{CacheDir: dir})
		again, err = CUDAImage(other, a, 12080)
		require.NoError(t, err)
		require.Equal(t, image, again)
		require.Equal(t, int64(1), other.Stats().ImageHits, "a new compiler finds it on disk")
		_, err = CUDAImage(other, a, 13000)
		require.NoError(t, err)
		require.Equal(t, int64(1), other.Stats().ImageMisses, "another driver version: another entry")
		require.NoError(t, other.Close())
	}

	// CUDA C that NVRTC rejects: the error carries its log, and nothing is cached.
	bad := &loom.Artifact{Key: "0badc0de", Kernel: "broken", Target: "sm_90", Source: `extern "C" __global__ void broken(int* p) { p[0] = undefined_name; }`}
	_, err := CUDAImage(lc, bad, 12080)
	require.ErrorContains(t, err, "undefined_name")
	_, err = CUDAImage(lc, &loom.Artifact{Key: "empty", Kernel: "empty", Target: "sm_90"}, 12080)
	require.ErrorContains(t, err, "no CUDA source")
}
