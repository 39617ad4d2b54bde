package kernelops

import "math/bits"

// fastDiv returns the multiplier m and shift s with n / d == (n·m) >> s for every
// 0 <= n < 2^31, without overflowing 64 bits: the round-up method of Granlund and Montgomery
// ("Division by invariant integers using multiplication", 1994) for N = 31 bits, with
// l = ⌈log2 d⌉, s = 31 + l and m = ⌈2^s / d⌉ <= 2^32 + 1 (so n·m < 2^64). A divisor below 1
// divides as 1; one above 2^31 exceeds every n, so every quotient is 0 (m = 0).
//
// The kernels that lay their blocks along grid x (FASTDIV in kernels/elementwise.loom) split
// the block index with these instead of dividing in every thread.
func fastDiv(d int64) (m, s uint64) {
	switch {
	case d <= 1:
		return 1, 0
	case d > 1<<31:
		return 0, 0
	}
	l := uint64(bits.Len64(uint64(d - 1)))
	s = 31 + l
	m = (1<<s + uint64(d) - 1) / uint64(d)
	return m, s
}

// fastDivArgs appends the (m, s) pairs of the divisors ds to args.
func fastDivArgs(args []uint64, ds ...int64) []uint64 {
	for _, d := range ds {
		m, s := fastDiv(d)
		args = append(args, m, s)
	}
	return args
}

// blockSplitArgs appends the divisors with which the rank-6 kernels split their block index:
// the tiles along d5 (bx wide) and d4 (by tall), then d3, d2 and d1.
func blockSplitArgs(args []uint64, dims [movementRank]int64, bx, by int64) []uint64 {
	return fastDivArgs(args, cdiv(dims[5], bx), cdiv(dims[4], by), dims[3], dims[2], dims[1])
}

func cdiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
