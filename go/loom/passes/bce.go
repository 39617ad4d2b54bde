package passes

import (
	"math"
	"math/bits"
	"slices"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/types"
)

// BCEStats counts what bounds-check elimination did.
type BCEStats struct {
	Accesses int // loads and stores with at least one index
	Proven   int // of those, accesses left with no run-time check at all
	Checks   int // individual checks remaining
}

// EliminateBoundsChecks clears the lower/upper checks of every load and store index it can prove
// in range from: loop bounds, enclosing if conditions, assume statements, the launch geometry
// (verified at block entry), min/max/ceil_div relations and value ranges. Facts are linear
// inequalities over atoms; a goal is proven when its negation is infeasible (Fourier–Motzkin
// elimination with integer tightening). Linear forms are only built where interval analysis shows
// the arithmetic cannot wrap, so proofs hold for the machine's 64-bit arithmetic.
func EliminateBoundsChecks(f *ir.Func) BCEStats {
	p := &prover{
		f:      f,
		lins:   map[*ir.Value]*lin{},
		ivals:  map[*ir.Value]interval{},
		ivBnds: map[*ir.Value][2]*ir.Value{},
		ivStep: map[*ir.Value]int64{},

		atomRows: map[*ir.Value][]row{},
	}
	var st BCEStats
	p.walk(f.Body, &st)
	return st
}

type interval struct {
	lo, hi int64
	ok     bool
}

// lin is Σ terms[a]*a + c over atoms a (values that are not decomposed further).
type lin struct {
	terms map[*ir.Value]int64
	c     int64
}

type row struct {
	terms map[*ir.Value]int64
	c     int64
} // Σ terms + c >= 0

type prover struct {
	f      *ir.Func
	lins   map[*ir.Value]*lin
	ivals  map[*ir.Value]interval
	ivBnds map[*ir.Value][2]*ir.Value // induction variable -> lo, hi
	ivStep map[*ir.Value]int64
	facts  []row
	elim   elim
	// atomRows are atomFacts' rows by atom.
	atomRows map[*ir.Value][]row
}

const bigBound = int64(1) << 61

func typeRange(t any) interval {
	b, ok := t.(*types.Basic)
	if !ok {
		return interval{}
	}
	switch b.Kind() {
	case types.I1:
		return interval{0, 1, true}
	case types.I8:
		return interval{math.MinInt8, math.MaxInt8, true}
	case types.I16:
		return interval{math.MinInt16, math.MaxInt16, true}
	case types.I32:
		return interval{math.MinInt32, math.MaxInt32, true}
	case types.U8:
		return interval{0, math.MaxUint8, true}
	case types.U16:
		return interval{0, math.MaxUint16, true}
	case types.U32:
		return interval{0, math.MaxUint32, true}
	}
	return interval{}
}

func addOv(a, b int64) (int64, bool) {
	s := a + b
	return s, (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0)
}

func mulOv(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(abs64(a)), uint64(abs64(b)))
	if hi != 0 || lo > math.MaxInt64 || a == math.MinInt64 || b == math.MinInt64 {
		return 0, true
	}
	r := int64(lo)
	if (a < 0) != (b < 0) {
		r = -r
	}
	return r, false
}

func abs64(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

func within(iv interval, t any) bool {
	if !iv.ok {
		return false
	}
	if iv.lo < -bigBound || iv.hi > bigBound {
		return false
	}
	tr := typeRange(t)
	if tr.ok && (iv.lo < tr.lo || iv.hi > tr.hi) {
		return false
	}
	return true
}

// ival computes a value's range (ok=false: unknown).
func (p *prover) ival(v *ir.Value) interval {
	if r, ok := p.ivals[v]; ok {
		return r
	}
	p.ivals[v] = interval{} // cycle guard
	r := p.ival0(v)
	if r.ok && (r.lo < -bigBound || r.hi > bigBound) {
		r = interval{}
	}
	if !r.ok {
		r = typeRange(v.Type)
	}
	p.ivals[v] = r
	return r
}

func (p *prover) ival0(v *ir.Value) interval {
	if bt := v.Basic(); bt == nil || !(bt.IsInteger() || bt.IsBool()) {
		if _, isBuf := v.Type.(*types.Buffer); isBuf {
			return interval{0, bigBound, true} // a buffer stands for its length
		}
		return interval{}
	}
	if bnd, ok := p.ivBnds[v]; ok {
		lo, hi := p.ival(bnd[0]), p.ival(bnd[1])
		if lo.ok && hi.ok {
			return interval{lo.lo, hi.hi - 1, true}
		}
		return interval{}
	}
	op := v.Def
	if op == nil {
		for _, prm := range p.f.Params {
			if prm == v && v.Basic().Kind() == types.Index {
				return interval{-ir.IndexParamLimit, ir.IndexParamLimit, true}
			}
		}
		return interval{}
	}
	switch op.Code {
	case ir.OpConst:
		return interval{op.Int, op.Int, true}
	case ir.OpThreadID, ir.OpBlockID:
		return interval{0, math.MaxUint32, true}
	case ir.OpBufLen:
		return interval{0, bigBound, true}
	case ir.OpCast:
		x := op.Args[0]
		if xb := x.Basic(); xb != nil && (xb.IsInteger() || xb.IsBool()) {
			r := p.ival(x)
			if within(r, v.Type) {
				return r
			}
		}
		return interval{}
	case ir.OpSelect:
		a, b := p.ival(op.Args[1]), p.ival(op.Args[2])
		if a.ok && b.ok {
			return interval{min64(a.lo, b.lo), max64(a.hi, b.hi), true}
		}
	case ir.OpBinary:
		if v.Basic().IsUnsigned() {
			return interval{}
		}
		a, b := p.ival(op.Args[0]), p.ival(op.Args[1])
		if !a.ok || !b.ok {
			if op.Sub == ir.BinRem && b.ok && b.lo > 0 && a.ok {
				return interval{}
			}
			return interval{}
		}
		switch op.Sub {
		case ir.BinAdd:
			lo, o1 := addOv(a.lo, b.lo)
			hi, o2 := addOv(a.hi, b.hi)
			if !o1 && !o2 {
				return interval{lo, hi, true}
			}
		case ir.BinSub:
			lo, o1 := addOv(a.lo, -b.hi)
			hi, o2 := addOv(a.hi, -b.lo)
			if !o1 && !o2 {
				return interval{lo, hi, true}
			}
		case ir.BinMul:
			c := [4]int64{}
			var ov bool
			for i, pr := range [4][2]int64{{a.lo, b.lo}, {a.lo, b.hi}, {a.hi, b.lo}, {a.hi, b.hi}} {
				var o bool
				c[i], o = mulOv(pr[0], pr[1])
				ov = ov || o
			}
			if !ov {
				return interval{min64(min64(c[0], c[1]), min64(c[2], c[3])), max64(max64(c[0], c[1]), max64(c[2], c[3])), true}
			}
		case ir.BinMin:
			return interval{min64(a.lo, b.lo), min64(a.hi, b.hi), true}
		case ir.BinMax:
			return interval{max64(a.lo, b.lo), max64(a.hi, b.hi), true}
		case ir.BinDiv:
			if b.lo > 0 {
				return interval{min64(a.lo/b.lo, a.lo/b.hi), max64(a.hi/b.lo, a.hi/b.hi), true}
			}
		case ir.BinCeilDiv:
			if b.lo > 0 {
				return interval{min64(ceilDiv(a.lo, b.lo), ceilDiv(a.lo, b.hi)), max64(ceilDiv(a.hi, b.lo), ceilDiv(a.hi, b.hi)), true}
			}
		case ir.BinRem:
			if b.lo > 0 {
				if a.lo >= 0 {
					return interval{0, min64(a.hi, b.hi-1), true}
				}
				return interval{-(b.hi - 1), b.hi - 1, true}
			}
		case ir.BinAnd:
			if a.lo >= 0 && b.lo >= 0 {
				return interval{0, min64(a.hi, b.hi), true}
			}
		case ir.BinShr:
			if a.lo >= 0 && b.lo >= 0 {
				return interval{0, a.hi, true}
			}
		}
	case ir.OpCmp:
		return interval{0, 1, true}
	}
	return interval{}
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func atom(v *ir.Value) *lin { return &lin{terms: map[*ir.Value]int64{v: 1}} }

func (l *lin) clone() *lin {
	n := &lin{terms: make(map[*ir.Value]int64, len(l.terms)), c: l.c}
	for k, v := range l.terms {
		n.terms[k] = v
	}
	return n
}

// add returns l + k*m, or nil on overflow.
func (l *lin) add(m *lin, k int64) *lin {
	n := l.clone()
	for a, c := range m.terms {
		kc, o1 := mulOv(c, k)
		s, o2 := addOv(n.terms[a], kc)
		if o1 || o2 {
			return nil
		}
		if s == 0 {
			delete(n.terms, a)
		} else {
			n.terms[a] = s
		}
	}
	kc, o1 := mulOv(m.c, k)
	s, o2 := addOv(n.c, kc)
	if o1 || o2 {
		return nil
	}
	n.c = s
	return n
}

// linear returns v's linear form over atoms.
func (p *prover) linear(v *ir.Value) *lin {
	if l, ok := p.lins[v]; ok {
		return l
	}
	l := p.linear0(v)
	if l == nil {
		l = atom(v)
	}
	p.lins[v] = l
	return l
}

func (p *prover) linear0(v *ir.Value) *lin {
	op := v.Def
	if op == nil {
		return nil
	}
	switch op.Code {
	case ir.OpConst:
		if b := v.Basic(); b != nil && (b.IsInteger() || b.IsBool()) {
			return &lin{terms: map[*ir.Value]int64{}, c: op.Int}
		}
	case ir.OpBufLen:
		return atom(op.Args[0])
	case ir.OpCast:
		x := op.Args[0]
		if xb := x.Basic(); xb != nil && xb.IsInteger() && within(p.ival(x), v.Type) {
			return p.linear(x)
		}
	case ir.OpBinary:
		if b := v.Basic(); b == nil || !b.IsInteger() || b.IsUnsigned() || !within(p.ival(v), v.Type) {
			return nil
		}
		x, y := p.linear(op.Args[0]), p.linear(op.Args[1])
		switch op.Sub {
		case ir.BinAdd:
			return x.add(y, 1)
		case ir.BinSub:
			return x.add(y, -1)
		case ir.BinMul:
			if len(x.terms) == 0 {
				x, y = y, x
			}
			if len(y.terms) == 0 {
				return (&lin{terms: map[*ir.Value]int64{}}).add(x, y.c)
			}
		}
	case ir.OpUnary:
		if op.Sub == ir.UnNeg {
			if b := v.Basic(); b != nil && b.IsInteger() && !b.IsUnsigned() && within(p.ival(v), v.Type) {
				return (&lin{terms: map[*ir.Value]int64{}}).add(p.linear(op.Args[0]), -1)
			}
		}
	}
	return nil
}

// atomFacts lists the inequalities that always hold for atom a (made once an atom: they
// read only the atom's interval, linear forms and loop bounds, which the prover caches too).
func (p *prover) atomFacts(a *ir.Value) []row {
	if rows, ok := p.atomRows[a]; ok {
		return rows
	}
	rows := p.atomFacts0(a)
	p.atomRows[a] = rows
	return rows
}

func (p *prover) atomFacts0(a *ir.Value) []row {
	var out []row
	iv := p.ival(a)
	if iv.ok {
		out = append(out, row{terms: map[*ir.Value]int64{a: 1}, c: -iv.lo})
		out = append(out, row{terms: map[*ir.Value]int64{a: -1}, c: iv.hi})
	}
	mk := func(l *lin) {
		if l != nil {
			out = append(out, row{terms: l.terms, c: l.c})
		}
	}
	if bnd, ok := p.ivBnds[a]; ok {
		// lo <= iv <= hi - 1, tighter when everything is constant
		mk(atom(a).add(p.linear(bnd[0]), -1))
		mk(p.linear(bnd[1]).add(atom(a), -1).add(&lin{terms: map[*ir.Value]int64{}, c: 1}, -1))
		if lo, ok1 := ir.ConstInt(bnd[0]); ok1 {
			if hi, ok2 := ir.ConstInt(bnd[1]); ok2 && hi > lo {
				st := p.ivStep[a]
				last := lo + (hi-1-lo)/st*st
				out = append(out, row{terms: map[*ir.Value]int64{a: -1}, c: last})
			}
		}
		return out
	}
	op := a.Def
	if op == nil {
		return out
	}
	switch op.Code {
	case ir.OpBlockID, ir.OpThreadID:
		d := op.Int
		lim := p.f.GridDim[d]
		if op.Code == ir.OpThreadID {
			lim = p.f.BlockDim[d]
		}
		if lim != nil {
			// id <= lim - 1 (the launch check at block entry guarantees the geometry)
			mk(p.linear(lim).add(atom(a), -1).add(&lin{terms: map[*ir.Value]int64{}, c: 1}, -1))
		}
	case ir.OpBinary:
		x, y := op.Args[0], op.Args[1]
		switch op.Sub {
		case ir.BinMin:
			mk(p.linear(x).add(atom(a), -1))
			mk(p.linear(y).add(atom(a), -1))
		case ir.BinMax:
			mk(atom(a).add(p.linear(x), -1))
			mk(atom(a).add(p.linear(y), -1))
		case ir.BinCeilDiv:
			if c, ok := ir.ConstInt(y); ok && c > 0 {
				// c*q >= x and c*q <= x + c - 1
				cq := (&lin{terms: map[*ir.Value]int64{}}).add(atom(a), c)
				if cq != nil {
					mk(cq.add(p.linear(x), -1))
					if t := p.linear(x).add(cq, -1); t != nil {
						t.c += c - 1
						mk(t)
					}
				}
			}
		case ir.BinDiv:
			if c, ok := ir.ConstInt(y); ok && c > 0 && p.ival(x).ok && p.ival(x).lo >= 0 {
				// c*q <= x <= c*q + c - 1
				cq := (&lin{terms: map[*ir.Value]int64{}}).add(atom(a), c)
				if cq != nil {
					mk(p.linear(x).add(cq, -1))
					if t := cq.add(p.linear(x), -1); t != nil {
						t.c += c - 1
						mk(t)
					}
				}
			}
		}
	}
	return out
}

// condFacts turns a condition known to be true (or false, when negated) into rows.
func (p *prover) condFacts(c *ir.Value, negate bool, depth int) []row {
	if depth > 8 || c.Def == nil {
		return nil
	}
	op := c.Def
	switch op.Code {
	case ir.OpBinary:
		if op.Sub == ir.BinAnd && !negate {
			return append(p.condFacts(op.Args[0], false, depth+1), p.condFacts(op.Args[1], false, depth+1)...)
		}
		if op.Sub == ir.BinOr && negate {
			return append(p.condFacts(op.Args[0], true, depth+1), p.condFacts(op.Args[1], true, depth+1)...)
		}
	case ir.OpUnary:
		if op.Sub == ir.UnNot {
			return p.condFacts(op.Args[0], !negate, depth+1)
		}
	case ir.OpCmp:
		xb := op.Args[0].Basic()
		if xb == nil || !xb.IsInteger() || xb.IsUnsigned() {
			return nil
		}
		x, y := p.linear(op.Args[0]), p.linear(op.Args[1])
		sub := op.Sub
		if negate {
			sub = map[int]int{ir.CmpLt: ir.CmpGe, ir.CmpLe: ir.CmpGt, ir.CmpGt: ir.CmpLe, ir.CmpGe: ir.CmpLt, ir.CmpEq: ir.CmpNe, ir.CmpNe: ir.CmpEq}[sub]
		}
		var out []row
		mk := func(l *lin, c int64) {
			if l != nil {
				out = append(out, row{terms: l.terms, c: l.c + c})
			}
		}
		switch sub {
		case ir.CmpLt:
			mk(y.add(x, -1), -1)
		case ir.CmpLe:
			mk(y.add(x, -1), 0)
		case ir.CmpGt:
			mk(x.add(y, -1), -1)
		case ir.CmpGe:
			mk(x.add(y, -1), 0)
		case ir.CmpEq:
			mk(y.add(x, -1), 0)
			mk(x.add(y, -1), 0)
		}
		return out
	}
	return nil
}

// maxSplits bounds the nesting of prove's case splits (each one doubles the proofs tried).
const maxSplits = 3

// prove reports whether goal >= 0 always holds: by the linear facts, or else by a case split
// on a min or max among its atoms. a = max(x, y) is x or y (integers), but its linear facts
// (a >= x, a >= y) bound it from below only: a goal that needs an upper bound of a (its
// coefficient negative) holds when it holds with x and with y in a's place. Likewise a min,
// bounded from above only, where the goal needs its lower bound. Where the goal needs the
// bound the facts give (a max's lower, a min's upper), it holds when it holds with either arm
// in a's place (c·max(x, y) >= c·x for c > 0), which reaches a min or max nested in an arm.
// So a clamped index, max(min(i, n - 1), 0), is proven below n (given n >= 1) and at least 0.
// Atoms are tried in the order of their IDs, so that a kernel compiles to the same code every
// time.
func (p *prover) prove(goal *lin) bool {
	return p.proveSplit(goal, 0)
}

func (p *prover) proveSplit(goal *lin, depth int) bool {
	if p.proveLinear(goal) {
		return true
	}
	if goal == nil || depth >= maxSplits {
		return false
	}
	var cands []*ir.Value
	for a := range goal.terms {
		if op := a.Def; op != nil && op.Code == ir.OpBinary && len(op.Args) == 2 &&
			(op.Sub == ir.BinMax || op.Sub == ir.BinMin) {
			if b := a.Basic(); b != nil && b.IsInteger() {
				cands = append(cands, a)
			}
		}
	}
	slices.SortFunc(cands, func(x, y *ir.Value) int { return x.ID - y.ID })
	for _, a := range cands {
		c := goal.terms[a]
		// both: the goal needs the bound the facts lack, so each arm must prove it.
		both := (a.Def.Sub == ir.BinMax) == (c < 0)
		ok := both
		for _, arm := range a.Def.Args {
			g := goal.clone()
			delete(g.terms, a)
			proven := false
			if g = g.add(p.linear(arm), c); g != nil {
				proven = p.proveSplit(g, depth+1)
			}
			if both && !proven {
				ok = false
				break
			}
			if !both && proven {
				ok = true
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// proveLinear reports whether goal >= 0 follows from the linear facts: its negation is
// infeasible.
func (p *prover) proveLinear(goal *lin) bool {
	if goal == nil {
		return false
	}
	if len(goal.terms) == 0 {
		return goal.c >= 0
	}
	// Gather facts that mention the goal's atoms, transitively, plus the atoms' own facts.
	atoms := map[*ir.Value]bool{}
	var queue []*ir.Value
	addAtom := func(a *ir.Value) {
		if !atoms[a] && len(atoms) < 40 {
			atoms[a] = true
			queue = append(queue, a)
		}
	}
	for a := range goal.terms {
		addAtom(a)
	}
	var rows []row
	usedFact := make([]bool, len(p.facts))
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		for _, r := range p.atomFacts(a) {
			rows = append(rows, r)
			for b := range r.terms {
				addAtom(b)
			}
		}
		for i, r := range p.facts {
			if usedFact[i] {
				continue
			}
			if _, ok := r.terms[a]; ok {
				usedFact[i] = true
				rows = append(rows, r)
				for b := range r.terms {
					addAtom(b)
				}
			}
		}
	}
	neg := row{terms: map[*ir.Value]int64{}, c: -goal.c - 1}
	for a, c := range goal.terms {
		neg.terms[a] = -c
	}
	rows = append(rows, neg)
	return p.elim.infeasible(rows)
}

func gcd(a, b int64) int64 {
	a, b = abs64(a), abs64(b)
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// elim is the elimination's working memory, reused from one proof to the next (a prover
// keeps one: proofs run one at a time).
type elim struct {
	col        map[*ir.Value]int
	atoms      []*ir.Value
	cur, next  [][]int64
	ps, ns     [][]int64
	pos, neg   []int
	seen       map[uint64]int32 // a derived row's hash -> 1 + its index in next
	chain      []int32          // 1 + the index of the previous derived row of the same hash
	chunks     [][]int64        // the rows' words
	chunk, off int
}

// row returns w words for a row, not cleared.
func (e *elim) row(w int) []int64 {
	for {
		if e.chunk < len(e.chunks) {
			if c := e.chunks[e.chunk]; e.off+w <= len(c) {
				r := c[e.off : e.off+w : e.off+w]
				e.off += w
				return r
			}
			e.chunk, e.off = e.chunk+1, 0
			continue
		}
		e.chunks = append(e.chunks, make([]int64, max(4096, w)))
	}
}

// infeasible runs Fourier–Motzkin elimination; true means the rows have no (rational, hence no
// integer) solution. Any overflow or blow-up gives up (false).
//
// The rows are laid out densely for the elimination: one column per atom, in ascending value
// ID (so the variable chosen on a tie in cost is the lowest ID), the constant last. A derived
// row that overflows is dropped (that only weakens the proof); derived rows are deduplicated
// within each step; more than maxRows rows after a step, or 64 steps, give up.
func (e *elim) infeasible(rows []row) bool {
	const maxRows = 600
	if e.col == nil {
		e.col, e.seen = map[*ir.Value]int{}, map[uint64]int32{}
	}
	clear(e.col)
	e.chunk, e.off = 0, 0
	// The atoms, in ID order.
	atoms := e.atoms[:0]
	for _, r := range rows {
		for a, c := range r.terms {
			if c == 0 {
				delete(r.terms, a)
				continue
			}
			if _, ok := e.col[a]; !ok {
				e.col[a] = 0
				atoms = append(atoms, a)
			}
		}
	}
	slices.SortFunc(atoms, func(a, b *ir.Value) int { return a.ID - b.ID })
	for i, a := range atoms {
		e.col[a] = i
	}
	e.atoms = atoms
	k := len(atoms)
	w := k + 1 // the terms, then the constant
	cur := e.cur[:0]
	for _, r := range rows {
		d := e.row(w)
		clear(d)
		for a, c := range r.terms {
			d[e.col[a]] = c
		}
		d[k] = r.c
		normalizeDense(d)
		cur = append(cur, d)
	}
	e.pos, e.neg = slices.Grow(e.pos[:0], k)[:k], slices.Grow(e.neg[:0], k)[:k]
	pos, neg := e.pos, e.neg
	next := e.next[:0]
	defer func() { e.cur, e.next = cur[:0], next[:0] }()
	for iter := 0; iter < 64; iter++ {
		clear(pos)
		clear(neg)
		any := false
		for _, r := range cur {
			empty := true
			for j, c := range r[:k] {
				switch {
				case c > 0:
					pos[j]++
					empty = false
				case c < 0:
					neg[j]++
					empty = false
				}
			}
			if empty {
				if r[k] < 0 {
					return true
				}
				continue
			}
			any = true
		}
		if !any {
			return false
		}
		// The variable with the cheapest elimination (the lowest ID among equals).
		best, bestCost := -1, math.MaxInt
		for j := 0; j < k; j++ {
			if pos[j] == 0 && neg[j] == 0 {
				continue
			}
			if cost := pos[j]*neg[j] - pos[j] - neg[j]; cost < bestCost {
				best, bestCost = j, cost
			}
		}
		next = next[:0]
		ps, ns := e.ps[:0], e.ns[:0]
		for _, r := range cur {
			switch c := r[best]; {
			case c > 0:
				ps = append(ps, r)
			case c < 0:
				ns = append(ns, r)
			default:
				next = append(next, r)
			}
		}
		e.ps, e.ns = ps, ns
		clear(e.seen)
		chain := e.chain[:0]
		for range next {
			chain = append(chain, 0) // rows carried over are not deduplicated
		}
		var n []int64
		for _, a := range ps {
		pairs:
			for _, b := range ns {
				ca, cb := a[best], -b[best]
				if n == nil {
					n = e.row(w)
				}
				ok := true
				for j := 0; j <= k; j++ {
					if j == best {
						continue
					}
					x, o1 := mulOv(a[j], cb)
					y, o2 := mulOv(b[j], ca)
					s, o3 := addOv(x, y)
					if o1 || o2 || o3 {
						ok = false
						break
					}
					n[j] = s
				}
				if !ok {
					continue // dropping a derived row only weakens the proof
				}
				n[best] = 0
				normalizeDense(n)
				empty := true
				for _, c := range n[:k] {
					if c != 0 {
						empty = false
						break
					}
				}
				if empty {
					if n[k] < 0 {
						return true
					}
					continue
				}
				h := hashRow(n)
				for i := e.seen[h]; i != 0; i = chain[i-1] {
					if slices.Equal(next[i-1], n) {
						continue pairs
					}
				}
				chain = append(chain, e.seen[h])
				e.seen[h] = int32(len(next) + 1)
				next = append(next, n)
				n = nil
			}
		}
		e.chain = chain
		if len(next) > maxRows {
			return false
		}
		cur, next = next, cur
	}
	return false
}

// normalizeDense divides a dense row's terms by their greatest common divisor, and its
// constant by the same, rounding down (integer tightening).
func normalizeDense(d []int64) {
	k := len(d) - 1
	g := int64(0)
	for _, c := range d[:k] {
		if c != 0 {
			g = gcd(g, c)
		}
	}
	if g > 1 {
		for j := range d[:k] {
			d[j] /= g
		}
		d[k] = floorDiv(d[k], g)
	}
}

// hashRow is FNV-1a over a dense row's words.
func hashRow(d []int64) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range d {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// extents returns, for a memory operand, the extent value of each index (nil entries for local
// array dimensions, whose extents are constants in dims).
func extents(mem *ir.Value) (ext []*ir.Value, dims []int) {
	switch t := mem.Type.(type) {
	case *types.Buffer:
		return []*ir.Value{mem}, nil
	case *types.View:
		_ = t
		op := mem.Def
		r := int(op.Int)
		if op.Code == ir.OpViewMake {
			return op.Args[1 : 1+r], nil
		}
		return op.Args[0:r], nil
	case *ir.Slot:
		return nil, t.Dims
	case *types.Vector:
		return nil, []int{t.Len}
	}
	return nil, nil
}

func (p *prover) walk(b *ir.Block, st *BCEStats) {
	mark := len(p.facts)
	for _, op := range b.Ops {
		switch op.Code {
		case ir.OpAssume:
			p.facts = append(p.facts, p.condFacts(op.Args[0], false, 0)...)
		case ir.OpIf:
			m := len(p.facts)
			p.facts = append(p.facts, p.condFacts(op.Args[0], false, 0)...)
			p.walk(op.Regions[0], st)
			p.facts = p.facts[:m]
			p.facts = append(p.facts, p.condFacts(op.Args[0], true, 0)...)
			p.walk(op.Regions[1], st)
			p.facts = p.facts[:m]
		case ir.OpFor:
			iv := op.Regions[0].Args[0]
			p.ivBnds[iv] = [2]*ir.Value{op.Args[0], op.Args[1]}
			if s, ok := ir.ConstInt(op.Args[2]); ok && s > 0 {
				p.ivStep[iv] = s
			} else {
				p.ivStep[iv] = 1
			}
			delete(p.ivals, iv)
			delete(p.atomRows, iv)
			p.walk(op.Regions[0], st)
		case ir.OpLoad, ir.OpStore:
			p.access(op, st)
		}
	}
	p.facts = p.facts[:mark]
}

func (p *prover) access(op *ir.Op, st *BCEStats) {
	mem := op.Args[0]
	idx := op.Args[1:]
	if op.Code == ir.OpStore {
		idx = op.Args[2:]
	}
	if len(idx) == 0 || len(op.Checks) != len(idx) {
		return
	}
	st.Accesses++
	ext, dims := extents(mem)
	remaining := 0
	for d, x := range idx {
		lx := p.linear(x)
		if op.Checks[d]&ir.CheckLower != 0 && p.prove(lx) {
			op.Checks[d] &^= ir.CheckLower
		}
		if op.Checks[d]&ir.CheckUpper != 0 {
			// x + width - 1 <= extent - 1
			w := int64(1)
			if d == len(idx)-1 && op.Width > 0 {
				w = int64(op.Width)
			}
			var e *lin
			switch {
			case ext != nil && d < len(ext):
				e = p.linear(ext[d])
			case dims != nil && d < len(dims):
				e = &lin{terms: map[*ir.Value]int64{}, c: int64(dims[d])}
			}
			if e != nil {
				g := e.add(lx, -1)
				if g != nil {
					g.c -= w
					if p.prove(g) {
						op.Checks[d] &^= ir.CheckUpper
					}
				}
			}
		}
		if op.Checks[d]&ir.CheckLower != 0 {
			remaining++
		}
		if op.Checks[d]&ir.CheckUpper != 0 {
			remaining++
		}
	}
	st.Checks += remaining
	if remaining == 0 {
		st.Proven++
	}
}
