package ir

import (
	"math"

	"github.com/loomrt/loom/go/loom/types"
)

// EvalInt evaluates an integer binary op with Loom's semantics: wrapping arithmetic, x/0 == 0,
// x%0 == x, shift counts masked to the width, ceil_div by a non-positive divisor == 0.
func EvalInt(sub int, x, y int64, t *types.Basic) int64 {
	unsigned := t.IsUnsigned()
	bits := uint(t.Bits())
	if t.IsBool() {
		bits = 1
	}
	ux, uy := uint64(x), uint64(y)
	if unsigned && bits < 64 {
		mask := uint64(1)<<bits - 1
		ux, uy = ux&mask, uy&mask
	}
	var r int64
	switch sub {
	case BinAdd:
		r = x + y
	case BinSub:
		r = x - y
	case BinMul:
		r = x * y
	case BinDiv:
		switch {
		case y == 0:
			r = 0
		case unsigned:
			r = int64(ux / uy)
		case y == -1:
			r = -x
		default:
			r = x / y
		}
	case BinRem:
		switch {
		case y == 0:
			r = x
		case unsigned:
			r = int64(ux % uy)
		case y == -1:
			r = 0
		default:
			r = x % y
		}
	case BinAnd:
		r = x & y
	case BinOr:
		r = x | y
	case BinXor:
		r = x ^ y
	case BinShl:
		r = x << (uy & uint64(maxInt(bits, 1)-1))
	case BinShr:
		s := uy & uint64(maxInt(bits, 1)-1)
		if unsigned {
			r = int64(ux >> s)
		} else {
			r = x >> s
		}
	case BinMin:
		if CmpInt(CmpLt, y, x, unsigned) {
			r = y
		} else {
			r = x
		}
	case BinMax:
		if CmpInt(CmpGt, y, x, unsigned) {
			r = y
		} else {
			r = x
		}
	case BinCeilDiv:
		switch {
		case unsigned:
			if uy == 0 {
				r = 0
			} else {
				q := ux / uy
				if ux%uy != 0 {
					q++
				}
				r = int64(q)
			}
		case y <= 0:
			r = 0
		default:
			q := x / y
			if x%y > 0 {
				q++
			}
			r = q
		}
	}
	return WrapInt(r, t)
}

func maxInt(a uint, b uint) uint {
	if a > b {
		return a
	}
	return b
}

// CmpInt compares integers (unsigned when asked).
func CmpInt(sub int, x, y int64, unsigned bool) bool {
	if unsigned {
		ux, uy := uint64(x), uint64(y)
		switch sub {
		case CmpEq:
			return ux == uy
		case CmpNe:
			return ux != uy
		case CmpLt:
			return ux < uy
		case CmpLe:
			return ux <= uy
		case CmpGt:
			return ux > uy
		case CmpGe:
			return ux >= uy
		}
	}
	switch sub {
	case CmpEq:
		return x == y
	case CmpNe:
		return x != y
	case CmpLt:
		return x < y
	case CmpLe:
		return x <= y
	case CmpGt:
		return x > y
	case CmpGe:
		return x >= y
	}
	return false
}

// ConvertConst converts a constant between basic types with Loom's conversion semantics:
// integers wrap, floats round to nearest, float→integer truncates toward zero and saturates
// (NaN → 0), anything → i1 is "!= 0".
func ConvertConst(i int64, f float64, from, to *types.Basic) (int64, float64) {
	if from == nil || to == nil {
		return i, f
	}
	switch {
	case to.IsBool():
		if from.IsFloat() {
			if f != 0 {
				return 1, 0
			}
			return 0, 0
		}
		if i != 0 {
			return 1, 0
		}
		return 0, 0
	case to.IsFloat():
		if from.IsFloat() {
			return 0, RoundFloat(f, to)
		}
		if from.IsUnsigned() && from.Bits() == 64 {
			return 0, RoundFloat(float64(uint64(i)), to)
		}
		return 0, RoundFloat(float64(i), to)
	default: // integer target
		if from.IsFloat() {
			return SaturateFloat(f, to), 0
		}
		return WrapInt(i, to), 0
	}
}

// SaturateFloat converts a float to an integer type, truncating toward zero and clamping to the
// type's range (NaN → 0).
func SaturateFloat(f float64, to *types.Basic) int64 {
	if math.IsNaN(f) {
		return 0
	}
	f = math.Trunc(f)
	bits := to.Bits()
	if to.IsUnsigned() {
		if f <= 0 {
			return 0
		}
		max := math.Ldexp(1, bits) // exclusive
		if f >= max {
			if bits == 64 {
				return -1 // all ones
			}
			return int64(uint64(1)<<uint(bits) - 1)
		}
		return int64(uint64(f))
	}
	lim := math.Ldexp(1, bits-1)
	if f >= lim {
		return int64(uint64(1)<<uint(bits-1) - 1)
	}
	if f < -lim {
		return -int64(uint64(1) << uint(bits-1))
	}
	return int64(f)
}
