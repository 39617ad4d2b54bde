package loom

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ImageKey names a device image built from an artifact, such as the cubin NVRTC compiles from a
// CUDA artifact's source: everything the image's bytes or its loading depend on beyond the
// artifact. The cache keeps one image per distinct key, so a new compiler, driver or target
// never meets an image built for another.
type ImageKey struct {
	Artifact string // Artifact.Key (source, specialization, target and code generator)
	Target   string // "sm_90"
	Kind     string // the image format: "cubin", "ptx"
	Compiler string // what builds it: "NVRTC 12.9"
	Driver   string // what loads it: "CUDA driver 12080"
}

func (k ImageKey) digest() string {
	h := sha256.New()
	for _, f := range []string{"loom-image-v1", CompilerVersion, strconv.Itoa(codegenRevision), k.Artifact, k.Target, k.Kind, k.Compiler, k.Driver} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

type imageEntry struct {
	Key    ImageKey `json:"key"`
	SHA256 string   `json:"sha256"` // of the image file
	Size   int      `json:"size"`
}

// CachedImage returns the image for k from the compiler's cache directory, or builds it with
// build, caches it and returns it; hit says which. Entries are written as the artifact cache's
// are (image first, then its metadata, each renamed into place) and verified on every read
// (the metadata's key against k, the image's SHA-256): a corrupt or mismatched entry is built
// again, never trusted, and counted in CacheStats.Corrupt. A build error is returned and not
// cached. Concurrent calls for one key may both build; the last write wins, and both images are
// the same. With Config.NoCache the entries live in the compiler's private directory.
func (c *Compiler) CachedImage(k ImageKey, build func() ([]byte, error)) (image []byte, hit bool, err error) {
	if k.Artifact == "" || k.Target == "" || k.Kind == "" || k.Compiler == "" {
		return nil, false, fmt.Errorf("loom: image cache: key %+v lacks the artifact, target, kind or compiler", k)
	}
	if build == nil {
		return nil, false, errors.New("loom: image cache: no build function")
	}
	if err := c.init(); err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, false, ErrClosed
	}
	d := k.digest()
	dir := filepath.Join(c.cacheDir, "images", d[:2])
	metaPath, imgPath := filepath.Join(dir, d+".json"), filepath.Join(dir, d+"."+imageExt(k.Kind))
	if img, status := readImage(metaPath, imgPath, k); status == cacheHit {
		c.imageHits.Add(1)
		return img, true, nil
	} else if status == cacheCorrupt {
		c.corrupt.Add(1)
	}
	img, err := build()
	if err != nil {
		return nil, false, err
	}
	if len(img) == 0 {
		return nil, false, fmt.Errorf("loom: image cache: building the %s of %s for %s gave no bytes", k.Kind, k.Artifact, k.Target)
	}
	c.imageMisses.Add(1)
	sum := sha256.Sum256(img)
	meta, err := json.Marshal(imageEntry{Key: k, SHA256: hex.EncodeToString(sum[:]), Size: len(img)})
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = writeAtomic(imgPath, img, 0o644)
	}
	if err == nil {
		writeAtomic(metaPath, meta, 0o644)
		c.wrote(len(img) + len(meta))
	}
	// Where caching failed (a read-only or full disk) the image is still good: it is served.
	return img, false, nil
}

// readImage returns a verified cached image.
func readImage(metaPath, imgPath string, k ImageKey) ([]byte, cacheStatus) {
	data, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, cacheMiss
	}
	var e imageEntry
	if err := json.Unmarshal(data, &e); err != nil || e.Key != k {
		return nil, cacheCorrupt
	}
	img, err := os.ReadFile(imgPath)
	if err != nil || len(img) != e.Size {
		return nil, cacheCorrupt
	}
	sum := sha256.Sum256(img)
	if hex.EncodeToString(sum[:]) != e.SHA256 {
		return nil, cacheCorrupt
	}
	touch(metaPath)
	return img, cacheHit
}

func imageExt(kind string) string {
	var b strings.Builder
	for _, r := range kind {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "img"
	}
	return b.String()
}
