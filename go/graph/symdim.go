package graph

import (
	"strconv"
)

// symInt is one element of a small integer tensor whose contents shape inference tracks: a known
// number, a symbolic dimension name (or expression), or unknown.
type symInt struct {
	v     int64
	known bool
	sym   string
}

func knownInt(v int64) symInt { return symInt{v: v, known: true} }

func (s symInt) dim() Dim {
	if s.known {
		if s.v < 0 {
			return UnknownDim()
		}
		return DimOf(s.v)
	}
	if s.sym != "" {
		return SymDim(s.sym)
	}
	return UnknownDim()
}

func symFromDim(d Dim) symInt {
	if d.Known() {
		return knownInt(d.Value)
	}
	return symInt{sym: d.Param}
}

// symData is the tracked content of a small integer tensor: a scalar or a 1-D list.
type symData struct {
	vals   []symInt
	scalar bool
}

// The dimension arithmetic below keeps numbers exact and symbolic sizes as canonical linear
// forms (see linForm); a result that is negative or depends on an unknown size is unknown.

func dimBinary(a, b Dim, fn func(x, y linForm) linForm) Dim {
	x, ok1 := dimForm(a)
	y, ok2 := dimForm(b)
	if !ok1 || !ok2 {
		return UnknownDim()
	}
	return formDim(fn(x, y))
}

func dimAdd(a, b Dim) Dim {
	return dimBinary(a, b, func(x, y linForm) linForm { return x.add(y, 1) })
}

func dimSub(a, b Dim) Dim {
	return dimBinary(a, b, func(x, y linForm) linForm { return x.add(y, -1) })
}

func dimMul(a, b Dim) Dim {
	if (a.Known() && a.Value == 0) || (b.Known() && b.Value == 0) {
		return DimOf(0)
	}
	return dimBinary(a, b, mulForm)
}

// dimAddConst adds a constant that may be negative.
func dimAddConst(a Dim, k int64) Dim {
	if a.Known() {
		if a.Value+k < 0 {
			return UnknownDim()
		}
		return DimOf(a.Value + k)
	}
	f, ok := dimForm(a)
	if !ok {
		return UnknownDim()
	}
	f = f.add(linForm{c: k}, 1)
	return formDim(f)
}

// dimDiv divides by a positive constant, rounding down (or up when ceil is set).
func dimDiv(a Dim, k int64, ceil bool) Dim {
	if k <= 0 {
		return UnknownDim()
	}
	if a.Known() {
		if ceil {
			return DimOf((a.Value + k - 1) / k)
		}
		return DimOf(a.Value / k)
	}
	f, ok := dimForm(a)
	if !ok {
		return UnknownDim()
	}
	return formDim(divForm(f, k, ceil))
}

func (s symInt) String() string {
	if s.known {
		return strconv.FormatInt(s.v, 10)
	}
	if s.sym != "" {
		return s.sym
	}
	return "?"
}

func symArith(op string, a, b symInt) symInt {
	if a.known && b.known {
		switch op {
		case "+":
			return knownInt(a.v + b.v)
		case "-":
			return knownInt(a.v - b.v)
		case "*":
			return knownInt(a.v * b.v)
		case "/":
			if b.v == 0 {
				return symInt{}
			}
			return knownInt(a.v / b.v) // ONNX integer Div truncates, as Go does
		case "==":
			return knownInt(boolInt(a.v == b.v))
		case "<":
			return knownInt(boolInt(a.v < b.v))
		case ">":
			return knownInt(boolInt(a.v > b.v))
		}
		return symInt{}
	}
	if op == "==" || op == "<" || op == ">" {
		if op == "==" && !a.known && !b.known && a.sym != "" && a.sym == b.sym {
			return knownInt(1)
		}
		return symInt{}
	}
	x, ok1 := symForm(a)
	y, ok2 := symForm(b)
	if !ok1 || !ok2 {
		return symInt{}
	}
	var f linForm
	switch op {
	case "+":
		f = x.add(y, 1)
	case "-":
		f = x.add(y, -1)
	case "*":
		f = mulForm(x, y)
	case "/":
		k, isConst := y.constant()
		if !isConst || k <= 0 {
			return symInt{}
		}
		f = divForm(x, k, false)
	default:
		return symInt{}
	}
	if c, ok := f.constant(); ok {
		return knownInt(c)
	}
	return symInt{sym: f.render()}
}

func symForm(s symInt) (linForm, bool) {
	if s.known {
		return linForm{c: s.v, terms: map[string]int64{}}, true
	}
	if s.sym == "" {
		return linForm{}, false
	}
	return parseLin(s.sym), true
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
