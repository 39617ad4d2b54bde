package modelmem

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// Store: weights outside the Go heap. The loader copies a mapped model file's large initializers
// out of the mapping (loadMapped); in the Go heap those copies counted as live heap, and Go's
// collector lets the heap grow by as much as it holds live (GOGC=100) before it collects: a
// process holding a model's weights could reach about twice their size in garbage before its
// next collection (a d-512 decoder's 112 MB live heap, next goal 226 MB; GPT-2-small's 629 MB,
// 1,277 MB). So the copies go into one anonymous mapping per model, a Store, which the
// collector neither counts nor scans.
//
// Its lifetime: Model.Close releases it (as it releases the mappings of external data); so
// does the collector, once neither the Model nor any Tensor whose Raw lies in it is reachable
// (each such Tensor points to the store). A Raw slice kept on its own, without its Tensor or
// Model, does not keep the memory.

// Align is the alignment of each part of a Store (a cache line, the widest vector load).
const Align = 64

// Store is one anonymous mapping holding copied-out initializers. The mapping itself is its
// Memory, which the store's cleanup holds, so that the store can become unreachable.
type Store struct {
	blocks *Memory
}

// Memory is a Store's mapping.
type Memory struct {
	mu   sync.Mutex
	mem  []byte
	used int
}

// NewStore maps size bytes outside the Go heap; nil when the mapping fails (the caller then
// copies into the Go heap).
func NewStore(size int) *Store {
	if size <= 0 {
		return nil
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	s := &Store{blocks: &Memory{mem: mem}}
	runtime.AddCleanup(s, func(b *Memory) { b.release() }, s.blocks)
	return s
}

// Take carves n bytes (and room more as capacity) from the store, aligned to Align; nil when
// the store is released or too small.
func (s *Store) Take(n, room int) []byte {
	b := s.blocks
	b.mu.Lock()
	defer b.mu.Unlock()
	start := (b.used + Align - 1) / Align * Align
	if b.mem == nil || n < 0 || room < 0 || start > len(b.mem) || n+room > len(b.mem)-start {
		return nil
	}
	b.used = start + n + room
	return b.mem[start : start+n : start+n+room]
}

// Release unmaps the store's memory; later calls do nothing. Nil is a store with no memory.
func (s *Store) Release() error {
	if s == nil {
		return nil
	}
	return s.blocks.release()
}

// Memory is the store's mapping, for telling whether it is released without keeping the
// store reachable.
func (s *Store) Memory() *Memory { return s.blocks }

func (b *Memory) release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	err := syscall.Munmap(b.mem)
	b.mem = nil
	return err
}

// Released says whether the memory is unmapped.
func (b *Memory) Released() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem == nil
}

// Size is the bytes a Store needs for parts of the given lengths and rooms, each aligned to
// Align; -1 on overflow.
func Size(lens, rooms []int) int {
	total := 0
	for i, n := range lens {
		sz := n + rooms[i]
		if sz < 0 || total > int(^uint(0)>>1)-sz-Align {
			return -1
		}
		total = (total+Align-1)/Align*Align + sz
	}
	return total
}

// Contains says whether raw lies in s's memory (false for a nil or released store).
func (s *Store) Contains(raw []byte) bool {
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
