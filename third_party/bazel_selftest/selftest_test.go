package selftest

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/exp/slices"
	"golang.org/x/sys/cpu"
	"google.golang.org/protobuf/encoding/protowire"
)

// fletcher32 is the reference: a direct byte-wise Fletcher-32.
func fletcher32(data []byte) uint32 {
	var a, b uint32
	for i := 0; i < len(data); i += 2 {
		word := uint32(data[i])
		if i+1 < len(data) {
			word |= uint32(data[i+1]) << 8
		}
		a = (a + word) % 65535
		b = (b + a) % 65535
	}
	return b<<16 | a
}

func TestFletcher32MatchesReference(t *testing.T) {
	for round := 0; round < 100; round++ {
		data := make([]byte, 1+rand.IntN(4096))
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		require.Equal(t, fletcher32(data), Fletcher32(data), "round %d, %d bytes", round, len(data))
	}
	require.Zero(t, Fletcher32(nil))
}

// TestExternalModules proves the Go module repositories build: x/exp and
// protobuf's wire encoding round-trip random values.
func TestExternalModules(t *testing.T) {
	values := make([]uint64, 64)
	for i := range values {
		values[i] = rand.Uint64()
	}
	var buf []byte
	for _, v := range values {
		buf = protowire.AppendVarint(buf, v)
	}
	decoded := make([]uint64, 0, len(values))
	for len(buf) > 0 {
		v, n := protowire.ConsumeVarint(buf)
		require.Positive(t, n, "bad varint")
		decoded = append(decoded, v)
		buf = buf[n:]
	}
	require.True(t, slices.Equal(values, decoded))
}

// TestAssemblyLinks covers Go assembly in a dependency: x/sys/cpu reads CPUID
// in an assembly function, which links only if the rules built its ABI
// information with the package path.
func TestAssemblyLinks(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("CPUID check for amd64 only")
	}
	// Every amd64 processor has SSE2; false would mean CPUID was not read.
	require.True(t, cpu.X86.HasSSE2)
}
