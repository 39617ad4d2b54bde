// Command diskgc frees the disk space that Loom's Bazel builds leave behind, before tools/test
// builds again, and says how much space is free:
//
//   - the output bases of Loom workspaces that no longer exist: Bazel keeps one output base per
//     workspace directory (4-5 GB for a full `bazel test //...` of Loom) and never removes it, so
//     every clone that was built and deleted (a fresh-clone check, a CI clone) leaves one behind;
//   - entries of Loom's Bazel disk cache (~/.cache/loom-bazel, which .bazelrc names) not read for
//     longer than -max-age, then the least recently read ones until the cache is at most
//     -max-size: Bazel 4 never evicts from a disk cache, and each regeneration of the shipped
//     kernels adds a full set of objects that no later build reads.
//
// An output base is removed only when all of these hold: it holds execroot/<-workspace> (a Loom
// build's), its DO_NOT_BUILD_HERE names a directory that does not exist, and no Bazel server for
// it is running (server/server.pid.txt). Reading a cache entry updates its access time (relatime
// updates it at least once a day), which is what "least recently read" goes by.
//
//	diskgc [-output-user-root DIR] [-disk-cache DIR] [-max-age 120h] [-max-size 24GiB] [-want-free 24GiB] [-n]
//
// It exits non-zero only when its flags are wrong; what it could not remove is reported and left.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, time.Now()))
}

// config is diskgc's flags.
type config struct {
	outputUserRoot string
	workspace      string
	diskCache      string
	maxAge         time.Duration
	maxSize        int64
	wantFree       int64
	dryRun         bool
}

func run(args []string, out io.Writer, now time.Time) int {
	var c config
	var maxSize, wantFree string
	fs := flag.NewFlagSet("diskgc", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.outputUserRoot, "output-user-root", "", "Bazel's output user root (`bazel info output_user_root`); empty: skip output bases")
	fs.StringVar(&c.workspace, "workspace", "loom", "the workspace name whose output bases may be removed")
	fs.StringVar(&c.diskCache, "disk-cache", "", "Loom's Bazel disk cache; empty: skip the cache")
	fs.DurationVar(&c.maxAge, "max-age", 120*time.Hour, "remove cache entries not read for longer than this")
	fs.StringVar(&maxSize, "max-size", "24GiB", "then remove the least recently read cache entries until the cache is at most this")
	fs.StringVar(&wantFree, "want-free", "24GiB", "warn when less than this is free afterwards")
	fs.BoolVar(&c.dryRun, "n", false, "report what would be removed, remove nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	if c.maxSize, err = parseSize(maxSize); err != nil {
		fmt.Fprintf(out, "diskgc: -max-size: %v\n", err)
		return 2
	}
	if c.wantFree, err = parseSize(wantFree); err != nil {
		fmt.Fprintf(out, "diskgc: -want-free: %v\n", err)
		return 2
	}
	if c.maxAge <= 0 {
		fmt.Fprintf(out, "diskgc: -max-age %v: want a positive duration\n", c.maxAge)
		return 2
	}
	verb := "removed"
	if c.dryRun {
		verb = "would remove"
	}
	if c.outputUserRoot != "" {
		bases, err := orphanedOutputBases(c.outputUserRoot, c.workspace)
		if err != nil {
			fmt.Fprintf(out, "diskgc: %v\n", err)
		}
		for _, b := range bases {
			size := treeSize(b.dir)
			if !c.dryRun {
				if err := removeTree(b.dir); err != nil {
					fmt.Fprintf(out, "diskgc: output base %s (workspace %s, gone): %v\n", b.dir, b.workspace, err)
					continue
				}
			}
			fmt.Fprintf(out, "diskgc: %s the output base of %s (gone): %s, %s\n", verb, b.workspace, b.dir, formatSize(size))
		}
	}
	if c.diskCache != "" {
		r, err := trimCache(c.diskCache, now, c.maxAge, c.maxSize, c.dryRun)
		if err != nil {
			fmt.Fprintf(out, "diskgc: disk cache %s: %v\n", c.diskCache, err)
		}
		fmt.Fprintf(out, "diskgc: disk cache %s: %s %d entries (%s) not read for %v or beyond %s, %s left in %d\n",
			c.diskCache, verb, r.removed, formatSize(r.removedBytes), c.maxAge, formatSize(c.maxSize), formatSize(r.keptBytes), r.kept)
	}
	for _, dir := range []string{c.outputUserRoot, c.diskCache} {
		if dir == "" {
			continue
		}
		free, ok := freeSpace(dir)
		if !ok {
			continue
		}
		warn := ""
		if free < c.wantFree {
			warn = fmt.Sprintf("; WARNING: under %s, and a full tools/test run writes up to that much (docs/testing.md, \"Disk\"): Bazel may fail with \"No space left on device\"", formatSize(c.wantFree))
		}
		fmt.Fprintf(out, "diskgc: %s free on the file system of %s%s\n", formatSize(free), dir, warn)
		if c.diskCache != "" && c.outputUserRoot != "" && sameFS(c.outputUserRoot, c.diskCache) {
			break
		}
	}
	return 0
}

// outputBase is an output base that diskgc may remove.
type outputBase struct {
	dir       string // the output base
	workspace string // the workspace directory it was for (gone)
}

// orphanedOutputBases lists root's output bases of workspace whose workspace directory is gone and
// whose server is not running.
func orphanedOutputBases(root, workspace string) ([]outputBase, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var bases []outputBase
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		owner, err := os.ReadFile(filepath.Join(dir, "DO_NOT_BUILD_HERE"))
		if err != nil {
			continue // the install base, the repository cache, or not Bazel's
		}
		ws := strings.TrimSpace(string(owner))
		if !filepath.IsAbs(ws) {
			continue
		}
		if _, err := os.Lstat(ws); !errors.Is(err, fs.ErrNotExist) {
			continue // still there (or unreadable: not known to be gone)
		}
		if st, err := os.Stat(filepath.Join(dir, "execroot", workspace)); err != nil || !st.IsDir() {
			continue // another project's
		}
		if serverRunning(dir) {
			continue
		}
		bases = append(bases, outputBase{dir: dir, workspace: ws})
	}
	return bases, nil
}

// serverRunning reports whether the Bazel server of the output base dir is running.
func serverRunning(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "server", "server.pid.txt"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// removeTree removes dir, making its directories writable first (Bazel leaves outputs and
// external repositories read-only). Symbolic links are removed, never followed.
func removeTree(dir string) error {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// treeSize is the bytes of the regular files under dir (links not followed).
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// trimmed is what trimCache did.
type trimmed struct {
	removed, kept           int
	removedBytes, keptBytes int64
}

// cacheEntry is one file of the disk cache.
type cacheEntry struct {
	path  string
	size  int64
	atime time.Time
}

// trimCache removes the entries of the disk cache dir not read for longer than maxAge, then the
// least recently read ones until the rest is at most maxSize bytes.
func trimCache(dir string, now time.Time, maxAge time.Duration, maxSize int64, dryRun bool) (trimmed, error) {
	var entries []cacheEntry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == dir {
				return fs.SkipAll
			}
			return nil // a file removed under us, or unreadable: leave it
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		entries = append(entries, cacheEntry{path: path, size: info.Size(), atime: accessTime(info)})
		return nil
	})
	// Least recently read first; ties by path, so a run is reproducible.
	sort.Slice(entries, func(i, j int) bool {
		if !entries[i].atime.Equal(entries[j].atime) {
			return entries[i].atime.Before(entries[j].atime)
		}
		return entries[i].path < entries[j].path
	})
	var r trimmed
	var total int64
	for _, e := range entries {
		total += e.size
	}
	cutoff := now.Add(-maxAge)
	for _, e := range entries {
		if !e.atime.Before(cutoff) && total <= maxSize {
			r.kept++
			r.keptBytes += e.size
			continue
		}
		if !dryRun {
			if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				r.kept++
				r.keptBytes += e.size
				continue
			}
		}
		total -= e.size
		r.removed++
		r.removedBytes += e.size
	}
	return r, err
}

// parseSize reads a byte count such as 24GiB, 512MiB, 100KiB or 1000.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		scale  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	t := strings.TrimSpace(s)
	scale := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, scale = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.scale
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || n*float64(scale) > float64(1<<62) {
		return 0, fmt.Errorf("%q: want a size such as 24GiB, 512MiB or 1000", s)
	}
	return int64(n * float64(scale)), nil
}

// formatSize writes n bytes in the largest binary unit that keeps it at least 1.
func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
