package loom

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The cache holds, per key, <key>.so (host targets) and <key>.json: the artifact's metadata,
// its digest and the digest of the shared object. Files are published by writing a temporary
// file and renaming it into place, the .so before the .json, so a reader that finds the .json
// finds a complete entry; a reader verifies both digests and treats any mismatch as a miss.

type cacheStatus int

const (
	cacheMiss cacheStatus = iota
	cacheHit
	cacheCorrupt
)

type cacheEntry struct {
	Artifact json.RawMessage `json:"artifact"`
	Digest   string          `json:"digest"` // hex SHA-256 of Artifact
}

func (c *Compiler) entryPaths(key string) (meta, so string) {
	dir := filepath.Join(c.cacheDir, key[:2])
	return filepath.Join(dir, key+".json"), filepath.Join(dir, key+".so")
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

// lookup returns a verified cached artifact.
func (c *Compiler) lookup(key string, target Target) (*Artifact, cacheStatus) {
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
// the cached shared object.
func (c *Compiler) publish(a *Artifact, so []byte) error {
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
	raw, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("loom: cache: %w", err)
	}
	sum := sha256.Sum256(raw)
	data, err := json.Marshal(cacheEntry{Artifact: raw, Digest: hex.EncodeToString(sum[:])})
	if err != nil {
		return fmt.Errorf("loom: cache: %w", err)
	}
	if err := writeAtomic(metaPath, data, 0o644); err != nil {
		return err
	}
	c.wrote(len(so) + len(data)) // the entry is whole: a trim it starts may take it
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
