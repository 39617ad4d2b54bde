package graph

import (
	"syscall"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
	"github.com/loomrt/loom/go/graph/internal/onnxpb"
)

// Decoding a mapped model file without holding it twice. proto.Unmarshal copies every
// raw_data field, so decoding a mapping of the file kept the file's pages and the copies of
// the weights resident together: a 652 MB model peaked at 1.29 GB. Instead the main graph's
// large raw_data fields are cut out of the encoding (a walk of the wire format), the rest is
// decoded, and each cut field is copied into an aligned buffer of its own, dropping its pages
// of the mapping as the copy goes (MADV_DONTNEED: file pages, read back from the file if
// ever touched again). Peak memory is then about the weights once.

// mappedRawMin is the size from which a raw_data field is copied out by hand.
const mappedRawMin = 64 << 10

// cutRaw is a raw_data field cut out of the encoding: the index of its initializer in the
// main graph and its bytes in the mapping.
type cutRaw struct {
	index int
	raw   []byte
}

// loadMapped decodes data as decodeBytes does, the large raw_data fields copied into the
// model's store; ok is false when the wire walk does not understand data (malformed, or a form
// it does not handle), and the caller decodes it the usual way, which reports any error. With
// mapped, data is a private read-only mapping of the model file and the pages of each copied
// field are dropped as the copy goes; without, data is the caller's and is only read.
func loadMapped(data []byte, opts LoadOptions, mapped bool) (_ *Model, ok bool, err error) {
	lim := opts.Limits.withDefaults()
	if int64(len(data)) > lim.MaxModelBytes {
		return nil, false, nil
	}
	stripped, cuts, ok := cutLargeRaw(data)
	if !ok || len(cuts) == 0 {
		return nil, false, nil
	}
	var mp onnxpb.ModelProto
	uo := proto.UnmarshalOptions{RecursionLimit: 16*lim.MaxNesting + 16}
	if err := uo.Unmarshal(stripped, &mp); err != nil {
		return nil, false, nil
	}
	inits := mp.GetGraph().GetInitializer()
	for _, c := range cuts {
		if c.index >= len(inits) || inits[c.index].RawData != nil {
			return nil, false, nil
		}
	}
	room, lens := make([]int, len(cuts)), make([]int, len(cuts))
	for i, c := range cuts {
		room[i], lens[i] = rawRoom(inits[c.index], len(c.raw)), len(c.raw)
	}
	// The copies go outside the Go heap (modelmem.Store), into the Go heap if that fails.
	var store *modelmem.Store
	if size := modelmem.Size(lens, room); size > 0 {
		store = modelmem.NewStore(size)
	}
	for i, c := range cuts {
		inits[c.index].RawData = copyOut(data, c.raw, room[i], store, mapped)
	}
	m, err := fromProto(&mp, opts, lim)
	if err != nil || m == nil || m.Graph == nil {
		_ = store.Release()
		return m, true, err
	}
	m.weights = store
	for i, c := range cuts {
		t := m.Graph.Initializers[inits[c.index].GetName()]
		if t == nil {
			continue
		}
		if store.Contains(t.Raw) {
			t.store = store
		}
		if room[i] > 0 && len(t.Raw) == len(c.raw) {
			t.setRoom(room[i])
		}
	}
	return m, true, nil
}

// rawRoomColumns: a 2-D float weight [k, n] copied out of a mapped model file, n no multiple
// of 16, gets room for k·(rawRoomColumns - 1) more elements behind it (Tensor.RawRoom), what a
// host provider needs to lay it out in place in column panels of up to rawRoomColumns columns,
// the last of which overlaps its neighbour (go/session's packed weights: a 768 x 50257
// vocabulary projection was otherwise packed into new memory, 154 MB more at the peak). The
// room is allocated, not touched: it costs no resident memory until used (unless the
// allocator hands out reused memory, which it zeroes). It is given only to weights whose bytes
// are all there (raw_data as long as the dims say: the dims of a hostile file must not size an
// allocation) of at least 4·rawRoomColumns columns, so that it is at most a quarter of the
// weight (0.25% of the vocabulary projection's), and not when n is a multiple of 16, where the
// AVX2 and NEON panels fit the weight (AVX-512's of 3 or 5 vectors may not: such a weight is
// packed into new memory, as before).
const rawRoomColumns = 128

// rawRoom is the room rawRoomColumns gives tp, whose raw_data is rawLen bytes.
func rawRoom(tp *onnxpb.TensorProto, rawLen int) int {
	d := tp.GetDims()
	if DataType(tp.GetDataType()) != Float || len(d) != 2 || d[0] < 1 || d[1] < 4*rawRoomColumns || d[1]%16 == 0 {
		return 0
	}
	// d[1] >= 512, so a d[0] that passes this check makes d[0]·d[1]·4 at most rawLen: no
	// overflow below.
	if d[0] > int64(rawLen)/4/d[1] || d[0]*d[1]*4 != int64(rawLen) {
		return 0
	}
	return int(d[0]) * (rawRoomColumns - 1) * 4
}

// cutLargeRaw returns the encoding of the ModelProto data without the raw_data fields of
// mappedRawMin bytes or more of its main graph's initializers, and those fields.
func cutLargeRaw(data []byte) ([]byte, []cutRaw, bool) {
	var out []byte
	var cuts []cutRaw
	graphs := 0
	ok := eachField(data, func(num protowire.Number, typ protowire.Type, field, value []byte) bool {
		if num != 7 || typ != protowire.BytesType { // ModelProto.graph
			out = append(out, field...)
			return true
		}
		// A second graph field is merged into the first by the decoder, which would shift the
		// initializers' indices: left to proto.
		if graphs++; graphs > 1 {
			return false
		}
		graph, ok := cutGraph(value, &cuts)
		if !ok {
			return false
		}
		out = protowire.AppendTag(out, num, typ)
		out = protowire.AppendBytes(out, graph)
		return true
	})
	return out, cuts, ok
}

// cutGraph is cutLargeRaw for a GraphProto: its initializers (field 5) without their large
// raw_data (TensorProto field 9).
func cutGraph(data []byte, cuts *[]cutRaw) ([]byte, bool) {
	var out []byte
	index := 0
	ok := eachField(data, func(num protowire.Number, typ protowire.Type, field, value []byte) bool {
		if num != 5 || typ != protowire.BytesType {
			out = append(out, field...)
			return true
		}
		var tensor []byte
		var raw []byte
		seen := 0
		ok := eachField(value, func(num protowire.Number, typ protowire.Type, field, value []byte) bool {
			if num == 9 && typ == protowire.BytesType {
				seen++
				if len(value) >= mappedRawMin {
					raw = value
					return true
				}
			}
			tensor = append(tensor, field...)
			return true
		})
		if !ok || seen > 1 {
			return false // several raw_data fields: the last one wins; left to proto
		}
		if raw != nil {
			*cuts = append(*cuts, cutRaw{index: index, raw: raw})
		}
		index++
		out = protowire.AppendTag(out, num, typ)
		out = protowire.AppendBytes(out, tensor)
		return true
	})
	return out, ok
}

// eachField calls f with each field of the encoded message data: its number and type, the
// whole field's bytes and, for a length-delimited field, its value. It is false when data is
// malformed or f is.
func eachField(data []byte, f func(num protowire.Number, typ protowire.Type, field, value []byte) bool) bool {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, data[n:])
		if m < 0 {
			return false
		}
		var value []byte
		if typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(data[n:])
			if k < 0 {
				return false
			}
			value = v
		}
		if !f(num, typ, data[:n+m], value) {
			return false
		}
		data = data[n+m:]
	}
	return true
}

// copyOutChunk is how much copyOut copies before it drops the pages copied.
const copyOutChunk = 8 << 20

// copyOut copies part, a slice of data, into store (the Go heap when store is nil or full),
// aligned for any element type; with drop (data is a mapping of the file) it drops the
// mapping's pages behind it as it goes. room more bytes follow it in the same allocation (the
// slice's capacity).
func copyOut(data, part []byte, room int, store *modelmem.Store, drop bool) []byte {
	var out []byte
	if store != nil {
		out = store.Take(len(part), room)
	}
	if out == nil {
		words := make([]uint64, (len(part)+room+7)/8)
		out = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)[: len(part) : len(part)+room]
	}
	for off := 0; off < len(part); off += copyOutChunk {
		end := min(off+copyOutChunk, len(part))
		copy(out[off:end], part[off:end])
		if drop {
			dropPages(data, part[off:end])
		}
	}
	return out
}

// dropPages gives back the whole pages of part, a slice of the mapping data, once copied
// (errors are ignored: the pages then stay until the mapping goes).
func dropPages(data, part []byte) {
	page := syscall.Getpagesize()
	start := int(uintptr(unsafe.Pointer(unsafe.SliceData(part))) - uintptr(unsafe.Pointer(unsafe.SliceData(data))))
	lo := (start + page - 1) / page * page
	hi := (start + len(part)) / page * page
	if lo < hi {
		_ = syscall.Madvise(data[lo:hi], syscall.MADV_DONTNEED)
	}
}
