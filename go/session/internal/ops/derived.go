package ops

import (
	"sync"

	"github.com/loomrt/loom/go/session/internal/tensor"
)

// DerivedConsts holds the values planners derive from a constant operand (a weight packed
// into a kernel's layout), so that every plan of a session that reads the constant shares
// one derived copy, made once: a model whose input shapes vary still holds each packed
// weight once. A nil *DerivedConsts derives every time and keeps nothing. It is safe for
// concurrent use; Clear drops everything (a closed session keeps nothing).
type DerivedConsts struct {
	mu sync.Mutex
	m  map[derivedKey]derivedValue
}

// derivedKey names a derived value by its source's memory and the layout derived.
type derivedKey struct {
	first  *byte
	bytes  int
	layout string
}

type derivedValue struct {
	// src keeps the source alive while the derived value is cached: its memory cannot be
	// reused by another tensor that would then find this entry.
	src     tensor.Tensor
	derived tensor.Tensor
}

// Get returns the value derived from src in layout (a string that determines the derivation
// given src: the kernel's layout and its parameters), calling derive the first time.
//
// A src the session holds in that layout already (tensor.Relaid) is its own derived value;
// one held in another layout is derived from its unpacked elements each time, and not kept
// (its unpacked copy is new at every read, so no later call could find the entry).
func (d *DerivedConsts) Get(src tensor.Tensor, layout string, derive func() tensor.Tensor) tensor.Tensor {
	if r := tensor.RelaidOf(src); r != nil {
		if r.Layout == layout {
			return tensor.MustTensor([]int64{int64(len(r.Packed))}, r.Packed)
		}
		return derive()
	}
	raw, ok := RawBytes(src)
	if d == nil || !ok || len(raw) == 0 {
		return derive()
	}
	key := derivedKey{&raw[0], len(raw), layout}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.m[key]; ok {
		return v.derived
	}
	v := derive()
	if d.m == nil {
		d.m = map[derivedKey]derivedValue{}
	}
	d.m[key] = derivedValue{src: src, derived: v}
	return v
}

// Len is the number of derived values held.
func (d *DerivedConsts) Len() int {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.m)
}

// Clear drops every derived value.
func (d *DerivedConsts) Clear() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m = nil
}
