package graph

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// Weights outside the Go heap. The loader copies a mapped model file's large initializers
// out of the mapping (loadMapped); in the Go heap those copies counted as live heap, and Go's
// collector lets the heap grow by as much as it holds live (GOGC=100) before it collects: a
// process holding a model's weights could reach about twice their size in garbage before its
// next collection (a d-512 decoder's 112 MB live heap, next goal 226 MB; GPT-2-small's 629 MB,
// 1,277 MB). So the copies go into one anonymous mapping per model, a weightStore, which the
// collector neither counts nor scans.
//
// Its lifetime: Model.Close releases it (as it releases the mappings of external data); so
// does the collector, once neither the Model nor any Tensor whose Raw lies in it is reachable
// (each such Tensor points to the store). A Raw slice kept on its own, without its Tensor or
// Model, does not keep the memory.

// weightAlign is the alignment of each tensor in a weightStore (a cache line, the widest
// vector load).
const weightAlign = 64

// weightStore is one anonymous mapping holding copied-out initializers. The mapping itself is
// in blocks, which the store's cleanup holds, so that the store can become unreachable.
type weightStore struct {
	blocks *weightBlocks
}

type weightBlocks struct {
	mu   sync.Mutex
	mem  []byte
	used int
}

// newWeightStore maps size bytes outside the Go heap; nil when the mapping fails (the caller
// then copies into the Go heap).
func newWeightStore(size int) *weightStore {
	if size <= 0 {
		return nil
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	s := &weightStore{blocks: &weightBlocks{mem: mem}}
	runtime.AddCleanup(s, func(b *weightBlocks) { b.release() }, s.blocks)
	return s
}

// take carves n bytes (and room more as capacity) from the store, aligned to weightAlign; nil
// when the store is released or too small.
func (s *weightStore) take(n, room int) []byte {
	b := s.blocks
	b.mu.Lock()
	defer b.mu.Unlock()
	start := (b.used + weightAlign - 1) / weightAlign * weightAlign
	if b.mem == nil || n < 0 || room < 0 || start > len(b.mem) || n+room > len(b.mem)-start {
		return nil
	}
	b.used = start + n + room
	return b.mem[start : start+n : start+n+room]
}

// release unmaps the store's memory; later calls do nothing.
func (s *weightStore) release() error {
	if s == nil {
		return nil
	}
	return s.blocks.release()
}

func (b *weightBlocks) release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	err := syscall.Munmap(b.mem)
	b.mem = nil
	return err
}

// released says whether the memory is unmapped.
func (b *weightBlocks) released() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem == nil
}

// weightStoreSize is the bytes a store needs for parts of the given lengths and rooms, each
// aligned to weightAlign; -1 on overflow.
func weightStoreSize(lens, rooms []int) int {
	total := 0
	for i, n := range lens {
		sz := n + rooms[i]
		if sz < 0 || total > int(^uint(0)>>1)-sz-weightAlign {
			return -1
		}
		total = (total+weightAlign-1)/weightAlign*weightAlign + sz
	}
	return total
}

// inStore says whether raw lies in s's memory.
func (s *weightStore) inStore(raw []byte) bool {
	if s == nil || len(raw) == 0 {
		return false
	}
	b := s.blocks
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(raw))), uintptr(unsafe.Pointer(unsafe.SliceData(b.mem)))
	return p >= lo && p < lo+uintptr(len(b.mem))
}
