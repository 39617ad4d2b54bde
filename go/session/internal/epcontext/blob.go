// Package epcontext is the EP context blob of Loom's EP context models (docs/epcontext.md):
// its types, its encoder and its decoder (which checks every length and digest, so corrupt or
// hostile bytes give an error), and the file helpers the session uses to write a context model
// and find the blob file it names. The session (go/session) decides what goes into a blob and
// installs what comes out of one.
package epcontext

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
	"github.com/loomrt/loom/go/session/internal/ep"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// The EP context blob ("context blob") is what an EPContext node of source "loom" carries in
// ep_cache_context (or in the file it names): everything a later session needs to start
// without optimizing or compiling. docs/epcontext.md specifies the format; in short, all
// integers little-endian:
//
//	header (48 bytes): magic "LOOMEPC\x00", u32 format version (1), u32 flags (0),
//	                   SHA-256 of every byte after the header
//	sections to the end, each: u32 tag, u64 length, length bytes
//	  tag 1 META   (exactly one, first): JSON Meta
//	  tag 2 GRAPH  (exactly one): the optimized graph the session runs, an ONNX ModelProto
//	  tag 3 KERNEL (META.kernels of them): u32 n, n bytes of JSON KernelRecord, then
//	               the module image: the shared object (host targets) or CUDA C source (sm_XX)
//
// The decoder checks every length against the bytes that remain before it slices, so corrupt
// or hostile bytes give an error, never a panic or an allocation they ask for.

// Magic opens every context blob.
const Magic = "LOOMEPC\x00"

// FormatVersion is the blob format this package writes and the only one it reads.
const FormatVersion = 1

const (
	HeaderBytes  = 8 + 4 + 4 + sha256.Size
	sectionBytes = 4 + 8
	// maxKernels bounds the kernel sections; a session uses a few dozen kernels.
	maxKernels = 1 << 16
)

// The section tags.
const (
	sectionMeta   uint32 = 1
	sectionGraph  uint32 = 2
	sectionKernel uint32 = 3
)

// FormatName is META's "format" field.
const FormatName = "loom-epcontext"

// Meta says what the blob was made for and by.
type Meta struct {
	Format          string `json:"format"`           // FormatName
	CompilerVersion string `json:"compiler_version"` // loom.CompilerVersion of the writer
	Target          string `json:"target"`           // the device target the kernels run on
	Backend         string `json:"backend"`          // "host" or "cuda"
	PartitionName   string `json:"partition_name"`   // the EPContext node's partition_name
	Kernels         int    `json:"kernels"`          // KERNEL sections that follow
	SourceModel     string `json:"source_model,omitempty"`
}

// KernelRecord describes one compiled kernel: the request it answers (the session's
// kernel cache key is derived from File, Symbol and Config), the digest of the op library
// source it was compiled from, and Loom's artifact minus its code (IR, and Source on host
// targets, are left out: the module image follows the record).
type KernelRecord struct {
	File         string            `json:"file"`
	Symbol       string            `json:"symbol"`
	Config       map[string]string `json:"config,omitempty"`
	SourceSHA256 string            `json:"source_sha256"`
	Artifact     *loom.Artifact    `json:"artifact"`
}

// Kernel is a kernel record with its module image.
type Kernel struct {
	KernelRecord
	Image []byte
}

// Blob is a decoded context blob.
type Blob struct {
	Meta    Meta
	Graph   []byte
	Kernels []Kernel
}

// Encode serializes b; Meta.Kernels is set from len(b.Kernels).
func Encode(b *Blob) ([]byte, error) {
	meta := b.Meta
	meta.Format = FormatName
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
		var hdr [sectionBytes]byte
		binary.LittleEndian.PutUint32(hdr[0:], tag)
		binary.LittleEndian.PutUint64(hdr[4:], uint64(n))
		body.Write(hdr[:])
		for _, p := range parts {
			body.Write(p)
		}
	}
	section(sectionMeta, metaJSON)
	section(sectionGraph, b.Graph)
	for _, k := range b.Kernels {
		rec, err := json.Marshal(k.KernelRecord)
		if err != nil {
			return nil, fmt.Errorf("kernel %s of %s: %w", k.Symbol, k.File, err)
		}
		if uint64(len(rec)) > math.MaxUint32 {
			return nil, fmt.Errorf("kernel %s of %s: record of %d bytes", k.Symbol, k.File, len(rec))
		}
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(rec)))
		section(sectionKernel, n[:], rec, k.Image)
	}
	out := make([]byte, HeaderBytes, HeaderBytes+body.Len())
	copy(out, Magic)
	binary.LittleEndian.PutUint32(out[8:], FormatVersion)
	binary.LittleEndian.PutUint32(out[12:], 0)
	sum := sha256.Sum256(body.Bytes())
	copy(out[16:], sum[:])
	return append(out, body.Bytes()...), nil
}

// Decode parses and validates a context blob. The result's Graph and Images alias
// data. Errors say what is wrong and where.
func Decode(data []byte) (*Blob, error) {
	if len(data) < HeaderBytes {
		return nil, fmt.Errorf("%d bytes, shorter than the %d byte header", len(data), HeaderBytes)
	}
	if string(data[:8]) != Magic {
		return nil, fmt.Errorf("bad magic %q (want %q): not a Loom EP context blob", data[:8], Magic)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != FormatVersion {
		return nil, fmt.Errorf("format version %d, this Loom reads version %d", v, FormatVersion)
	}
	if f := binary.LittleEndian.Uint32(data[12:]); f != 0 {
		return nil, fmt.Errorf("unknown flags %#x", f)
	}
	body := data[HeaderBytes:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[16:16+sha256.Size]) {
		return nil, fmt.Errorf("checksum mismatch: the blob is corrupt (SHA-256 of its %d body bytes is %x, the header says %x)",
			len(body), sum[:], data[16:16+sha256.Size])
	}
	out := &Blob{}
	seenMeta, seenGraph := false, false
	keys := map[string]bool{}
	for off := 0; off < len(body); {
		if len(body)-off < sectionBytes {
			return nil, fmt.Errorf("section at byte %d: %d bytes left, a section header needs %d", HeaderBytes+off, len(body)-off, sectionBytes)
		}
		tag := binary.LittleEndian.Uint32(body[off:])
		n := binary.LittleEndian.Uint64(body[off+4:])
		start := off + sectionBytes
		if n > uint64(len(body)-start) {
			return nil, fmt.Errorf("section at byte %d (tag %d): length %d exceeds the %d bytes left", HeaderBytes+off, tag, n, len(body)-start)
		}
		sec := body[start : start+int(n)]
		where := fmt.Sprintf("section at byte %d", HeaderBytes+off)
		off = start + int(n)
		if !seenMeta && tag != sectionMeta {
			return nil, fmt.Errorf("%s: tag %d before the META section (tag %d), which must come first", where, tag, sectionMeta)
		}
		switch tag {
		case sectionMeta:
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
		case sectionGraph:
			if seenGraph {
				return nil, fmt.Errorf("%s: a second GRAPH section", where)
			}
			seenGraph = true
			if len(sec) == 0 {
				return nil, fmt.Errorf("%s: empty GRAPH section", where)
			}
			out.Graph = sec
		case sectionKernel:
			if len(out.Kernels) >= out.Meta.Kernels {
				return nil, fmt.Errorf("%s: more KERNEL sections than the %d META announces", where, out.Meta.Kernels)
			}
			k, err := decodeKernel(sec, out.Meta)
			if err != nil {
				return nil, fmt.Errorf("%s: KERNEL %d: %w", where, len(out.Kernels), err)
			}
			key := ops.KernelKey(k.File, k.Symbol, k.Config)
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
func (m Meta) check() error {
	switch {
	case m.Format != FormatName:
		return fmt.Errorf("format %q, want %q", m.Format, FormatName)
	case m.CompilerVersion == "":
		return fmt.Errorf("no compiler_version")
	case m.Target == "":
		return fmt.Errorf("no target")
	case m.Backend != string(ep.Host) && m.Backend != string(ep.CUDA):
		return fmt.Errorf("backend %q, want host or cuda", m.Backend)
	case m.Kernels < 0 || m.Kernels > maxKernels:
		return fmt.Errorf("kernel count %d out of range [0, %d]", m.Kernels, maxKernels)
	}
	return nil
}

// decodeKernel parses a KERNEL section's body.
func decodeKernel(sec []byte, meta Meta) (Kernel, error) {
	var k Kernel
	if len(sec) < 4 {
		return k, fmt.Errorf("%d bytes, the record length alone needs 4", len(sec))
	}
	n := binary.LittleEndian.Uint32(sec)
	if uint64(n) > uint64(len(sec)-4) {
		return k, fmt.Errorf("record length %d exceeds the %d bytes left", n, len(sec)-4)
	}
	if err := json.Unmarshal(sec[4:4+n], &k.KernelRecord); err != nil {
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
	if meta.Backend == string(ep.Host) {
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

// SortKernels orders kernels by cache key, so the same session writes the same blob.
func SortKernels(ks []Kernel) {
	sort.Slice(ks, func(i, j int) bool {
		return ops.KernelKey(ks[i].File, ks[i].Symbol, ks[i].Config) < ops.KernelKey(ks[j].File, ks[j].Symbol, ks[j].Config)
	})
}
