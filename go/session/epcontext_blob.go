package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/loomrt/loom/go/loom"
)

// The EP context blob ("context blob") is what an EPContext node of source "loom" carries in
// ep_cache_context (or in the file it names): everything a later session needs to start
// without optimizing or compiling. docs/epcontext.md specifies the format; in short, all
// integers little-endian:
//
//	header (48 bytes): magic "LOOMEPC\x00", u32 format version (1), u32 flags (0),
//	                   SHA-256 of every byte after the header
//	sections to the end, each: u32 tag, u64 length, length bytes
//	  tag 1 META   (exactly one, first): JSON epContextMeta
//	  tag 2 GRAPH  (exactly one): the optimized graph the session runs, an ONNX ModelProto
//	  tag 3 KERNEL (META.kernels of them): u32 n, n bytes of JSON epContextKernelRecord, then
//	               the module image: the shared object (host targets) or CUDA C source (sm_XX)
//
// The decoder checks every length against the bytes that remain before it slices, so corrupt
// or hostile bytes give an error, never a panic or an allocation they ask for.

// epContextMagic opens every context blob.
const epContextMagic = "LOOMEPC\x00"

// epContextFormatVersion is the blob format this package writes and the only one it reads.
const epContextFormatVersion = 1

const (
	epContextHeaderBytes  = 8 + 4 + 4 + sha256.Size
	epContextSectionBytes = 4 + 8
	// epContextMaxKernels bounds the kernel sections; a session uses a few dozen kernels.
	epContextMaxKernels = 1 << 16
)

// The section tags.
const (
	epSectionMeta   uint32 = 1
	epSectionGraph  uint32 = 2
	epSectionKernel uint32 = 3
)

// epContextFormatName is META's "format" field.
const epContextFormatName = "loom-epcontext"

// epContextMeta says what the blob was made for and by.
type epContextMeta struct {
	Format          string `json:"format"`           // epContextFormatName
	CompilerVersion string `json:"compiler_version"` // loom.CompilerVersion of the writer
	Target          string `json:"target"`           // the device target the kernels run on
	Backend         string `json:"backend"`          // "host" or "cuda"
	PartitionName   string `json:"partition_name"`   // the EPContext node's partition_name
	Kernels         int    `json:"kernels"`          // KERNEL sections that follow
	SourceModel     string `json:"source_model,omitempty"`
}

// epContextKernelRecord describes one compiled kernel: the request it answers (the session's
// kernel cache key is derived from File, Symbol and Config), the digest of the op library
// source it was compiled from, and Loom's artifact minus its code (IR, and Source on host
// targets, are left out: the module image follows the record).
type epContextKernelRecord struct {
	File         string            `json:"file"`
	Symbol       string            `json:"symbol"`
	Config       map[string]string `json:"config,omitempty"`
	SourceSHA256 string            `json:"source_sha256"`
	Artifact     *loom.Artifact    `json:"artifact"`
}

// epContextKernel is a kernel record with its module image.
type epContextKernel struct {
	epContextKernelRecord
	Image []byte
}

// epContextBlob is a decoded context blob.
type epContextBlob struct {
	Meta    epContextMeta
	Graph   []byte
	Kernels []epContextKernel
}

// encodeEPContextBlob serializes b; Meta.Kernels is set from len(b.Kernels).
func encodeEPContextBlob(b *epContextBlob) ([]byte, error) {
	meta := b.Meta
	meta.Format = epContextFormatName
	meta.Kernels = len(b.Kernels)
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	section := func(tag uint32, parts ...[]byte) {
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		var hdr [epContextSectionBytes]byte
		binary.LittleEndian.PutUint32(hdr[0:], tag)
		binary.LittleEndian.PutUint64(hdr[4:], uint64(n))
		body.Write(hdr[:])
		for _, p := range parts {
			body.Write(p)
		}
	}
	section(epSectionMeta, metaJSON)
	section(epSectionGraph, b.Graph)
	for _, k := range b.Kernels {
		rec, err := json.Marshal(k.epContextKernelRecord)
		if err != nil {
			return nil, fmt.Errorf("kernel %s of %s: %w", k.Symbol, k.File, err)
		}
		if uint64(len(rec)) > math.MaxUint32 {
			return nil, fmt.Errorf("kernel %s of %s: record of %d bytes", k.Symbol, k.File, len(rec))
		}
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(rec)))
		section(epSectionKernel, n[:], rec, k.Image)
	}
	out := make([]byte, epContextHeaderBytes, epContextHeaderBytes+body.Len())
	copy(out, epContextMagic)
	binary.LittleEndian.PutUint32(out[8:], epContextFormatVersion)
	binary.LittleEndian.PutUint32(out[12:], 0)
	sum := sha256.Sum256(body.Bytes())
	copy(out[16:], sum[:])
	return append(out, body.Bytes()...), nil
}

// decodeEPContextBlob parses and validates a context blob. The result's Graph and Images alias
// data. Errors say what is wrong and where.
func decodeEPContextBlob(data []byte) (*epContextBlob, error) {
	if len(data) < epContextHeaderBytes {
		return nil, fmt.Errorf("%d bytes, shorter than the %d byte header", len(data), epContextHeaderBytes)
	}
	if string(data[:8]) != epContextMagic {
		return nil, fmt.Errorf("bad magic %q (want %q): not a Loom EP context blob", data[:8], epContextMagic)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != epContextFormatVersion {
		return nil, fmt.Errorf("format version %d, this Loom reads version %d", v, epContextFormatVersion)
	}
	if f := binary.LittleEndian.Uint32(data[12:]); f != 0 {
		return nil, fmt.Errorf("unknown flags %#x", f)
	}
	body := data[epContextHeaderBytes:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[16:16+sha256.Size]) {
		return nil, fmt.Errorf("checksum mismatch: the blob is corrupt (SHA-256 of its %d body bytes is %x, the header says %x)",
			len(body), sum[:], data[16:16+sha256.Size])
	}
	out := &epContextBlob{}
	seenMeta, seenGraph := false, false
	keys := map[string]bool{}
	for off := 0; off < len(body); {
		if len(body)-off < epContextSectionBytes {
			return nil, fmt.Errorf("section at byte %d: %d bytes left, a section header needs %d", epContextHeaderBytes+off, len(body)-off, epContextSectionBytes)
		}
		tag := binary.LittleEndian.Uint32(body[off:])
		n := binary.LittleEndian.Uint64(body[off+4:])
		start := off + epContextSectionBytes
		if n > uint64(len(body)-start) {
			return nil, fmt.Errorf("section at byte %d (tag %d): length %d exceeds the %d bytes left", epContextHeaderBytes+off, tag, n, len(body)-start)
		}
		sec := body[start : start+int(n)]
		where := fmt.Sprintf("section at byte %d", epContextHeaderBytes+off)
		off = start + int(n)
		if !seenMeta && tag != epSectionMeta {
			return nil, fmt.Errorf("%s: tag %d before the META section (tag %d), which must come first", where, tag, epSectionMeta)
		}
		switch tag {
		case epSectionMeta:
			if seenMeta {
				return nil, fmt.Errorf("%s: a second META section", where)
			}
			seenMeta = true
			if err := json.Unmarshal(sec, &out.Meta); err != nil {
				return nil, fmt.Errorf("%s: META: %w", where, err)
			}
			if err := out.Meta.check(); err != nil {
				return nil, fmt.Errorf("%s: META: %w", where, err)
			}
		case epSectionGraph:
			if seenGraph {
				return nil, fmt.Errorf("%s: a second GRAPH section", where)
			}
			seenGraph = true
			if len(sec) == 0 {
				return nil, fmt.Errorf("%s: empty GRAPH section", where)
			}
			out.Graph = sec
		case epSectionKernel:
			if len(out.Kernels) >= out.Meta.Kernels {
				return nil, fmt.Errorf("%s: more KERNEL sections than the %d META announces", where, out.Meta.Kernels)
			}
			k, err := decodeEPContextKernel(sec, out.Meta)
			if err != nil {
				return nil, fmt.Errorf("%s: KERNEL %d: %w", where, len(out.Kernels), err)
			}
			key := kernelCacheKey(k.File, k.Symbol, k.Config)
			if keys[key] {
				return nil, fmt.Errorf("%s: KERNEL %d: kernel %s of %s with this configuration appears twice", where, len(out.Kernels), k.Symbol, k.File)
			}
			keys[key] = true
			out.Kernels = append(out.Kernels, k)
		default:
			return nil, fmt.Errorf("%s: unknown section tag %d", where, tag)
		}
	}
	switch {
	case !seenMeta:
		return nil, fmt.Errorf("no META section")
	case !seenGraph:
		return nil, fmt.Errorf("no GRAPH section")
	case len(out.Kernels) != out.Meta.Kernels:
		return nil, fmt.Errorf("%d KERNEL sections, META announces %d", len(out.Kernels), out.Meta.Kernels)
	}
	return out, nil
}

// check validates META's fields (not whether they suit this session: see installEPContext).
func (m epContextMeta) check() error {
	switch {
	case m.Format != epContextFormatName:
		return fmt.Errorf("format %q, want %q", m.Format, epContextFormatName)
	case m.CompilerVersion == "":
		return fmt.Errorf("no compiler_version")
	case m.Target == "":
		return fmt.Errorf("no target")
	case m.Backend != string(ProviderHost) && m.Backend != string(ProviderCUDA):
		return fmt.Errorf("backend %q, want host or cuda", m.Backend)
	case m.Kernels < 0 || m.Kernels > epContextMaxKernels:
		return fmt.Errorf("kernel count %d out of range [0, %d]", m.Kernels, epContextMaxKernels)
	}
	return nil
}

// decodeEPContextKernel parses a KERNEL section's body.
func decodeEPContextKernel(sec []byte, meta epContextMeta) (epContextKernel, error) {
	var k epContextKernel
	if len(sec) < 4 {
		return k, fmt.Errorf("%d bytes, the record length alone needs 4", len(sec))
	}
	n := binary.LittleEndian.Uint32(sec)
	if uint64(n) > uint64(len(sec)-4) {
		return k, fmt.Errorf("record length %d exceeds the %d bytes left", n, len(sec)-4)
	}
	if err := json.Unmarshal(sec[4:4+n], &k.epContextKernelRecord); err != nil {
		return k, fmt.Errorf("record: %w", err)
	}
	k.Image = sec[4+n:]
	a := k.Artifact
	switch {
	case k.File == "" || k.Symbol == "":
		return k, fmt.Errorf("record names no file or symbol")
	case !isHexDigest(k.SourceSHA256):
		return k, fmt.Errorf("kernel %s of %s: source_sha256 %q is not a hex SHA-256", k.Symbol, k.File, k.SourceSHA256)
	case a == nil:
		return k, fmt.Errorf("kernel %s of %s: no artifact", k.Symbol, k.File)
	case a.Target != meta.Target:
		return k, fmt.Errorf("kernel %s of %s: compiled for %s, the blob is for %s", k.Symbol, k.File, a.Target, meta.Target)
	case a.Entry == "" || a.Kernel == "":
		return k, fmt.Errorf("kernel %s of %s: the artifact names no kernel or entry", k.Symbol, k.File)
	case !isHexDigest(a.Key):
		return k, fmt.Errorf("kernel %s of %s: artifact key %q is not a hex SHA-256", k.Symbol, k.File, a.Key)
	case a.Launch == nil:
		return k, fmt.Errorf("kernel %s of %s: the artifact has no launch program", k.Symbol, k.File)
	case len(k.Image) == 0:
		return k, fmt.Errorf("kernel %s of %s: empty module image", k.Symbol, k.File)
	}
	if meta.Backend == string(ProviderHost) {
		if sum := sha256.Sum256(k.Image); hex.EncodeToString(sum[:]) != a.SOSHA256 {
			return k, fmt.Errorf("kernel %s of %s: the shared object's SHA-256 is %x, the artifact says %q", k.Symbol, k.File, sum[:], a.SOSHA256)
		}
	}
	return k, nil
}

// isHexDigest reports whether s is a lower-case hex SHA-256.
func isHexDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// sortEPContextKernels orders kernels by cache key, so the same session writes the same blob.
func sortEPContextKernels(ks []epContextKernel) {
	sort.Slice(ks, func(i, j int) bool {
		return kernelCacheKey(ks[i].File, ks[i].Symbol, ks[i].Config) < kernelCacheKey(ks[j].File, ks[j].Symbol, ks[j].Config)
	})
}
