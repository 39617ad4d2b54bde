package infer

import (
	"sort"
	"strconv"
	"strings"

	"github.com/loomrt/loom/go/graph"
)

// linForm is a symbolic dimension as a linear combination of atoms (dimension names, or
// opaque quotients and products) plus a constant. Dimensions built by inference arithmetic are
// rendered canonically from it, so that (S+T)-S comes back as T and equal sizes derived in
// different ways get equal names.
type linForm struct {
	c     int64
	terms map[string]int64
}

func atomForm(name string) linForm { return linForm{terms: map[string]int64{name: 1}} }

// parseLin reads a dimension name: a canonical rendering is split back into its terms at the
// top level; anything else is one atom.
func parseLin(s string) linForm {
	f := linForm{terms: map[string]int64{}}
	if s == "" {
		return f
	}
	depth, start := 0, 0
	var parts []string
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case '+', '-':
			if depth == 0 && i > start {
				parts = append(parts, s[start:i])
				start = i
			}
		}
	}
	parts = append(parts, s[start:])
	if depth != 0 || len(parts) == 1 && !strings.HasPrefix(s, "-") && !isCanonicalTerm(s) {
		return atomForm(s)
	}
	for _, p := range parts {
		sign := int64(1)
		switch {
		case strings.HasPrefix(p, "+"):
			p = p[1:]
		case strings.HasPrefix(p, "-"):
			sign, p = -1, p[1:]
		}
		if p == "" {
			return atomForm(s)
		}
		if v, err := strconv.ParseInt(p, 10, 64); err == nil {
			f.c += sign * v
			continue
		}
		coef := int64(1)
		if k, rest, ok := strings.Cut(p, "*"); ok {
			if v, err := strconv.ParseInt(k, 10, 64); err == nil {
				coef, p = v, rest
			}
		}
		f.terms[p] += sign * coef
	}
	return f
}

// isCanonicalTerm recognizes the single-term renderings "k*atom".
func isCanonicalTerm(s string) bool {
	k, _, ok := strings.Cut(s, "*")
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(k, 10, 64)
	return err == nil
}

func (f linForm) constant() (int64, bool) {
	for _, k := range f.terms {
		if k != 0 {
			return 0, false
		}
	}
	return f.c, true
}

func (f linForm) add(g linForm, sign int64) linForm {
	out := linForm{c: f.c + sign*g.c, terms: map[string]int64{}}
	for a, k := range f.terms {
		out.terms[a] += k
	}
	for a, k := range g.terms {
		out.terms[a] += sign * k
	}
	return out
}

func (f linForm) scale(k int64) linForm {
	out := linForm{c: f.c * k, terms: map[string]int64{}}
	for a, v := range f.terms {
		out.terms[a] = v * k
	}
	return out
}

// render writes the canonical name: atoms sorted, coefficients as "k*", the constant last.
func (f linForm) render() string {
	var atoms []string
	for a, k := range f.terms {
		if k != 0 {
			atoms = append(atoms, a)
		}
	}
	sort.Strings(atoms)
	var b strings.Builder
	for _, a := range atoms {
		k := f.terms[a]
		if k < 0 {
			b.WriteString("-")
			k = -k
		} else if b.Len() > 0 {
			b.WriteString("+")
		}
		if k != 1 {
			b.WriteString(strconv.FormatInt(k, 10) + "*")
		}
		b.WriteString(a)
	}
	if f.c != 0 || b.Len() == 0 {
		if f.c >= 0 && b.Len() > 0 {
			b.WriteString("+")
		}
		b.WriteString(strconv.FormatInt(f.c, 10))
	}
	return b.String()
}

func dimForm(d graph.Dim) (linForm, bool) {
	if d.Known() {
		return linForm{c: d.Value, terms: map[string]int64{}}, true
	}
	if d.Param == "" {
		return linForm{}, false
	}
	return parseLin(d.Param), true
}

func formDim(f linForm) graph.Dim {
	if c, ok := f.constant(); ok {
		if c < 0 {
			return graph.UnknownDim()
		}
		return graph.DimOf(c)
	}
	return graph.SymDim(f.render())
}

// divForm divides by a positive constant: exactly when every coefficient divides, otherwise as
// an opaque floor (or ceil) quotient atom.
func divForm(f linForm, k int64, ceil bool) linForm {
	exact := f.c%k == 0
	for _, v := range f.terms {
		if v%k != 0 {
			exact = false
		}
	}
	if exact {
		out := linForm{c: f.c / k, terms: map[string]int64{}}
		for a, v := range f.terms {
			out.terms[a] = v / k
		}
		return out
	}
	op := "/"
	if ceil {
		op = "/^"
	}
	return atomForm("(" + f.render() + ")" + op + strconv.FormatInt(k, 10))
}

func mulForm(f, g linForm) linForm {
	if c, ok := f.constant(); ok {
		return g.scale(c)
	}
	if c, ok := g.constant(); ok {
		return f.scale(c)
	}
	a, b := f.render(), g.render()
	if b < a {
		a, b = b, a
	}
	return atomForm("(" + a + ")*(" + b + ")")
}
