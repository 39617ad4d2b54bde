package plan

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Shared arenas. A compiled plan's instance records its segments over an arena of its own,
// but on the host a run of a plan whose arena is SharedArenaMin or larger runs on memory taken
// from the session's ArenaPool instead: every kernel binding of an arena slot is rebound to
// it for the run (native.RunBinding, as bound inputs and outputs are), and the host steps'
// views read it. The instance's own arena is then mapped address space that no run touches,
// so its pages are never made resident. Runs of different signatures, and a plan built for
// one run and dropped, reuse the same resident pages: a sweep over input shapes (a new width,
// a new batch, a KV cache one position longer) holds one arena's worth of memory per
// concurrent run, not one per signature, and a new signature's first run writes to pages
// faulted in already rather than fresh ones (page faults were most of what a first run cost
// beyond a warm one: one sweep of a small classifier over batches 1-64 took 119,621 of them,
// 13,063 on shared arenas; docs/performance.md).

// SharedArenaMin is the arena size from which a host plan's runs use the session's shared
// arenas. Under it the instance's own arena serves: rebinding every slot's bindings each run
// costs more there than the memory is worth (a small arena comes from malloc's free lists,
// resident and reused anyway).
const SharedArenaMin = 128 << 10

// sharedArenaMin is the threshold BuildTemplate applies (SetSharedArenaMin).
var sharedArenaMin atomic.Int64

func init() { sharedArenaMin.Store(SharedArenaMin) }

// SetSharedArenaMin makes plans built from now on use shared arenas from n bytes of arena (0:
// every host plan), and returns what restores the threshold before. For tests: the node suite
// runs with every plan on shared arenas.
func SetSharedArenaMin(n int64) (restore func()) {
	old := sharedArenaMin.Swap(n)
	return func() { sharedArenaMin.Store(old) }
}

// arenaGrowthDiv: a slab made for a request larger than the pool's size is made larger again
// by the old size over arenaGrowthDiv (a quarter), so that a sweep of growing shapes grows its
// slab a logarithmic number of times, at a quarter more memory at most.
const arenaGrowthDiv = 4

// ArenaPool hands the runs of a session's host plans arena memory: slabs mapped from the
// kernel, taken by a run and given back after it. Slabs are all made at the pool's current
// size, which only grows (to the largest arena asked for, or a quarter more than before): a slab
// given back smaller than that is unmapped, so the pool holds as many slabs as runs have
// overlapped, each of the largest size. The zero ArenaPool is ready; Close unmaps the idle
// slabs and makes the pool unmap the others when they come back.
type ArenaPool struct {
	mu     sync.Mutex
	free   [][]byte
	size   int
	closed bool
	// Counts (read them under no run): slabs mapped, grown in place, unmapped, and takes
	// served by an idle slab.
	Mapped, Grown, Unmapped, Reused int64
	// Live, LiveBytes: slabs mapped now (idle or in a run) and their bytes.
	Live      int
	LiveBytes int64
}

// Take returns a slab of at least n bytes for one run (give it back with Give). Its contents
// are whatever an earlier run left there.
func (p *ArenaPool) Take(n int64) ([]byte, error) {
	p.mu.Lock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; int64(len(b)) >= n {
			p.free = append(p.free[:i], p.free[i+1:]...)
			p.Reused++
			p.mu.Unlock()
			return b, nil
		}
	}
	var grow []byte
	if n > int64(p.size) {
		grown := int64(p.size) + int64(p.size)/arenaGrowthDiv
		p.size = int(roundUp(max(n, grown), 64<<10))
		// Idle slabs are smaller now: the largest grows to the new size (in place where the
		// kernel can: its resident pages stay, only the added part faults in), the others are
		// unmapped.
		for _, b := range p.free {
			if grow == nil || len(b) > len(grow) {
				grow, b = b, grow
			}
			if b != nil {
				p.unmapLocked(b)
			}
		}
		p.free = p.free[:0]
		if grow != nil {
			p.Live--
			p.LiveBytes -= int64(len(grow))
		}
	}
	size := p.size
	p.mu.Unlock()
	b, grew, err := mapSlab(grow, size)
	p.mu.Lock()
	defer p.mu.Unlock()
	if grow != nil && !grew {
		p.Unmapped++ // mapSlab unmapped it
	}
	if err != nil {
		return nil, tensor.NewError("Run", tensor.ErrDevice, "cannot map a %d-byte arena for the run: %v", size, err)
	}
	if grew {
		p.Grown++
	} else {
		p.Mapped++
	}
	p.Live++
	p.LiveBytes += int64(size)
	return b, nil
}

// Give hands back a slab Take returned, once the run that took it is over.
func (p *ArenaPool) Give(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(b) < p.size {
		p.unmapLocked(b)
		return
	}
	p.free = append(p.free, b)
}

// Close unmaps the idle slabs; the ones in runs are unmapped when given back.
func (p *ArenaPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, b := range p.free {
		p.unmapLocked(b)
	}
	p.free = nil
}

// Held is the slabs mapped now (idle or in a run) and their bytes.
func (p *ArenaPool) Held() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Live, p.LiveBytes
}

// Idle is the number of slabs waiting for a run.
func (p *ArenaPool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

func (p *ArenaPool) unmapLocked(b []byte) {
	// Munmap fails only for an address range that was never mapped: not one of ours.
	if err := unix.Munmap(b); err != nil {
		panic("plan: unmapping an arena slab: " + err.Error())
	}
	p.Unmapped++
	p.Live--
	p.LiveBytes -= int64(len(b))
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// RecordedArena is, on a shared arena (Template.SharedArena), the instance's own arena that
// its segments were recorded over and its runs never touch (nil otherwise): tests check that
// its pages stay out of memory.
func (inst *Instance) RecordedArena() []byte { return inst.recorded }

// mapSlab maps a slab of size bytes: old (when not nil) grown to it, in place or moved with
// its pages (grew), else a fresh mapping (old, if any, unmapped).
func mapSlab(old []byte, size int) (b []byte, grew bool, err error) {
	if old != nil {
		if b, err := remapSlab(old, size); err == nil {
			return b, true, nil
		}
		if err := unix.Munmap(old); err != nil {
			panic("plan: unmapping an arena slab: " + err.Error())
		}
	}
	b, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	return b, false, err
}
