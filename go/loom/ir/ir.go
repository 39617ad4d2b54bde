// Package ir is Loom's SSA intermediate representation: structured ops grouped in dialects in
// the spirit of MLIR (index, scalar, vector, buffer, view, local, scf, kernel). Values are
// defined once; mutable variables live in local slots (local.alloc/load/store) that the C
// compiler promotes to registers. Regions nest (scf.for, scf.if) and a value is visible in the
// region that defines it and in regions nested in it.
package ir

import (
	"math"

	"github.com/loomrt/loom/go/loom/token"
	"github.com/loomrt/loom/go/loom/types"
)

// Code is an operation kind. The printed name's dialect follows the result type (index.add on
// index values, scalar.add on scalars, vector.add on vectors) or the memory operand.
type Code uint8

// Operation codes.
const (
	OpConst       Code = iota + 1 // constant: Int/Float
	OpSpec                        // kernel.spec: a specialization constant, folded by the specialize pass
	OpBinary                      // Sub: BinAdd...
	OpCmp                         // Sub: CmpEq...
	OpUnary                       // Sub: UnNeg...
	OpCast                        // to Type
	OpSelect                      // cond, a, b
	OpFma                         // a*b+c
	OpSplat                       // scalar → vector
	OpReduce                      // Sub: BinAdd/BinMax/BinMin over lanes
	OpInf                         // +Inf of Type
	OpThreadID                    // Int: dimension
	OpBlockID                     // Int: dimension
	OpBufLen                      // elements of a buffer binding
	OpLoad                        // mem, indices...: buffer/view/local element (Width lanes)
	OpStore                       // mem, value, indices...
	OpViewMake                    // buffer, shape..., strides..., offset (Int = rank)
	OpSharedView                  // shape..., strides..., offset (Int = rank); Type = element type
	OpAlloc                       // local slot; Type = slot type
	OpFor                         // lo, hi, step; Regions[0] has the induction variable
	OpIf                          // cond; Regions[0] then, Regions[1] else
	OpBarrier                     // kernel.barrier
	OpAssume                      // kernel.assume cond: the block aborts when false
	OpLaunchCheck                 // kernel.launch_check grid[3], block[3], shared
	OpGeometry                    // kernel.geometry grid[3], block[3], shared: the launch program's results
)

// Sub-operations of binary, comparison, unary and reduce ops.
const (
	BinAdd = iota + 1
	BinSub
	BinMul
	BinDiv
	BinRem
	BinAnd
	BinOr
	BinXor
	BinShl
	BinShr
	BinMin
	BinMax
	BinCeilDiv

	CmpEq
	CmpNe
	CmpLt
	CmpLe
	CmpGt
	CmpGe

	UnNeg
	UnNot // logical not on i1, bitwise not on integers
	UnAbs
	UnSqrt
	UnExp
	UnLog
	UnTanh
	UnSin
	UnCos
	UnFloor
	UnCeil
)

var subNames = map[int]string{
	BinAdd: "add", BinSub: "sub", BinMul: "mul", BinDiv: "div", BinRem: "rem", BinAnd: "and",
	BinOr: "or", BinXor: "xor", BinShl: "shl", BinShr: "shr", BinMin: "min", BinMax: "max",
	BinCeilDiv: "ceil_div",
	CmpEq:      "eq", CmpNe: "ne", CmpLt: "lt", CmpLe: "le", CmpGt: "gt", CmpGe: "ge",
	UnNeg: "neg", UnNot: "not", UnAbs: "abs", UnSqrt: "sqrt", UnExp: "exp", UnLog: "log",
	UnTanh: "tanh", UnSin: "sin", UnCos: "cos", UnFloor: "floor", UnCeil: "ceil",
}

// SubName returns the printed name of a sub-operation.
func SubName(sub int) string { return subNames[sub] }

// Bounds check flags of one index of a memory access.
const (
	CheckLower uint8 = 1 << iota // index >= 0
	CheckUpper                   // index (+ width - 1) < extent
)

// Slot is the type of a local slot: a scalar or vector variable, or an array of them.
type Slot struct {
	Elem types.Type // *types.Basic or *types.Vector
	Dims []int      // empty for a plain variable
}

// String prints the slot type.
func (s *Slot) String() string {
	str := "slot<"
	for _, d := range s.Dims {
		str += itoa(int64(d)) + "x"
	}
	return str + s.Elem.String() + ">"
}

// Value is an SSA value.
type Value struct {
	ID   int
	Type any // types.Type or *Slot
	Def  *Op // nil for parameters and induction variables
	Name string
}

// Basic returns the value's scalar type or nil.
func (v *Value) Basic() *types.Basic {
	b, _ := v.Type.(*types.Basic)
	return b
}

// Op is one operation.
type Op struct {
	Code    Code
	Sub     int
	Args    []*Value
	Result  *Value
	Regions []*Block

	Int    int64
	Float  float64
	Str    string
	Type   types.Type // cast target, inf/alloc/shared element type
	Width  int        // lanes of a vector load/store (0: scalar)
	Checks []uint8    // per index of a load/store: CheckLower|CheckUpper still to test at run time
	Bit    uint32     // violation bit set when a check fails
	Unroll bool       // scf.for: unroll fully
	Pos    token.Pos
}

// Block is a list of ops with block arguments (the induction variable of scf.for).
type Block struct {
	Args []*Value
	Ops  []*Op
}

// Func is a kernel's device function.
type Func struct {
	Name   string
	Params []*Value // in parameter order; buffers have *types.Buffer type
	Body   *Block
	nextID int
	// Launch holds the launch program as computed inside the device function (for the launch
	// check); Grid/BlockDim are its results.
	GridDim, BlockDim [3]*Value
	Shared            *Value
	Filename          string
}

// NewValue creates a fresh value.
func (f *Func) NewValue(t any, name string) *Value {
	f.nextID++
	return &Value{ID: f.nextID, Type: t, Name: name}
}

// Launch is a kernel's launch program over its workload parameters.
type Launch struct {
	Params            []*Value
	Body              *Block
	GridDim, BlockDim [3]*Value
	Shared            *Value
	nextID            int
}

// NewValue creates a fresh value in the launch program.
func (l *Launch) NewValue(t any, name string) *Value {
	l.nextID++
	return &Value{ID: l.nextID, Type: t, Name: name}
}

// Pure reports whether op has no effect besides its result (it may be removed or moved when
// its operands are available).
func (op *Op) Pure() bool {
	switch op.Code {
	case OpConst, OpSpec, OpBinary, OpCmp, OpUnary, OpCast, OpSelect, OpFma, OpSplat, OpReduce,
		OpInf, OpThreadID, OpBlockID, OpBufLen:
		// Integer division by a non-constant is made total by the code generator (x/0 == 0).
		return true
	}
	return false
}

// IsConst reports whether v is defined by a constant op.
func IsConst(v *Value) bool { return v != nil && v.Def != nil && v.Def.Code == OpConst }

// ConstInt returns the integer value of a constant (or false).
func ConstInt(v *Value) (int64, bool) {
	if !IsConst(v) {
		return 0, false
	}
	if b := v.Basic(); b != nil && (b.IsInteger() || b.IsBool()) {
		return v.Def.Int, true
	}
	return 0, false
}

// Walk calls fn for every op in b, depth first, regions after their op.
func Walk(b *Block, fn func(op *Op)) {
	for _, op := range b.Ops {
		fn(op)
		for _, r := range op.Regions {
			Walk(r, fn)
		}
	}
}

// WrapInt truncates v to the width of integer type b (sign- or zero-extending back to 64 bits).
func WrapInt(v int64, b *types.Basic) int64 {
	switch b.Kind() {
	case types.I1:
		return v & 1
	case types.I8:
		return int64(int8(v))
	case types.I16:
		return int64(int16(v))
	case types.I32:
		return int64(int32(v))
	case types.U8:
		return int64(uint8(v))
	case types.U16:
		return int64(uint16(v))
	case types.U32:
		return int64(uint32(v))
	}
	return v
}

// RoundFloat rounds f to the precision of float type b.
func RoundFloat(f float64, b *types.Basic) float64 {
	switch b.Kind() {
	case types.F32:
		return float64(float32(f))
	case types.F16:
		return float64(F16ToF32(F32ToF16(float32(f))))
	case types.BF16:
		return float64(BF16ToF32(F32ToBF16(float32(f))))
	}
	return f
}

// F32ToF16 converts with round-to-nearest-even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b >> 23) & 0xff)
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & ((1 << shift) - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++
	}
	return sign | uint16(r)
}

// F16ToF32 converts exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToBF16 converts with round-to-nearest-even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToF32 converts exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func itoa(v int64) string {
	if v == 0 {
		return "0"
	}
	neg := v < 0
	var buf [24]byte
	i := len(buf)
	u := uint64(v)
	if neg {
		u = uint64(-v)
	}
	for u > 0 {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
	}
	if neg {
		i--
		buf[i] = '-'
	}
	return string(buf[i:])
}
