package ops

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sortedKey is KernelKey as it was written first (sort.Strings, a strings.Builder): the
// oracle for the allocation-free spelling.
func sortedKey(file, symbol string, config map[string]string) string {
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(file)
	b.WriteByte(0)
	b.WriteString(symbol)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(config[k])
	}
	return b.String()
}

func TestKernelKeyMatchesTheSortedSpelling(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	names := []string{"M", "N", "K", "TILE_M", "TILE_N", "ACT", "A", "B", "", "TRANS_A", "nvy", "mr"}
	for i := 0; i < 5000; i++ {
		// Up to 40 keys: past the 32 kept on the stack too.
		config := map[string]string{}
		for n := rnd.IntN(41); len(config) < n; {
			k := names[rnd.IntN(len(names))] + strconv.Itoa(rnd.IntN(50))
			config[k] = strconv.Itoa(rnd.IntN(1000))
		}
		file, symbol := "gemm"+strconv.Itoa(rnd.IntN(3))+".loom", "k"+strconv.Itoa(rnd.IntN(3))
		want := sortedKey(file, symbol, config)
		require.Equal(t, want, KernelKey(file, symbol, config))
		prefix := []byte("prefix")
		require.Equal(t, "prefix"+want, string(AppendKernelKey(prefix, file, symbol, config)))
	}
	require.Equal(t, "f\x00s", KernelKey("f", "s", nil))
}

func TestAppendKernelKeyAllocatesNothingForALookup(t *testing.T) {
	small := map[string]string{"TILE_N": "64", "TILE_M": "6", "ACT": "relu", "K": "576"}
	// conv2d_cout's configuration in PAD mode: 20 keys.
	cout := map[string]string{"MV": "1", "NY": "2", "NP": "14", "VL": "16", "KH": "3", "KW": "3", "SH": "1", "SW": "1",
		"DH": "1", "DW": "1", "KV": "3", "KU": "3", "RB": "2", "BIAS": "true", "ACT": "1", "AFFINE": "false",
		"PAD": "true", "PH": "1", "PW": "1", "IW": "14"}
	for _, config := range []map[string]string{small, cout} {
		m := map[string]int{KernelKey("conv.loom", "conv2d", config): 1}
		allocs := testing.AllocsPerRun(100, func() {
			var buf [256]byte
			if m[string(AppendKernelKey(buf[:0], "conv.loom", "conv2d", config))] != 1 {
				t.Fatal("lookup missed")
			}
		})
		require.Zero(t, allocs, "%d keys", len(config))
	}
}
