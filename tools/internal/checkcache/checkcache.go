// Package checkcache keeps the results of the expensive checks that the tests repeat on
// unchanged inputs: NVRTC compiling every shipped CUDA variant (kernelgen's
// TestShippedCubinsAreWhatNVRTCBuilds) and cuobjdump reading every shipped cubin (cudareport's
// TestResourceReportIsCurrent). The go command's test cache keeps such results only for the
// same checkout path; this cache keys a result by its inputs' content alone (the tool's bytes,
// the source, the options), so a clean clone elsewhere on the same machine does again only the
// work whose inputs changed.
//
// A result is stored under the SHA-256 of everything that determines it; a Cache never answers
// for inputs it was not given. LOOM_CHECK_CACHE=off turns it off (every check done afresh);
// LOOM_CHECK_CACHE_DIR moves it (default: the user cache directory's loom-checks).
package checkcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Cache is one check's results. The nil *Cache is a cache that holds nothing and keeps
// nothing.
type Cache struct {
	dir          string
	hits, misses atomic.Int64
}

// Open is the cache of the check called name, or nil when LOOM_CHECK_CACHE=off or there is no
// cache directory to use.
func Open(name string) *Cache {
	if os.Getenv("LOOM_CHECK_CACHE") == "off" {
		return nil
	}
	base := os.Getenv("LOOM_CHECK_CACHE_DIR")
	if base == "" {
		ucd, err := os.UserCacheDir()
		if err != nil {
			return nil
		}
		base = filepath.Join(ucd, "loom-checks")
	}
	dir := filepath.Join(base, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil
	}
	return &Cache{dir: dir}
}

// Key is the SHA-256 of parts, each length-prefixed so that no two lists of parts share a key.
func Key(parts ...[]byte) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Get is the result stored under key.
func (c *Cache) Get(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(c.dir, key))
	if err != nil {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return b, true
}

// Put stores value under key, atomically (a reader sees the whole value or none); a failure to
// write is not an error of the check, which only loses the saving.
func (c *Cache) Put(key string, value []byte) {
	if c == nil {
		return
	}
	f, err := os.CreateTemp(c.dir, "tmp-*")
	if err != nil {
		return
	}
	_, werr := f.Write(value)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(c.dir, key)) != nil {
		os.Remove(f.Name())
	}
}

// Lookups is how many results were looked up, and how many of them were found.
func (c *Cache) Lookups() (n, found int64) {
	if c == nil {
		return 0, 0
	}
	h := c.hits.Load()
	return h + c.misses.Load(), h
}

// Stats says how many lookups found a result ("3 of 4 results from the cache DIR").
func (c *Cache) Stats() string {
	if c == nil {
		return "cache off (LOOM_CHECK_CACHE=off or no cache directory)"
	}
	h := c.hits.Load()
	return fmt.Sprintf("%d of %d results from the cache %s", h, h+c.misses.Load(), c.dir)
}

var fileHashes sync.Map // path -> fileHash

type fileHash struct {
	once sync.Once
	sum  string
	err  error
}

// FileHash is the SHA-256 of the file at path, read once a process (tools and libraries that
// a check runs do not change under it).
func FileHash(path string) (string, error) {
	v, _ := fileHashes.LoadOrStore(path, &fileHash{})
	fh := v.(*fileHash)
	fh.once.Do(func() {
		f, err := os.Open(path)
		if err != nil {
			fh.err = err
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			fh.err = err
			return
		}
		fh.sum = hex.EncodeToString(h.Sum(nil))
	})
	return fh.sum, fh.err
}
