package exec

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/kernels/aot"
)

// emCUDA is the ELF machine of NVIDIA cubins.
const emCUDA = 190

// TestShippedCUDAVariants checks the cubins kernels/aot ships for sm_80 and sm_90 without a
// GPU: every variant shipped for the host is shipped for both; each image is a cubin for its
// target whose symbol table defines the artifact's entry as a function; its metadata describes
// that target; and the static key a session computes for the request at run time finds it
// (so a CUDA device loads the cubin instead of asking NVRTC).
func TestShippedCUDAVariants(t *testing.T) {
	id := func(v *aot.Variant) string {
		keys := slices.Sorted(maps.Keys(v.Config))
		var b bytes.Buffer
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s,", k, v.Config[k])
		}
		return v.File + " " + v.Symbol + " " + b.String()
	}
	byTarget := map[string]map[string]*aot.Variant{}
	for _, v := range aot.Variants() {
		if byTarget[v.Target] == nil {
			byTarget[v.Target] = map[string]*aot.Variant{}
		}
		byTarget[v.Target][id(v)] = v
	}
	host := byTarget["host-x86_64-v3"]
	require.NotEmpty(t, host)
	for _, target := range []string{"sm_80", "sm_90"} {
		cuda := byTarget[target]
		require.Len(t, cuda, len(host), "%s ships as many variants as the host", target)
		tg, err := loom.ParseTarget(target)
		require.NoError(t, err)
		sm := uint32(tg.SM)
		for vid := range host {
			v := cuda[vid]
			if !assert.NotNil(t, v, "%s is not shipped for %s", vid, target) {
				continue
			}
			require.NotNil(t, v.Image, vid)
			require.Nil(t, v.Entries, vid)
			assert.NotEmpty(t, v.Compiler, vid)
			var md loom.StaticMetadata
			require.NoError(t, json.Unmarshal([]byte(v.Metadata), &md), vid)
			require.NotNil(t, md.Artifact, vid)
			assert.Equal(t, target, md.Artifact.Target, vid)
			assert.Equal(t, v.Key, md.Artifact.Key, vid)

			image, err := v.Image()
			require.NoError(t, err, vid)
			// A cubin is an ELF64 image whose version fields carry NVIDIA's ABI version
			// (EV_CURRENT+128), which debug/elf refuses: read a copy with them set to 1.
			patched := slices.Clone(image)
			require.Greater(t, len(patched), 64, vid)
			patched[6] = 1
			patched[20], patched[21], patched[22], patched[23] = 1, 0, 0, 0
			f, err := elf.NewFile(bytes.NewReader(patched))
			require.NoError(t, err, "%s for %s: not an ELF image", vid, target)
			assert.Equal(t, elf.Machine(emCUDA), f.Machine, vid)
			flags := binary32(image[48:52])
			assert.True(t, flags&0xff == sm || (flags>>8)&0xff == sm, "%s: e_flags %#x do not name sm_%d", vid, flags, sm)
			syms, err := f.Symbols()
			require.NoError(t, err, vid)
			found := slices.ContainsFunc(syms, func(s elf.Symbol) bool {
				return s.Name == md.Artifact.Entry && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF
			})
			assert.True(t, found, "%s for %s: the cubin defines no function %s", vid, target, md.Artifact.Entry)

			src, err := SourceOf(v.File, v.Symbol, v.Config)
			require.NoError(t, err, vid)
			assert.Same(t, v, LookupShipped(src, tg), "%s: the run-time key does not find the %s cubin", vid, target)
		}
	}
}

func binary32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// TestCUDAShippedCubinsLoad loads every cubin shipped for the CUDA device's target with the
// driver alone (no NVRTC involved) and looks its entry up: the first check on a GPU that the
// ahead-of-time CUDA kernels are usable as built. It skips without a CUDA device.
func TestCUDAShippedCubinsLoad(t *testing.T) {
	dev := sessiontest.CUDADevice(t)
	n := 0
	for _, v := range aot.Variants() {
		if v.Target != dev.Target() {
			continue
		}
		var md loom.StaticMetadata
		require.NoError(t, json.Unmarshal([]byte(v.Metadata), &md), v.Module)
		m, err := loadShipped(dev, v)
		require.NoError(t, err, v.Module)
		_, err = m.Kernel(md.Artifact.Entry)
		assert.NoError(t, err, v.Module)
		require.NoError(t, m.Close(), v.Module)
		n++
	}
	require.NotZero(t, n, "no cubins shipped for %s", dev.Target())
	t.Logf("%d shipped cubins loaded on %s", n, dev)
}
