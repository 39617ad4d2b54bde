package loom

import (
	"os"
	"os/exec"
	"sync"
	"time"
)

// ccProbes holds what this process found out about its C compilers: each one's identity (the
// first line of --version) and, by target, the libmvec level its host kernels link (see
// vectorMath). Every Compiler asks them (a session has a Compiler of its own), and finding
// them out runs the C compiler: two probe builds and --version, tens of milliseconds of CPU
// a session. A compiler is known by its file (the path it resolves to, its size and
// modification time), so a compiler installed over it is asked again.
var ccProbes struct {
	mu  sync.Mutex
	ids map[ccFile]ccIdentityProbe
	vec map[ccVecKey]int
}

// ccFile is a C compiler's executable as this process finds it.
type ccFile struct {
	path string
	size int64
	mod  time.Time
}

type ccIdentityProbe struct {
	id  string
	gcc bool
}

type ccVecKey struct {
	cc     ccFile
	target Target
}

// ccFileOf resolves cc (a name on PATH or a path) to its file; false when it cannot (its
// probes are then not kept).
func ccFileOf(cc string) (ccFile, bool) {
	path, err := exec.LookPath(cc)
	if err != nil {
		return ccFile{}, false
	}
	st, err := os.Stat(path)
	if err != nil {
		return ccFile{}, false
	}
	return ccFile{path: path, size: st.Size(), mod: st.ModTime()}, true
}

// cachedIdentity returns the identity this process found for cc's file.
func cachedIdentity(f ccFile) (ccIdentityProbe, bool) {
	ccProbes.mu.Lock()
	defer ccProbes.mu.Unlock()
	p, ok := ccProbes.ids[f]
	return p, ok
}

func keepIdentity(f ccFile, p ccIdentityProbe) {
	ccProbes.mu.Lock()
	defer ccProbes.mu.Unlock()
	if ccProbes.ids == nil {
		ccProbes.ids = map[ccFile]ccIdentityProbe{}
	}
	ccProbes.ids[f] = p
}

// cachedVectorMath returns the libmvec level this process found for cc's file and target.
func cachedVectorMath(f ccFile, target Target) (int, bool) {
	ccProbes.mu.Lock()
	defer ccProbes.mu.Unlock()
	level, ok := ccProbes.vec[ccVecKey{f, target}]
	return level, ok
}

func keepVectorMath(f ccFile, target Target, level int) {
	ccProbes.mu.Lock()
	defer ccProbes.mu.Unlock()
	if ccProbes.vec == nil {
		ccProbes.vec = map[ccVecKey]int{}
	}
	ccProbes.vec[ccVecKey{f, target}] = level
}
