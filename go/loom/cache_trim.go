package loom

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Trimming the disk cache. Every distinct kernel specialization a process compiles adds an
// entry (tens of kilobytes: the shared object and its metadata), and specializations can
// follow the input shapes a service is sent; a CompilerVersion change leaves the older
// version's entries unused. So the cache is kept within Config.CacheMaxBytes, least recently
// used entries out first, and entries unused for cacheMaxAge are removed whatever the size.
// A hit refreshes its entry's modification time (at most once per cacheTouchEvery), which is
// what "used" means here; a trim runs when a Compiler first writes an entry (at most once per
// cacheTrimEvery for all the processes sharing the directory, by the time of the file
// trim.txt), and again whenever the process has written an eighth of the limit since its
// last trim. A process that only reads entries adds nothing, and trims nothing.
// Removing an entry another process is about to read is harmless: a reader that finds it
// gone or incomplete compiles again.

// DefaultCacheMaxBytes is Config.CacheMaxBytes's default: 1 GiB, tens of thousands of kernels.
const DefaultCacheMaxBytes = 1 << 30

const (
	cacheMaxAge     = 30 * 24 * time.Hour
	cacheTouchEvery = time.Hour
	cacheTrimEvery  = time.Hour
	// A trim over the limit removes entries until the cache holds this part of it, so that
	// it does not run again at the next entry.
	cacheTrimToNum, cacheTrimToDen = 3, 4
)

// cacheEntryFile matches the files of cache entries, relative to the cache directory:
// <2 hex>/<key>-r<revision>.<ext> (artifacts; <key>.<ext> before codegenRevision) and
// images/<2 hex>/<digest>.<ext> (device images), and the temporary files of writes under way
// or abandoned (.tmp-*).
var cacheEntryFile = regexp.MustCompile(`^(images/)?[0-9a-f]{2}/(([0-9a-f]{64}(?:-r[0-9]+)?)\.[a-z0-9]+|\.tmp-[0-9]+)$`)

// maxCacheBytes is the limit in force: Config.CacheMaxBytes, else $LOOM_CACHE_MAX_BYTES, else
// DefaultCacheMaxBytes; negative for none.
func (c *Compiler) maxCacheBytes() int64 {
	if c.cfg.CacheMaxBytes != 0 {
		return c.cfg.CacheMaxBytes
	}
	if v, err := strconv.ParseInt(os.Getenv("LOOM_CACHE_MAX_BYTES"), 10, 64); err == nil && v != 0 {
		return v
	}
	return DefaultCacheMaxBytes
}

// touch marks the entry whose file is path as used now, unless it was within cacheTouchEvery.
func touch(path string) {
	if st, err := os.Stat(path); err == nil && time.Since(st.ModTime()) > cacheTouchEvery {
		now := time.Now()
		os.Chtimes(path, now, now)
	}
}

// wrote counts n bytes written to the disk cache (a whole entry), and starts a trim in the
// background: after the process's first write, unless the directory was trimmed within
// cacheTrimEvery, and once an eighth of the limit has been written since the last one.
func (c *Compiler) wrote(n int) {
	limit := c.maxCacheBytes()
	if c.private != "" || limit < 0 {
		return
	}
	if c.written.Add(int64(n)) >= limit/8 {
		c.written.Store(0)
		c.startTrim(true)
	} else if c.wroteOnce.CompareAndSwap(false, true) {
		c.startTrim(false)
	}
}

// startTrim trims the cache on a goroutine of its own (Close waits for it), unless one is
// running; unless force, only when no process sharing the directory has trimmed it within
// cacheTrimEvery.
func (c *Compiler) startTrim(force bool) {
	if c.private != "" || c.maxCacheBytes() < 0 || !c.trimming.CompareAndSwap(false, true) {
		return
	}
	marker := filepath.Join(c.cacheDir, "trim.txt")
	if st, err := os.Stat(marker); !force && err == nil && time.Since(st.ModTime()) < cacheTrimEvery {
		c.trimming.Store(false)
		return
	}
	c.mu.Lock() // Close sets closed, then waits: no Add after its Wait
	if c.closed {
		c.mu.Unlock()
		c.trimming.Store(false)
		return
	}
	c.trimWG.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.trimWG.Done()
		defer c.trimming.Store(false)
		trimCache(c.cacheDir, c.maxCacheBytes(), time.Now())
	}()
}

// trimCache removes from dir the entries unused for cacheMaxAge, then, while the entries hold
// more than limit bytes, the least recently used ones down to three quarters of it, and
// temporary files abandoned for an hour; it returns what it removed (relative paths) and
// records its time in trim.txt.
func trimCache(dir string, limit int64, now time.Time) (removed []string) {
	type entry struct {
		files []string // relative to dir; the .json (what readers look for) first
		bytes int64
		used  time.Time
	}
	entries := map[string]*entry{}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		m := cacheEntryFile.FindStringSubmatch(rel)
		if m == nil {
			return nil // not the cache's: left alone
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if m[3] == "" { // a temporary file
			if now.Sub(info.ModTime()) > time.Hour && os.Remove(path) == nil {
				removed = append(removed, rel)
			}
			return nil
		}
		id := m[1] + m[3]
		e := entries[id]
		if e == nil {
			e = &entry{}
			entries[id] = e
		}
		if strings.HasSuffix(rel, ".json") {
			e.files = append([]string{rel}, e.files...)
		} else {
			e.files = append(e.files, rel)
		}
		e.bytes += info.Size()
		if info.ModTime().After(e.used) {
			e.used = info.ModTime()
		}
		return nil
	})
	list := make([]*entry, 0, len(entries))
	var total int64
	for _, e := range entries {
		list = append(list, e)
		total += e.bytes
	}
	sort.Slice(list, func(i, j int) bool { return list[i].used.Before(list[j].used) })
	target := limit / cacheTrimToDen * cacheTrimToNum
	over := total > limit
	for _, e := range list { // oldest first: once one is not too old, none after it is
		if now.Sub(e.used) <= cacheMaxAge && (!over || total <= target) {
			break
		}
		for _, f := range e.files {
			if os.Remove(filepath.Join(dir, filepath.FromSlash(f))) == nil {
				removed = append(removed, f)
			}
		}
		total -= e.bytes
	}
	os.WriteFile(filepath.Join(dir, "trim.txt"), []byte(now.UTC().Format(time.RFC3339)+"\n"), 0o644)
	return removed
}
