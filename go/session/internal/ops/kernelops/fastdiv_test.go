package kernelops

import (
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

// TestFastDivIsExactBelow2To31 checks fastDiv's quotients against division: every divisor
// up to 2^12 and random ones up to past 2^31, with the dividends at the edges (0, 1, d - 1, d,
// multiples of d and their neighbours, 2^31 - 1) and at random, and that n·m never overflows.
func TestFastDivIsExactBelow2To31(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	const top = int64(1)<<31 - 1
	check := func(d, n int64) {
		m, s := fastDiv(d)
		hi, lo := bits.Mul64(uint64(n), m)
		if hi != 0 {
			t.Fatalf("d %d n %d: n·m overflows 64 bits (m %d)", d, n, m)
		}
		want := n / max(d, 1)
		if got := int64(lo >> s); got != want {
			t.Fatalf("d %d n %d: got %d, want %d (m %d, s %d)", d, n, got, want, m, s)
		}
	}
	divisors := []int64{-5, 0, 1 << 31, 1<<31 + 1, 1 << 40, top, top - 1, 1 << 30, 1<<30 + 1, 3, 7, 641, 6700417}
	for d := int64(1); d <= 1<<12; d++ {
		divisors = append(divisors, d)
	}
	for range 2000 {
		divisors = append(divisors, 1+r.Int64N(top+2), 1+r.Int64N(1<<16))
	}
	for _, d := range divisors {
		dd := max(d, 1)
		for _, n := range []int64{0, 1, dd - 1, dd, dd + 1, 2*dd - 1, top, top - 1, top / dd * dd, top/dd*dd - 1} {
			if n >= 0 && n <= top {
				check(d, n)
			}
		}
		for range 20 {
			check(d, r.Int64N(top+1))
		}
	}
}
