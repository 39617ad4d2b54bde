package exec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/kernels/aot"
)

// memoEntries counts LookupShipped's memo.
func memoEntries() int {
	n := 0
	shippedLookups.Range(func(any, any) bool { n++; return true })
	return n
}

// LookupShipped's answers for the op library's kernels are kept once per kernel: looking up
// the same shipped variants again (each lookup reading the source through SourceOf, as a new
// shape's plan does) finds them without adding to the memo (it added an entry a lookup), and
// still answers right; a source that is not the op library's own text is answered but not
// kept.
func TestShippedLookupsAreKeptOnceAKernel(t *testing.T) {
	if AotOff {
		t.Skip("LOOM_AOT=off")
	}
	var host []*aot.Variant
	for _, v := range aot.Variants() {
		if v.Target == "host-x86_64-v3" && len(host) < 20 {
			host = append(host, v)
		}
	}
	require.NotEmpty(t, host)
	target, err := loom.ParseTarget("host-x86_64-v3")
	require.NoError(t, err)
	lookUp := func() {
		for _, v := range host {
			src, err := SourceOf(v.File, v.Symbol, v.Config)
			require.NoError(t, err)
			require.Same(t, v, LookupShipped(src, target), "%s %s", v.File, v.Symbol)
		}
	}
	lookUp()
	for _, v := range host {
		src, err := SourceOf(v.File, v.Symbol, v.Config)
		require.NoError(t, err)
		key, kept := shippedMemoKey(src, target)
		require.True(t, kept, "the op library's source is kept")
		_, found := shippedLookups.Load(key)
		require.True(t, found, "%s %s: the answer is kept", v.File, v.Symbol)
	}
	before := memoEntries()
	for range 3 {
		lookUp()
	}
	require.Equal(t, before, memoEntries(), "looked up again, nothing new kept")

	v := host[0]
	src, err := SourceOf(v.File, v.Symbol, v.Config)
	require.NoError(t, err)
	copied := device.KernelSource{Name: src.Name, Source: append([]byte{}, src.Source...), Specialization: src.Specialization}
	require.Same(t, v, LookupShipped(copied, target), "a copy of the text is the same kernel")
	require.Equal(t, before, memoEntries(), "a text not the op library's own is not kept")
	copied.Source[len(copied.Source)-1] ^= 1
	require.Nil(t, LookupShipped(copied, target), "another text is another kernel")
}
