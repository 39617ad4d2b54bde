package loom

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The cache holds, per key, <key>.so (host targets), <key>.txt (host targets: the artifact's
// C source and IR text) and <key>.json: the artifact's metadata, its digest and the digests of
// the other files. Files are published by writing a temporary file and renaming it into place,
// the .so and .txt before the .json, so a reader that finds the .json finds a complete entry; a
// reader verifies the digests of what it reads and treats any mismatch as a miss.
//
// A host artifact's text is most of its entry (a GEMM's: 50 KB of C and 38 KB of IR in a 96 KB
// entry), and a session that loads kernels from the cache runs them without reading either:
// decoding them as JSON took 1.5-3 ms a kernel, in the background compiler beside the runs.
// A lookup for a caller that only runs the artifact (Request.RunOnly) leaves the .txt unread.
// Entries written before the .txt existed keep the text in the metadata and are read as they are.

type cacheStatus int

const (
	cacheMiss cacheStatus = iota
	cacheHit
	cacheCorrupt
)

type cacheEntry struct {
	Artifact json.RawMessage `json:"artifact"`
	Digest   string          `json:"digest"` // hex SHA-256 of Artifact
	// Text is the hex SHA-256 of <key>.txt, which holds the artifact's Source and IR; empty
	// when the metadata holds them (CUDA targets, and entries from before the .txt).
	Text string `json:"text,omitempty"`
}

// textHeader starts a .txt file: the format's name and the source's length in bytes; the
// source follows, then the IR to the end of the file.
const textHeader = "loom-artifact-text 1 "

// encodeText lays out an artifact's source and IR for its .txt file.
func encodeText(source, ir string) []byte {
	b := make([]byte, 0, len(textHeader)+24+len(source)+len(ir))
	b = append(b, textHeader...)
	b = strconv.AppendInt(b, int64(len(source)), 10)
	b = append(b, '\n')
	b = append(b, source...)
	return append(b, ir...)
}

// decodeText is encodeText's inverse; ok is false for anything it did not write.
func decodeText(b []byte) (source, ir string, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte(textHeader))
	if !found {
		return "", "", false
	}
	num, body, found := bytes.Cut(rest, []byte{'\n'})
	if !found {
		return "", "", false
	}
	n, err := strconv.ParseUint(string(num), 10, 63)
	if err != nil || n > uint64(len(body)) {
		return "", "", false
	}
	return string(body[:n]), string(body[n:]), true
}

// codegenRevision counts the changes of the generated code that keep the kernels' keys (the
// shipped tables are regenerated with each, so they hold the current code). The disk cache
// names its entries with it (<key>-r<N>.json, .so, .txt), so that an entry an earlier revision
// compiled is not read: the kernel is compiled again once, and the old entry ages out (the
// trim). A CompilerVersion change instead gives every kernel, shipped ones included, a new key,
// and CI then compiles all of them again, for every target.
//
//	1: the bounds prover's case splits on min and max (checks gone from 174 shipped kernels)
const codegenRevision = 1

// entryBase is key's entry in the cache directory without its extension.
func (c *Compiler) entryBase(key string) string {
	return filepath.Join(c.cacheDir, key[:2], key+"-r"+strconv.Itoa(codegenRevision))
}

func (c *Compiler) entryPaths(key string) (meta, so string) {
	base := c.entryBase(key)
	return base + ".json", base + ".so"
}

// textPath is the path of key's .txt file.
func (c *Compiler) textPath(key string) string {
	return c.entryBase(key) + ".txt"
}

// Cached reports whether the disk cache holds src compiled for target, so that Compile would
// read it rather than run a compiler. It compiles nothing and reads no entry (Compile verifies
// the entry it reads, and compiles again when that fails). Whatever Compile would refuse
// before compiling (a closed Compiler, an invalid target, a source that names no kernel, a
// host C compiler that cannot be identified) reports false.
func (c *Compiler) Cached(ctx context.Context, src KernelSource, target Target) bool {
	_, key, err := c.prepare(ctx, src, target)
	if err != nil {
		return false
	}
	meta, so := c.entryPaths(key)
	if _, err := os.Stat(meta); err != nil {
		return false
	}
	if target.Kind == TargetHost {
		if _, err := os.Stat(so); err != nil {
			return false
		}
	}
	return true
}

// lookup returns a verified cached artifact; with text false, a host artifact whose text is in
// its .txt file comes without its Source and IR (the .txt is not read).
func (c *Compiler) lookup(key string, target Target, text bool) (*Artifact, cacheStatus) {
	metaPath, soPath := c.entryPaths(key)
	data, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, cacheMiss
	}
	var e cacheEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, cacheCorrupt
	}
	sum := sha256.Sum256(e.Artifact)
	if hex.EncodeToString(sum[:]) != e.Digest {
		return nil, cacheCorrupt
	}
	var a Artifact
	if err := json.Unmarshal(e.Artifact, &a); err != nil || a.Key != key || a.Target != target.String() {
		return nil, cacheCorrupt
	}
	if e.Text != "" && (text || target.Kind != TargetHost) {
		raw, err := os.ReadFile(c.textPath(key))
		if err != nil {
			return nil, cacheCorrupt
		}
		sum := sha256.Sum256(raw)
		var ok bool
		if hex.EncodeToString(sum[:]) != e.Text {
			return nil, cacheCorrupt
		}
		if a.Source, a.IR, ok = decodeText(raw); !ok {
			return nil, cacheCorrupt
		}
	}
	if target.Kind == TargetHost {
		so, err := os.ReadFile(soPath)
		if err != nil {
			return nil, cacheCorrupt
		}
		sum := sha256.Sum256(so)
		if hex.EncodeToString(sum[:]) != a.SOSHA256 {
			return nil, cacheCorrupt
		}
		a.SharedObject = soPath
	}
	touch(metaPath)
	return &a, cacheHit
}

// publish writes an artifact (and its shared object) into the cache and points the artifact at
// the cached shared object. A host artifact's Source and IR go to its .txt file (the cache
// layout above); a is not changed otherwise.
func (c *Compiler) publish(a *Artifact, target Target, so []byte) error {
	metaPath, soPath := c.entryPaths(a.Key)
	if err := os.MkdirAll(filepath.Dir(metaPath), 0o755); err != nil {
		return fmt.Errorf("loom: cache: %w", err)
	}
	if so != nil {
		sum := sha256.Sum256(so)
		a.SOSHA256 = hex.EncodeToString(sum[:])
		if err := writeAtomic(soPath, so, 0o755); err != nil {
			return err
		}
		a.SharedObject = soPath
	}
	meta := a
	var entry cacheEntry
	written := len(so)
	if target.Kind == TargetHost && (a.Source != "" || a.IR != "") {
		text := encodeText(a.Source, a.IR)
		sum := sha256.Sum256(text)
		entry.Text = hex.EncodeToString(sum[:])
		if err := writeAtomic(c.textPath(a.Key), text, 0o644); err != nil {
			return err
		}
		written += len(text)
		lean := *a
		lean.Source, lean.IR = "", ""
		meta = &lean
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("loom: cache: %w", err)
	}
	sum := sha256.Sum256(raw)
	entry.Artifact, entry.Digest = raw, hex.EncodeToString(sum[:])
	data, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("loom: cache: %w", err)
	}
	if err := writeAtomic(metaPath, data, 0o644); err != nil {
		return err
	}
	c.wrote(written + len(data)) // the entry is whole: a trim it starts may take it
	return nil
}

// writeAtomic writes data to a temporary file in path's directory and renames it over path.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("loom: cache: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, mode)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("loom: cache: %w", werr)
	}
	return nil
}
