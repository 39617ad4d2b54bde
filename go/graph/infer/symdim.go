package infer

import (
	"strconv"

	"github.com/loomrt/loom/go/graph"
)

// symInt is one element of a small integer tensor whose contents shape inference tracks: a known
// number, a symbolic dimension name (or expression), or unknown.
type symInt struct {
	v     int64
	known bool
	sym   string
}

func knownInt(v int64) symInt { return symInt{v: v, known: true} }

func (s symInt) dim() graph.Dim {
	if s.known {
		if s.v < 0 {
			return graph.UnknownDim()
		}
		return graph.DimOf(s.v)
	}
	if s.sym != "" {
		return graph.SymDim(s.sym)
	}
	return graph.UnknownDim()
}

func symFromDim(d graph.Dim) symInt {
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

func dimBinary(a, b graph.Dim, fn func(x, y linForm) linForm) graph.Dim {
	x, ok1 := dimForm(a)
	y, ok2 := dimForm(b)
	if !ok1 || !ok2 {
		return graph.UnknownDim()
	}
	return formDim(fn(x, y))
}

func dimAdd(a, b graph.Dim) graph.Dim {
	return dimBinary(a, b, func(x, y linForm) linForm { return x.add(y, 1) })
}

func dimSub(a, b graph.Dim) graph.Dim {
	return dimBinary(a, b, func(x, y linForm) linForm { return x.add(y, -1) })
}

func dimMul(a, b graph.Dim) graph.Dim {
	if (a.Known() && a.Value == 0) || (b.Known() && b.Value == 0) {
		return graph.DimOf(0)
	}
	return dimBinary(a, b, mulForm)
}

// dimAddConst adds a constant that may be negative.
func dimAddConst(a graph.Dim, k int64) graph.Dim {
	if a.Known() {
		if a.Value+k < 0 {
			return graph.UnknownDim()
		}
		return graph.DimOf(a.Value + k)
	}
	f, ok := dimForm(a)
	if !ok {
		return graph.UnknownDim()
	}
	f = f.add(linForm{c: k}, 1)
	return formDim(f)
}

// dimDiv divides by a positive constant, rounding down (or up when ceil is set).
func dimDiv(a graph.Dim, k int64, ceil bool) graph.Dim {
	if k <= 0 {
		return graph.UnknownDim()
	}
	if a.Known() {
		if ceil {
			return graph.DimOf((a.Value + k - 1) / k)
		}
		return graph.DimOf(a.Value / k)
	}
	f, ok := dimForm(a)
	if !ok {
		return graph.UnknownDim()
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
