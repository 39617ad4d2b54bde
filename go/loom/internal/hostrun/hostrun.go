// Package hostrun runs host kernels of Loom shared objects through a small C driver (csrc/loomrun.c)
// that follows loom.h's host calling convention. Tests and benchmarks use it so that generated
// code is exercised without the native runtime.
package hostrun

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

//go:embed csrc/loomrun.c
var driverSource []byte

var (
	buildOnce sync.Once
	driver    string
	buildErr  error
)

// Driver returns the path of the compiled driver, building it with $CC (else gcc) once per
// process (reused across processes: it is keyed by its source digest and the compiler).
func Driver() (string, error) {
	buildOnce.Do(func() {
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "gcc"
		}
		sum := sha256.Sum256(append(append([]byte(nil), driverSource...), cc...))
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("loomrun-%x", sum[:8]))
		bin := filepath.Join(dir, "loomrun")
		if _, err := os.Stat(bin); err == nil {
			driver = bin
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		src := filepath.Join(dir, fmt.Sprintf("loomrun-%d.c", os.Getpid()))
		if err := os.WriteFile(src, driverSource, 0o644); err != nil {
			buildErr = err
			return
		}
		defer os.Remove(src)
		tmp := filepath.Join(dir, fmt.Sprintf("loomrun-%d.tmp", os.Getpid()))
		out, err := exec.Command(cc, "-O2", "-pthread", "-o", tmp, src, "-ldl").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building loomrun: %v\n%s", err, out)
			return
		}
		if err := os.Rename(tmp, bin); err != nil {
			buildErr = err
			return
		}
		driver = bin
	})
	return driver, buildErr
}

// Launch is one kernel launch.
type Launch struct {
	Grid, Block [3]uint32
	SharedBytes uint32
	Buffers     [][]byte // contents of each binding (outputs are read back into fresh slices)
	Scalars     []byte
	Threads     int // worker threads running blocks concurrently (0: 1)
	Iterations  int // launches to time (0: 1)
}

// Result is what a launch produced.
type Result struct {
	Violation  uint32
	Buffers    [][]byte
	Seconds    float64 // best wall-clock time of one launch over the iterations
	CPUSeconds float64 // best CPU time (all threads) of one launch: robust to other load
}

// Run launches entry of the shared object so (compiled for target).
func Run(so, entry, target string, l Launch) (*Result, error) {
	drv, err := Driver()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "loomrun-io-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var in bytes.Buffer
	in.WriteString("LOOM")
	le := func(v any) { binary.Write(&in, binary.LittleEndian, v) }
	le(l.Grid)
	le(l.Block)
	le(l.SharedBytes)
	le(uint32(len(l.Buffers)))
	le(uint32(len(l.Scalars)))
	le(uint32(l.Threads))
	le(uint32(l.Iterations))
	for _, b := range l.Buffers {
		le(uint64(len(b)))
		in.Write(b)
	}
	in.Write(l.Scalars)
	inPath, outPath := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(inPath, in.Bytes(), 0o644); err != nil {
		return nil, err
	}
	out, err := exec.Command(drv, so, entry, target, inPath, outPath).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("loomrun %s: %v\n%s", entry, err, out)
	}
	data, err := os.ReadFile(outPath)
	if err != nil {
		return nil, err
	}
	if len(data) < 24 {
		return nil, fmt.Errorf("loomrun: short output")
	}
	r := &Result{
		Violation:  binary.LittleEndian.Uint32(data),
		Seconds:    math.Float64frombits(binary.LittleEndian.Uint64(data[8:])),
		CPUSeconds: math.Float64frombits(binary.LittleEndian.Uint64(data[16:])),
	}
	data = data[24:]
	for _, b := range l.Buffers {
		if len(data) < len(b) {
			return nil, fmt.Errorf("loomrun: short output")
		}
		r.Buffers = append(r.Buffers, append([]byte(nil), data[:len(b)]...))
		data = data[len(b):]
	}
	return r, nil
}

// F32 encodes float32s little endian.
func F32(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// ToF32 decodes little-endian float32s.
func ToF32(b []byte) []float32 {
	xs := make([]float32, len(b)/4)
	for i := range xs {
		xs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return xs
}
