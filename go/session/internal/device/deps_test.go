package device

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/stretchr/testify/require"
)

func TestInferDependenciesReferenceCase(t *testing.T) {
	commands := [][]byteUse{
		{{alloc: 0, start: 0, end: 64, access: AccessWrite}},
		{{alloc: 0, start: 0, end: 32, access: AccessRead}},
		{{alloc: 0, start: 64, end: 96, access: AccessRead}},
		{{alloc: 0, start: 16, end: 80, access: AccessWrite}},
		{{alloc: 0, start: 24, end: 32, access: AccessRead}},
		{{alloc: 1, start: 0, end: 32, access: AccessWrite}},
	}
	want := [][]int{nil, {0}, nil, {0, 1, 2}, {3}, nil}
	got := inferDependencies(commands)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i], nilIfEmpty(got[i]), "edges of op%d", i)
	}
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestInferDependenciesRules(t *testing.T) {
	cases := []struct {
		name     string
		commands [][]byteUse
		want     [][]int
	}{
		{
			name: "read_write follows the last writer and the readers since",
			commands: [][]byteUse{
				{{0, 0, 8, AccessWrite}},
				{{0, 0, 8, AccessRead}},
				{{0, 4, 8, AccessRead}},
				{{0, 0, 8, AccessReadWrite}},
				{{0, 0, 8, AccessRead}},
			},
			want: [][]int{nil, {0}, {0}, {0, 1, 2}, {3}},
		},
		{
			name: "a write after a write is ordered, readers before it are dropped afterwards",
			commands: [][]byteUse{
				{{0, 0, 8, AccessRead}},
				{{0, 0, 8, AccessWrite}},
				{{0, 0, 8, AccessWrite}},
			},
			want: [][]int{nil, {0}, {1}},
		},
		{
			name: "reads of never-written bytes need nothing, and reads do not order reads",
			commands: [][]byteUse{
				{{0, 0, 8, AccessRead}},
				{{0, 0, 8, AccessRead}},
			},
			want: [][]int{nil, nil},
		},
		{
			name: "adjacent ranges are independent",
			commands: [][]byteUse{
				{{0, 0, 8, AccessWrite}},
				{{0, 8, 16, AccessWrite}},
				{{0, 8, 16, AccessRead}},
			},
			want: [][]int{nil, nil, {1}},
		},
		{
			name: "no self edges; bindings of one command apply in declaration order",
			commands: [][]byteUse{
				{{0, 0, 8, AccessWrite}},
				{{0, 0, 8, AccessRead}, {0, 0, 8, AccessWrite}, {0, 4, 8, AccessRead}},
				{{0, 4, 6, AccessRead}},
			},
			want: [][]int{nil, {0}, {1}},
		},
		{
			name: "a write declared before a read of the same bytes hides the earlier writer",
			commands: [][]byteUse{
				{{0, 0, 8, AccessWrite}},
				{{0, 0, 8, AccessWrite}, {0, 0, 8, AccessRead}},
			},
			want: [][]int{nil, {0}},
		},
		{
			name: "empty ranges touch nothing",
			commands: [][]byteUse{
				{{0, 0, 8, AccessWrite}},
				{{0, 4, 4, AccessRead}},
			},
			want: [][]int{nil, nil},
		},
		{
			name: "one use spanning several histories collects all of them",
			commands: [][]byteUse{
				{{0, 0, 4, AccessWrite}},
				{{0, 8, 12, AccessWrite}},
				{{0, 16, 20, AccessRead}},
				{{0, 0, 24, AccessWrite}},
			},
			want: [][]int{nil, nil, nil, {0, 1, 2}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := inferDependencies(tc.commands)
			for i := range tc.want {
				require.Equal(t, tc.want[i], nilIfEmpty(got[i]), "edges of op%d", i)
			}
		})
	}
}

// bruteForceDependencies is the rule applied byte by byte: the executable specification the
// segment tracker must agree with.
func bruteForceDependencies(commands [][]byteUse) [][]int {
	type history struct {
		writer  int
		readers []int
	}
	bytes := map[[2]uint64]*history{} // (alloc, offset)
	deps := make([][]int, len(commands))
	for op, uses := range commands {
		set := map[int]bool{}
		for _, u := range uses {
			for b := u.start; b < u.end; b++ {
				key := [2]uint64{uint64(u.alloc), b}
				h := bytes[key]
				if h == nil {
					h = &history{writer: -1}
					bytes[key] = h
				}
				if h.writer >= 0 && h.writer != op {
					set[h.writer] = true
				}
				if AccessWrites(u.access) {
					for _, r := range h.readers {
						if r != op {
							set[r] = true
						}
					}
					h.writer, h.readers = op, nil
				} else if !slices.Contains(h.readers, op) {
					h.readers = append(h.readers, op)
				}
			}
		}
		for d := range set {
			deps[op] = append(deps[op], d)
		}
		slices.Sort(deps[op])
	}
	return deps
}

func randomUses(r *rand.Rand, allocs int, size uint64, maxUses int) [][]byteUse {
	n := 1 + r.IntN(40)
	commands := make([][]byteUse, n)
	for op := range commands {
		k := 1 + r.IntN(maxUses)
		for range k {
			start := r.Uint64N(size)
			end := start + r.Uint64N(size-start+1)
			commands[op] = append(commands[op], byteUse{
				alloc:  r.IntN(allocs),
				start:  start,
				end:    end,
				access: Access(1 + r.IntN(3)),
			})
		}
	}
	return commands
}

func TestInferDependenciesMatchesPerByteRule(t *testing.T) {
	r := sessiontest.NewRand(t)
	for c := range 3000 {
		commands := randomUses(r, 1+r.IntN(3), 1+r.Uint64N(48), 4)
		want := bruteForceDependencies(commands)
		got := inferDependencies(commands)
		for op := range commands {
			require.Equal(t, nilIfEmpty(want[op]), nilIfEmpty(got[op]), "case %d op %d: %v", c, op, commands)
		}
	}
}

func TestDependencyTrackerSegmentsStayBounded(t *testing.T) {
	// Rewriting a whole allocation after scattered uses merges its history into one segment.
	tr := newDependencyTracker()
	op := 0
	for start := uint64(0); start < 1<<20; start += 4096 {
		tr.add(op, []byteUse{{alloc: 0, start: start, end: start + 64, access: AccessRead}})
		op++
	}
	require.Greater(t, tr.segmentCount(0), 200)
	deps := tr.add(op, []byteUse{{alloc: 0, start: 0, end: 1 << 20, access: AccessWrite}})
	require.Len(t, deps, op, "the write follows every reader")
	require.Equal(t, 1, tr.segmentCount(0))
}

func TestAccessString(t *testing.T) {
	require.Equal(t, "read", AccessRead.String())
	require.Equal(t, "write", AccessWrite.String())
	require.Equal(t, "read_write", AccessReadWrite.String())
	require.Equal(t, "access(9)", Access(9).String())
	require.False(t, Access(0).valid())
	require.True(t, AccessReadWrite.valid())
}
