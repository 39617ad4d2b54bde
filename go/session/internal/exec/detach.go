package exec

import (
	"slices"
	"unsafe"

	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Outputs that alias memory the session keeps (its weights, the initializers of cached
// subgraph bodies) or the caller's inputs are copied before Run returns them: the interpreter
// passes tensors through Identity, Reshape and the like without copying, so a graph output
// could otherwise be a weight itself, and a caller writing into it (or recycling it) would
// change the model for every later run.

// MemRange is the memory [lo, hi) of a tensor's elements.
type MemRange struct{ lo, hi uintptr }

// DataRange is t's element memory; false for a tensor without elements or a sequence.
func DataRange(t tensor.Tensor) (MemRange, bool) {
	if tensor.Box(t) != nil {
		return MemRange{}, false
	}
	if r := tensor.RelaidOf(t); r != nil { // its packed elements (RawBytes would unpack a copy)
		p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Packed)))
		return MemRange{p, p + uintptr(len(r.Packed))*4}, len(r.Packed) > 0
	}
	if s, ok := t.Data().([]string); ok {
		if len(s) == 0 {
			return MemRange{}, false
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
		return MemRange{p, p + uintptr(len(s))*unsafe.Sizeof(s[0])}, true
	}
	raw, ok := ops.RawBytes(t)
	if !ok || len(raw) == 0 {
		return MemRange{}, false
	}
	p := uintptr(unsafe.Pointer(&raw[0]))
	return MemRange{p, p + uintptr(len(raw))}, true
}

// Overlaps reports whether r and o share a byte.
func (r MemRange) Overlaps(o MemRange) bool { return r.lo < o.hi && o.lo < r.hi }

// HeldRanges is a set of memory ranges (they may overlap or nest), asked whether any of them
// overlaps a range. Only interpreted runs ask, once per output, so a scan does.
type HeldRanges []MemRange

// NewHeldRanges is the memory of ts's elements.
func NewHeldRanges(ts map[string]tensor.Tensor) HeldRanges {
	var h HeldRanges
	for _, t := range ts {
		if r, ok := DataRange(t); ok {
			h = append(h, r)
		}
	}
	return h
}

// Overlaps reports whether any range of h overlaps r.
func (h HeldRanges) Overlaps(r MemRange) bool {
	return slices.ContainsFunc(h, r.Overlaps)
}

// detachOutputs copies the outputs of an interpreted run that alias the session's kept
// memory or fed's inputs (see above); a sequence or optional holding such a tensor comes
// back as a new one holding a copy.
func (e *Engine) detachOutputs(outs []tensor.Tensor, fed map[string]tensor.Tensor) ([]tensor.Tensor, error) {
	for i, o := range outs {
		d, _, err := e.detach(o, fed)
		if err != nil {
			return nil, err
		}
		outs[i] = d
	}
	return outs, nil
}

// detach is t, or a copy of it when it aliases (changed then says so).
func (e *Engine) detach(t tensor.Tensor, fed map[string]tensor.Tensor) (_ tensor.Tensor, changed bool, _ error) {
	if tensor.Box(t) != nil {
		var elems []tensor.Tensor // copied on the first element that changes
		for j, el := range tensor.SeqElems(t) {
			d, ch, err := e.detach(el, fed)
			if err != nil {
				return tensor.Tensor{}, false, err
			}
			if ch && elems == nil {
				elems = slices.Clone(tensor.SeqElems(t))
			}
			if elems != nil {
				elems[j] = d
			}
		}
		if elems == nil {
			return t, false, nil
		}
		return tensor.WithElems(t, elems), true, nil
	}
	r, ok := DataRange(t)
	if !ok || !e.aliases(r, fed) {
		return t, false, nil
	}
	c, err := tensor.CopyOut(t)
	return c, err == nil, err
}

// aliases reports whether r overlaps the session's kept memory or an input of fed (or an
// element of a sequence fed).
func (e *Engine) aliases(r MemRange, fed map[string]tensor.Tensor) bool {
	if e.Held.Overlaps(r) || e.Bodies.holds(r) {
		return true
	}
	for _, in := range fed {
		ins := []tensor.Tensor{in}
		if tensor.Box(in) != nil {
			ins = tensor.SeqElems(in)
		}
		for _, t := range ins {
			if ir, ok := DataRange(t); ok && ir.Overlaps(r) {
				return true
			}
		}
	}
	return false
}
