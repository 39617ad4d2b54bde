package session

import (
	"encoding/binary"
	"math"
	"runtime"
	"unsafe"

	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
)

// relayWeights replaces, in the session's weights, each weight that only the host's matrix
// products read (as B) by the same weight packed into the gemm kernel's column panels, the
// layout the compiled plans and the interpreter's kernels read it in (see OptionPackWeights):
// the session then holds such a weight once, packed, where it held the weight as stored and a
// packed copy. Its elements stay readable as stored (tensor.Relaid unpacks a copy for the
// rare reader that wants them so); a model the session owns has these initializers' bytes
// dropped and given back, unpacked, by Graph.
//
// A weight is relaid when packing is on, the plans target the host, and every node reading
// it is a MatMul, Loom's MatMulAdd or a Gemm that reads it as B and that the provider runs as
// kernels, all of them in one orientation (Gemm's transB reads it transposed); never when it is a graph input (a feed may replace it), a graph
// output, or read from inside a subgraph.
func (s *InferenceSession) relayWeights() {
	if !s.pe.KeepDerived || s.eng.PlanTarget() != ops.PlanHost {
		return
	}
	g := s.eng.Model.Graph
	names, transposed := s.eng.PackOnlyWeights()
	if len(names) == 0 {
		return
	}
	// The initializers' bytes, to tell whether a weight's elements are its own (a weight the
	// session views in its model's bytes, or a copy) and may be packed in place.
	type span struct{ lo, hi uintptr }
	var spans []span
	for _, gt := range g.Initializers {
		if len(gt.Raw) > 0 {
			lo := uintptr(unsafe.Pointer(unsafe.SliceData(gt.Raw)))
			spans = append(spans, span{lo, lo + uintptr(len(gt.Raw))})
		}
	}
	var r kernelops.Relayer
	sinceGC, changed := int64(0), false // bytes relaid since the last collection; any relaid
	for _, name := range names {
		w := s.eng.Weights[name]
		raw, ok := ops.RawBytes(w)
		if !ok || len(raw) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
		own := span{lo, lo + uintptr(len(raw))}
		overlaps := 0
		for _, sp := range spans {
			if sp.lo < own.hi && own.lo < sp.hi {
				overlaps++
			}
		}
		gt := g.Initializers[name]
		mine := len(gt.Raw) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(gt.Raw))) == lo
		// In place only when no other initializer's bytes share the weight's memory (its own
		// initializer's do when the session views them, and are dropped below).
		inPlace := overlaps == 0 || (overlaps == 1 && mine && s.ownModel)
		// The weight's own bytes may continue into room its loader left behind them
		// (graph.Tensor.RawRoom), which the panels may take when they outgrow the weight.
		var room []float32
		if inPlace && mine {
			if rb := gt.RawRoom(); len(rb) > len(raw) && len(rb)%4 == 0 {
				room = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(rb))), len(rb)/4)
			}
		}
		t, ok := r.RelayWithRoom(w, room, inPlace, transposed[name])
		if !ok {
			continue
		}
		s.eng.Weights[name], changed = t, true
		if s.ownModel {
			gt.Raw = nil // given back by Graph (restoreWeights)
			s.relaid = append(s.relaid, name)
		}
		// The weights as stored that were not packed in place become garbage as they are
		// relaid: collect them every so often, so that the session's peak memory holds a few
		// of them at once, not all.
		if sinceGC += int64(len(raw)); sinceGC >= relayCollectBytes {
			runtime.GC()
			sinceGC = 0
		}
	}
	// The last of them, and the packing's scratch, go before the first run allocates (which
	// then reuses their memory rather than growing the heap). Measured against no collection
	// at all (`loom bench`, peak RSS): the d-512 decoder 183 -> 171 MB, BERT-base 569 -> 563,
	// GPT-2 718 -> 711, for 30-70 ms more load time.
	r = kernelops.Relayer{}
	if changed {
		runtime.GC()
	}
	s.eng.Held = exec.NewHeldRanges(s.eng.Weights)
}

// relayCollectBytes is how many bytes of weights relayWeights relays between collections.
const relayCollectBytes = 64 << 20

// restoreWeights gives the model's relaid initializers their bytes back (unpacked), once and
// for good, for a caller of Graph.
func (s *InferenceSession) restoreWeights() {
	s.restoreOnce.Do(func() { s.fillRelaid() })
}

// fillRelaid gives the model's relaid initializers that lack their bytes the bytes (unpacked),
// and returns their names.
func (s *InferenceSession) fillRelaid() []string {
	var filled []string
	g := s.eng.Model.Graph
	for _, name := range s.relaid {
		gt, w := g.Initializers[name], s.eng.Weights[name]
		if gt == nil || gt.Raw != nil {
			continue
		}
		if v, ok := w.Data().([]float32); ok {
			raw := make([]byte, 4*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
			}
			gt.Raw = raw
			filled = append(filled, name)
		}
	}
	return filled
}
