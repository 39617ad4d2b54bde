// Package types type-checks Loom kernels: it resolves names, infers and checks types, folds
// constant expressions (specialization constants included) and enforces the access contract of
// buffer bindings.
package types

import (
	"fmt"
	"strings"
)

// Kind enumerates the basic (scalar) types.
type Kind uint8

// Basic kinds. Index is the 64-bit signed integer used for sizes, offsets and indices.
const (
	Invalid Kind = iota
	I1
	I8
	I16
	I32
	I64
	U8
	U16
	U32
	U64
	F16
	BF16
	F32
	F64
	Index
	UntypedInt
	UntypedFloat
	UntypedBool
)

// Type is a Loom type.
type Type interface {
	String() string
	isType()
}

// Basic is a scalar type.
type Basic struct {
	kind Kind
	name string
	size int
}

// Typ holds the basic types by kind.
var Typ = [...]*Basic{
	Invalid:      {Invalid, "invalid type", 0},
	I1:           {I1, "i1", 1},
	I8:           {I8, "i8", 1},
	I16:          {I16, "i16", 2},
	I32:          {I32, "i32", 4},
	I64:          {I64, "i64", 8},
	U8:           {U8, "u8", 1},
	U16:          {U16, "u16", 2},
	U32:          {U32, "u32", 4},
	U64:          {U64, "u64", 8},
	F16:          {F16, "f16", 2},
	BF16:         {BF16, "bf16", 2},
	F32:          {F32, "f32", 4},
	F64:          {F64, "f64", 8},
	Index:        {Index, "index", 8},
	UntypedInt:   {UntypedInt, "untyped int", 0},
	UntypedFloat: {UntypedFloat, "untyped float", 0},
	UntypedBool:  {UntypedBool, "untyped bool", 0},
}

// Kind returns the basic kind.
func (b *Basic) Kind() Kind { return b.kind }

// String returns the type's name.
func (b *Basic) String() string { return b.name }

// Size returns the size in bytes of a value in memory (i1 takes one byte).
func (b *Basic) Size() int { return b.size }

// IsInteger reports whether b is an integer type (index included, i1 excluded).
func (b *Basic) IsInteger() bool {
	return b.kind >= I8 && b.kind <= U64 || b.kind == Index || b.kind == UntypedInt
}

// IsSigned reports whether b is a signed integer type.
func (b *Basic) IsSigned() bool {
	return b.kind >= I8 && b.kind <= I64 || b.kind == Index || b.kind == UntypedInt
}

// IsUnsigned reports whether b is an unsigned integer type.
func (b *Basic) IsUnsigned() bool { return b.kind >= U8 && b.kind <= U64 }

// IsFloat reports whether b is a floating-point type.
func (b *Basic) IsFloat() bool { return b.kind >= F16 && b.kind <= F64 || b.kind == UntypedFloat }

// IsNumeric reports whether b is an integer or floating-point type.
func (b *Basic) IsNumeric() bool { return b.IsInteger() || b.IsFloat() }

// IsBool reports whether b is i1 or an untyped boolean.
func (b *Basic) IsBool() bool { return b.kind == I1 || b.kind == UntypedBool }

// IsUntyped reports whether b is an untyped constant type.
func (b *Basic) IsUntyped() bool { return b.kind >= UntypedInt }

// Bits returns the width in bits of an integer or float type (1 for i1).
func (b *Basic) Bits() int {
	if b.kind == I1 {
		return 1
	}
	return b.size * 8
}

// Access is the access mode of a buffer binding.
type Access uint8

// Access modes.
const (
	Read Access = 1 << iota
	Write
	ReadWrite = Read | Write
)

// String spells the mode as in source.
func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	case ReadWrite:
		return "read_write"
	}
	return "no access"
}

// Vector is vec[Len]Elem.
type Vector struct {
	Elem *Basic
	Len  int
}

// String spells the type as in source.
func (v *Vector) String() string { return fmt.Sprintf("vec[%d]%s", v.Len, v.Elem) }

// Buffer is a buffer binding: a kernel parameter with an access mode.
type Buffer struct {
	Elem   *Basic
	Access Access
}

// String spells the type with its access mode.
func (b *Buffer) String() string { return fmt.Sprintf("buffer[%s] %s", b.Elem, b.Access) }

// View is a strided, shaped window of a buffer (or of the block's shared scratch).
type View struct {
	Elem   *Basic
	Rank   int
	Access Access
	Shared bool
}

// String describes the view type.
func (v *View) String() string {
	s := fmt.Sprintf("view[%s, %d] %s", v.Elem, v.Rank, v.Access)
	if v.Shared {
		s = "shared " + s
	}
	return s
}

// Array is a fixed-size local array [Len]Elem, kept in registers when its indices fold to
// constants.
type Array struct {
	Elem Type
	Len  int
}

// String spells the type as in source.
func (a *Array) String() string { return fmt.Sprintf("[%d]%s", a.Len, a.Elem) }

// Dims returns the array's dimensions and its innermost element type.
func (a *Array) Dims() ([]int, Type) {
	var dims []int
	var t Type = a
	for {
		at, ok := t.(*Array)
		if !ok {
			return dims, t
		}
		dims = append(dims, at.Len)
		t = at.Elem
	}
}

// Tuple is the type of a (a, b, c) expression.
type Tuple struct{ Elems []Type }

// String lists the element types.
func (t *Tuple) String() string {
	var parts []string
	for _, e := range t.Elems {
		parts = append(parts, e.String())
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (*Basic) isType()  {}
func (*Vector) isType() {}
func (*Buffer) isType() {}
func (*View) isType()   {}
func (*Array) isType()  {}
func (*Tuple) isType()  {}

// Identical reports whether t and u are the same type.
func Identical(t, u Type) bool {
	switch t := t.(type) {
	case *Basic:
		u, ok := u.(*Basic)
		return ok && t.kind == u.kind
	case *Vector:
		u, ok := u.(*Vector)
		return ok && t.Len == u.Len && t.Elem.kind == u.Elem.kind
	case *Buffer:
		u, ok := u.(*Buffer)
		return ok && t.Access == u.Access && t.Elem.kind == u.Elem.kind
	case *View:
		u, ok := u.(*View)
		return ok && t.Rank == u.Rank && t.Access == u.Access && t.Shared == u.Shared && t.Elem.kind == u.Elem.kind
	case *Array:
		u, ok := u.(*Array)
		return ok && t.Len == u.Len && Identical(t.Elem, u.Elem)
	}
	return false
}

// IsInvalid reports whether t is the invalid type (after an error).
func IsInvalid(t Type) bool {
	b, ok := t.(*Basic)
	return t == nil || ok && b.kind == Invalid
}

// Elem returns the scalar element type of a basic, vector, buffer or view type, else nil.
func Elem(t Type) *Basic {
	switch t := t.(type) {
	case *Basic:
		return t
	case *Vector:
		return t.Elem
	case *Buffer:
		return t.Elem
	case *View:
		return t.Elem
	}
	return nil
}

// LookupBasic returns the basic type spelled name ("f32"), or nil.
func LookupBasic(name string) *Basic {
	for _, b := range Typ[I1 : Index+1] {
		if b.name == name {
			return b
		}
	}
	return nil
}
