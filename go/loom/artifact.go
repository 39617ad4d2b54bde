package loom

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/types"
)

// ParamKind distinguishes buffer bindings from scalars.
type ParamKind string

// Parameter kinds.
const (
	ParamBuffer ParamKind = "buffer"
	ParamScalar ParamKind = "scalar"
)

// Param describes one device parameter. ModelSession derives graph edges from buffer bindings'
// access modes: read bindings are inputs, write bindings outputs, read_write both.
type Param struct {
	Name    string    `json:"name"`
	Kind    ParamKind `json:"kind"`
	Type    string    `json:"type"`             // element type of a buffer, or the scalar type
	Access  string    `json:"access,omitempty"` // buffers: read, write or read_write
	Binding int       `json:"binding"`          // buffers: binding index (launch buffer order); scalars: -1
	Offset  int       `json:"offset"`           // scalars: byte offset in the scalar blob
	Size    int       `json:"size"`             // bytes of one element (buffers) or of the scalar
}

// WorkloadParam is a parameter of the launch program; Param indexes Artifact.Params (the device
// scalar of the same name).
type WorkloadParam struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Param int    `json:"param"`
}

// CheckStats reports bounds-check elimination for an artifact.
type CheckStats struct {
	Accesses  int `json:"accesses"`  // loads and stores with indices
	Proven    int `json:"proven"`    // accesses compiled without any run-time check
	Remaining int `json:"remaining"` // individual checks left in the code
}

// Artifact is a compiled kernel.
type Artifact struct {
	Target         string            `json:"target"`
	Kernel         string            `json:"kernel"`
	Entry          string            `json:"entry"` // the kernel's name in its module: the kernel name (host), loom_k_<name> (CUDA)
	Key            string            `json:"key"`   // cache key (hex SHA-256)
	Specialization map[string]string `json:"specialization"`
	Params         []Param           `json:"params"`
	Workload       []WorkloadParam   `json:"workload"`
	ScalarBytes    int               `json:"scalar_bytes"` // size of the scalar parameters
	// BlobBytes is the size of the whole scalar blob a launch passes. For CUDA targets the blob
	// also carries each binding's byte size (a u64 at HiddenOffsets[binding]) after the scalars,
	// since the CUDA convention passes no buffer sizes; PackScalars fills them in.
	BlobBytes     int            `json:"blob_bytes"`
	HiddenOffsets []int          `json:"hidden_offsets,omitempty"`
	Launch        *ir.LaunchCode `json:"launch"`
	Source        string         `json:"source"` // host C or CUDA C
	IR            string         `json:"ir"`     // the launch program and optimized device IR
	Checks        CheckStats     `json:"checks"`
	SharedObject  string         `json:"-"` // host: path of the .so (in the cache)
	SOSHA256      string         `json:"so_sha256,omitempty"`
}

// Buffers returns the buffer parameters in binding order.
func (a *Artifact) Buffers() []Param {
	var out []Param
	for _, p := range a.Params {
		if p.Kind == ParamBuffer {
			out = append(out, p)
		}
	}
	return out
}

// Scalars returns the scalar parameters in blob order.
func (a *Artifact) Scalars() []Param {
	var out []Param
	for _, p := range a.Params {
		if p.Kind == ParamScalar {
			out = append(out, p)
		}
	}
	return out
}

// SharedObjectBytes reads a host artifact's shared object.
func (a *Artifact) SharedObjectBytes() ([]byte, error) {
	if a.SharedObject == "" {
		return nil, fmt.Errorf("loom: artifact for %s has no shared object", a.Target)
	}
	return os.ReadFile(a.SharedObject)
}

// Limits are a device's launch limits (loom_device_props). A zero field means "no limit".
type Limits struct {
	MaxThreadsPerBlock      uint32
	MaxBlockDim             [3]uint32
	MaxGridDim              [3]uint32
	MaxSharedMemoryPerBlock uint32
}

// Geometry is a launch's grid, block and shared memory size.
type Geometry struct {
	Grid        [3]uint32
	Block       [3]uint32
	SharedBytes uint32
}

// Empty reports whether the grid has no blocks (a zero dimension): nothing to launch.
func (g Geometry) Empty() bool { return g.Grid[0] == 0 || g.Grid[1] == 0 || g.Grid[2] == 0 }

// LaunchConfig evaluates the launch program on workload values (the bits of each workload
// parameter, in launch-signature order) and validates the geometry against limits. A grid
// dimension of 0 is allowed (Empty: nothing to launch); block dimensions must be at least 1.
func (a *Artifact) LaunchConfig(workload []uint64, limits Limits) (Geometry, error) {
	var g Geometry
	if a.Launch == nil {
		return g, fmt.Errorf("loom: kernel %s has no launch program", a.Kernel)
	}
	grid, block, shared, err := a.Launch.Eval(workload)
	if err != nil {
		return g, fmt.Errorf("loom: kernel %s: %w", a.Kernel, err)
	}
	threads := uint64(1)
	for d := 0; d < 3; d++ {
		if grid[d] < 0 || grid[d] > math.MaxUint32 {
			return g, fmt.Errorf("loom: kernel %s: grid[%d] = %d is out of range", a.Kernel, d, grid[d])
		}
		if block[d] < 1 || block[d] > math.MaxUint32 {
			return g, fmt.Errorf("loom: kernel %s: block[%d] = %d must be at least 1", a.Kernel, d, block[d])
		}
		if lim := limits.MaxGridDim[d]; lim != 0 && grid[d] > int64(lim) {
			return g, fmt.Errorf("loom: kernel %s: grid[%d] = %d exceeds the device limit %d", a.Kernel, d, grid[d], lim)
		}
		if lim := limits.MaxBlockDim[d]; lim != 0 && block[d] > int64(lim) {
			return g, fmt.Errorf("loom: kernel %s: block[%d] = %d exceeds the device limit %d", a.Kernel, d, block[d], lim)
		}
		g.Grid[d], g.Block[d] = uint32(grid[d]), uint32(block[d])
		threads *= uint64(block[d])
	}
	if lim := limits.MaxThreadsPerBlock; lim != 0 && threads > uint64(lim) {
		return g, fmt.Errorf("loom: kernel %s: %d threads per block exceed the device limit %d", a.Kernel, threads, lim)
	}
	if shared < 0 || shared > math.MaxUint32 {
		return g, fmt.Errorf("loom: kernel %s: shared memory size %d is out of range", a.Kernel, shared)
	}
	if lim := limits.MaxSharedMemoryPerBlock; lim != 0 && shared > int64(lim) {
		return g, fmt.Errorf("loom: kernel %s: %d bytes of shared memory exceed the device limit %d", a.Kernel, shared, lim)
	}
	g.SharedBytes = uint32(shared)
	return g, nil
}

// LaunchConfigArgs is LaunchConfig with typed workload values (Go integers, checked against each
// workload parameter's type).
func (a *Artifact) LaunchConfigArgs(limits Limits, args ...any) (Geometry, error) {
	if len(args) != len(a.Workload) {
		return Geometry{}, fmt.Errorf("loom: kernel %s takes %d workload values, got %d", a.Kernel, len(a.Workload), len(args))
	}
	bits := make([]uint64, len(args))
	for i, v := range args {
		b, err := scalarBits(a.Workload[i].Name, a.Workload[i].Type, v)
		if err != nil {
			return Geometry{}, fmt.Errorf("loom: kernel %s: %w", a.Kernel, err)
		}
		bits[i] = b
	}
	return a.LaunchConfig(bits, limits)
}

// WorkloadBits returns the workload values of a launch taken from its scalar arguments (in
// scalar order, as PackScalars takes them).
func (a *Artifact) WorkloadBits(scalars ...any) ([]uint64, error) {
	sc := a.Scalars()
	if len(scalars) != len(sc) {
		return nil, fmt.Errorf("loom: kernel %s takes %d scalars, got %d", a.Kernel, len(sc), len(scalars))
	}
	var out []uint64
	for _, w := range a.Workload {
		p := a.Params[w.Param]
		for i, s := range sc {
			if s.Name == p.Name {
				b, err := scalarBits(p.Name, p.Type, scalars[i])
				if err != nil {
					return nil, err
				}
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// PackScalars lays out a launch's scalar blob: the scalars (in Scalars order, as Go values
// checked against their types) at their offsets and, for CUDA targets, the byte size of every
// binding (bufferBytes, in binding order).
func (a *Artifact) PackScalars(bufferBytes []uint64, scalars ...any) ([]byte, error) {
	sc := a.Scalars()
	if len(scalars) != len(sc) {
		return nil, fmt.Errorf("loom: kernel %s takes %d scalars, got %d", a.Kernel, len(sc), len(scalars))
	}
	blob := make([]byte, a.BlobBytes)
	for i, p := range sc {
		bits, err := scalarBits(p.Name, p.Type, scalars[i])
		if err != nil {
			return nil, fmt.Errorf("loom: kernel %s: %w", a.Kernel, err)
		}
		switch p.Size {
		case 1:
			blob[p.Offset] = byte(bits)
		case 2:
			binary.LittleEndian.PutUint16(blob[p.Offset:], uint16(bits))
		case 4:
			binary.LittleEndian.PutUint32(blob[p.Offset:], uint32(bits))
		case 8:
			binary.LittleEndian.PutUint64(blob[p.Offset:], bits)
		}
	}
	if len(a.HiddenOffsets) > 0 {
		if len(bufferBytes) != len(a.HiddenOffsets) {
			return nil, fmt.Errorf("loom: kernel %s: %d buffer sizes for %d bindings", a.Kernel, len(bufferBytes), len(a.HiddenOffsets))
		}
		for i, off := range a.HiddenOffsets {
			binary.LittleEndian.PutUint64(blob[off:], bufferBytes[i])
		}
	}
	return blob, nil
}

// scalarBits converts a Go value to the bits of a Loom scalar of type typ, rejecting values
// that do not fit.
func scalarBits(name, typ string, v any) (uint64, error) {
	t := types.LookupBasic(typ)
	if t == nil {
		return 0, fmt.Errorf("scalar %s: unknown type %s", name, typ)
	}
	var i int64
	var u uint64
	var f float64
	kind := 0 // 1 int, 2 uint, 3 float, 4 bool
	switch x := v.(type) {
	case int:
		i, kind = int64(x), 1
	case int8:
		i, kind = int64(x), 1
	case int16:
		i, kind = int64(x), 1
	case int32:
		i, kind = int64(x), 1
	case int64:
		i, kind = x, 1
	case uint:
		u, kind = uint64(x), 2
	case uint8:
		u, kind = uint64(x), 2
	case uint16:
		u, kind = uint64(x), 2
	case uint32:
		u, kind = uint64(x), 2
	case uint64:
		u, kind = x, 2
	case float32:
		f, kind = float64(x), 3
	case float64:
		f, kind = x, 3
	case bool:
		kind = 4
		if x {
			i = 1
		}
	default:
		return 0, fmt.Errorf("scalar %s: unsupported Go type %T for %s", name, v, typ)
	}
	switch {
	case t.IsBool():
		if kind != 4 {
			return 0, fmt.Errorf("scalar %s: %s takes a bool, not %T", name, typ, v)
		}
		return uint64(i), nil
	case t.IsFloat():
		switch kind {
		case 1:
			f = float64(i)
		case 2:
			f = float64(u)
		case 4:
			return 0, fmt.Errorf("scalar %s: %s takes a number, not a bool", name, typ)
		}
		switch t.Kind() {
		case types.F16:
			return uint64(ir.F32ToF16(float32(f))), nil
		case types.BF16:
			return uint64(ir.F32ToBF16(float32(f))), nil
		case types.F32:
			return uint64(math.Float32bits(float32(f))), nil
		}
		return math.Float64bits(f), nil
	default: // integers
		if kind == 3 || kind == 4 {
			return 0, fmt.Errorf("scalar %s: %s takes an integer, not %T", name, typ, v)
		}
		bits := t.Bits()
		if t.IsUnsigned() {
			if kind == 1 {
				if i < 0 {
					return 0, fmt.Errorf("scalar %s: %d does not fit in %s", name, i, typ)
				}
				u = uint64(i)
			}
			if bits < 64 && u >= 1<<uint(bits) {
				return 0, fmt.Errorf("scalar %s: %d does not fit in %s", name, u, typ)
			}
			return u, nil
		}
		if kind == 2 {
			if u > math.MaxInt64 {
				return 0, fmt.Errorf("scalar %s: %d does not fit in %s", name, u, typ)
			}
			i = int64(u)
		}
		if bits < 64 && (i < -(1<<uint(bits-1)) || i >= 1<<uint(bits-1)) {
			return 0, fmt.Errorf("scalar %s: %d does not fit in %s", name, i, typ)
		}
		if t.Kind() == types.Index && (i < -ir.IndexParamLimit || i > ir.IndexParamLimit) {
			return 0, fmt.Errorf("scalar %s: index %d is beyond ±2^40", name, i)
		}
		return uint64(i), nil
	}
}
