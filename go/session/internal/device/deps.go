package device

import (
	"fmt"
	"slices"
	"sort"
)

// Access is how a command uses the bytes of a region: it only reads them, only writes them,
// or both. Dependencies between recorded commands are inferred from these declarations alone,
// so a kernel must not touch memory beyond what its bindings declare.
type Access uint8

const (
	// AccessRead: the command reads the region and leaves it unchanged.
	AccessRead Access = iota + 1
	// AccessWrite: the command writes the region (it may leave bytes unchanged, but never
	// depends on their earlier contents).
	AccessWrite
	// AccessReadWrite: the command reads the region and writes it.
	AccessReadWrite
)

// String names the access ("read", "write", "read_write"), as Loom's binding modes do.
func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	case AccessReadWrite:
		return "read_write"
	}
	return fmt.Sprintf("access(%d)", uint8(a))
}

func (a Access) valid() bool { return a >= AccessRead && a <= AccessReadWrite }

func AccessWrites(a Access) bool { return a == AccessWrite || a == AccessReadWrite }

// byteUse is one declared use of bytes [start, end) of an allocation by a command.
type byteUse struct {
	alloc      int // the allocation's index in its session
	start, end uint64
	access     Access
}

// segment is a maximal byte range of an allocation whose history is uniform: the same last
// writer and the same readers since that write.
type segment struct {
	start, end uint64
	writer     int   // the last command that wrote the range; -1: none recorded
	readers    []int // commands that read the range since writer, ascending, without repeats
}

// dependencyTracker infers the dependency edges of a command sequence from its declared byte
// uses. Per allocation it keeps the touched bytes as sorted, non-overlapping segments, split
// where uses begin and end and merged again when neighbours agree, so its cost follows the
// number of distinct use boundaries rather than the number of bytes.
//
// The rules, applied to every byte a use touches:
//   - a read follows the last writer of the byte;
//   - a write (or read_write) follows the last writer and every reader since it;
//   - a command never depends on itself; the uses of one command apply in declaration order.
//
// Bytes that no command shares produce no edge, even inside one allocation.
type dependencyTracker struct {
	allocs map[int][]segment
}

func newDependencyTracker() *dependencyTracker {
	return &dependencyTracker{allocs: make(map[int][]segment)}
}

// add records command op's uses, in declaration order, and returns the earlier commands op
// must wait for, ascending and without repeats. Commands must be added in increasing op order.
func (t *dependencyTracker) add(op int, uses []byteUse) []int {
	var deps []int
	for _, u := range uses {
		if u.end <= u.start {
			continue // an empty range shares no byte with anything
		}
		deps = t.apply(op, u, deps)
	}
	slices.Sort(deps)
	return slices.Compact(deps)
}

// apply applies one use to its allocation's segments, appending the edges it implies.
func (t *dependencyTracker) apply(op int, u byteUse, deps []int) []int {
	segs := t.allocs[u.alloc]
	segs = splitAt(segs, u.start)
	segs = splitAt(segs, u.end)
	// Cover the gaps inside [start, end) with fresh segments so every byte of the use has one.
	i := sort.Search(len(segs), func(i int) bool { return segs[i].end > u.start })
	pos := u.start
	for pos < u.end {
		if i < len(segs) && segs[i].start <= pos {
			pos = segs[i].end
			i++
			continue
		}
		gapEnd := u.end
		if i < len(segs) && segs[i].start < gapEnd {
			gapEnd = segs[i].start
		}
		segs = slices.Insert(segs, i, segment{start: pos, end: gapEnd, writer: -1})
		pos = gapEnd
		i++
	}
	first := sort.Search(len(segs), func(i int) bool { return segs[i].end > u.start })
	last := first
	for last < len(segs) && segs[last].start < u.end {
		s := &segs[last]
		if s.writer >= 0 && s.writer != op {
			deps = append(deps, s.writer)
		}
		if AccessWrites(u.access) {
			for _, r := range s.readers {
				if r != op {
					deps = append(deps, r)
				}
			}
			s.writer, s.readers = op, nil
		} else if n := len(s.readers); n == 0 || s.readers[n-1] != op {
			s.readers = append(s.readers, op) // no two segments share a readers array
		}
		last++
	}
	t.allocs[u.alloc] = mergeRange(segs, first, last)
	return deps
}

// splitAt splits the segment that strictly contains offset into two at offset.
func splitAt(segs []segment, offset uint64) []segment {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].end > offset })
	if i == len(segs) || segs[i].start >= offset {
		return segs
	}
	left, right := segs[i], segs[i]
	left.end, right.start = offset, offset
	// The halves share history; give each its own readers array so appends stay private.
	right.readers = slices.Clone(right.readers)
	segs[i] = left
	return slices.Insert(segs, i+1, right)
}

// mergeRange merges adjacent segments with identical history among segs[first-1 : last+1].
func mergeRange(segs []segment, first, last int) []segment {
	lo := max(first-1, 0)
	hi := min(last+1, len(segs))
	out := segs[:lo+1]
	for i := lo + 1; i < hi; i++ {
		prev := &out[len(out)-1]
		if prev.end == segs[i].start && prev.writer == segs[i].writer && slices.Equal(prev.readers, segs[i].readers) {
			prev.end = segs[i].end
			continue
		}
		out = append(out, segs[i])
	}
	return append(out, segs[hi:]...)
}

// segmentCount is the number of segments kept for an allocation (for tests).
func (t *dependencyTracker) segmentCount(alloc int) int { return len(t.allocs[alloc]) }

// inferDependencies returns, for each command, the earlier commands it must wait for.
func inferDependencies(commands [][]byteUse) [][]int {
	t := newDependencyTracker()
	deps := make([][]int, len(commands))
	for op, uses := range commands {
		deps[op] = t.add(op, uses)
	}
	return deps
}
