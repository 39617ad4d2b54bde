package passes

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/loomrt/loom/go/loom/ir"
)

// TestInfeasibleMatchesTheMapElimination checks the dense Fourier–Motzkin elimination against
// the map-based one it replaced (infeasibleReference, below): the same answer on random
// systems (fresh seeds each run) of small and huge coefficients, duplicate rows, systems that
// blow past maxRows and ones whose products overflow. Bounds checks a kernel keeps depend on
// these answers, so they must not move.
func TestInfeasibleMatchesTheMapElimination(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 7))
	vals := make([]*ir.Value, 12)
	for i := range vals {
		vals[i] = &ir.Value{ID: 100 - 3*i} // IDs not in creation order
	}
	coef := func(big bool) int64 {
		if big && rnd.IntN(4) == 0 {
			return rnd.Int64N(math.MaxInt64>>uint(rnd.IntN(40))) - math.MaxInt64>>1
		}
		return rnd.Int64N(9) - 4
	}
	gen := func(nvars, nrows int, big bool) []row {
		rows := make([]row, 0, nrows)
		for range nrows {
			r := row{terms: map[*ir.Value]int64{}, c: coef(big)}
			for range 1 + rnd.IntN(3) {
				if c := coef(big); c != 0 {
					r.terms[vals[rnd.IntN(nvars)]] = c
				}
			}
			rows = append(rows, r)
			if rnd.IntN(8) == 0 {
				rows = append(rows, row{terms: clone(r.terms), c: r.c})
			}
		}
		return rows
	}
	counts := map[bool]int{}
	var e elim // reused, as a prover reuses it
	for i := range 20000 {
		nvars := 1 + rnd.IntN(len(vals))
		rows := gen(nvars, 1+rnd.IntN(14), i%3 == 0)
		cp := make([]row, len(rows))
		for j, r := range rows {
			cp[j] = row{terms: clone(r.terms), c: r.c}
		}
		want := infeasibleReference(cp)
		got := e.infeasible(rows)
		counts[want]++
		if got != want {
			t.Fatalf("system %d: infeasible = %v, the map elimination says %v: %v", i, got, want, describe(rows))
		}
	}
	// Both answers occur often enough for the comparison to mean something.
	if counts[true] < 1000 || counts[false] < 1000 {
		t.Fatalf("answers %v: the generator is lopsided", counts)
	}
}

func clone(m map[*ir.Value]int64) map[*ir.Value]int64 {
	n := make(map[*ir.Value]int64, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}

func describe(rows []row) [][]int64 {
	var out [][]int64
	for _, r := range rows {
		var keys []*ir.Value
		for a := range r.terms {
			keys = append(keys, a)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].ID < keys[j].ID })
		var d []int64
		for _, a := range keys {
			d = append(d, int64(a.ID), r.terms[a])
		}
		out = append(out, append(d, r.c))
	}
	return out
}

func BenchmarkInfeasible(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	vals := make([]*ir.Value, 10)
	for i := range vals {
		vals[i] = &ir.Value{ID: i}
	}
	var systems [][]row
	for range 200 {
		var rows []row
		for range 12 {
			r := row{terms: map[*ir.Value]int64{}, c: rnd.Int64N(9) - 4}
			for range 2 {
				r.terms[vals[rnd.IntN(len(vals))]] = rnd.Int64N(5) - 2
			}
			rows = append(rows, r)
		}
		systems = append(systems, rows)
	}
	for _, f := range []struct {
		name string
		fn   func([]row) bool
	}{{"dense", new(elim).infeasible}, {"map", infeasibleReference}} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				for _, s := range systems {
					f.fn(s)
				}
			}
		})
	}
}

// normalizeReference and infeasibleReference are the elimination as it was written before
// the dense rows (session 34), kept as the oracle of TestInfeasibleMatchesTheMapElimination.
func normalizeReference(r row) (row, bool) {
	g := int64(0)
	for _, c := range r.terms {
		g = gcd(g, c)
	}
	if g > 1 {
		n := row{terms: make(map[*ir.Value]int64, len(r.terms)), c: floorDiv(r.c, g)}
		for a, c := range r.terms {
			n.terms[a] = c / g
		}
		return n, true
	}
	return r, true
}

func infeasibleReference(rows []row) bool {
	const maxRows = 600
	cur := make([]row, 0, len(rows))
	for _, r := range rows {
		for a, c := range r.terms {
			if c == 0 {
				delete(r.terms, a)
			}
		}
		n, _ := normalizeReference(r)
		cur = append(cur, n)
	}
	for iter := 0; iter < 64; iter++ {
		vars := map[*ir.Value][2]int{}
		for _, r := range cur {
			if len(r.terms) == 0 {
				if r.c < 0 {
					return true
				}
				continue
			}
			for a, c := range r.terms {
				cnt := vars[a]
				if c > 0 {
					cnt[0]++
				} else {
					cnt[1]++
				}
				vars[a] = cnt
			}
		}
		if len(vars) == 0 {
			return false
		}
		// Pick the variable with the cheapest elimination (deterministically).
		keys := make([]*ir.Value, 0, len(vars))
		for a := range vars {
			keys = append(keys, a)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].ID < keys[j].ID })
		var best *ir.Value
		bestCost := math.MaxInt
		for _, a := range keys {
			cnt := vars[a]
			cost := cnt[0]*cnt[1] - cnt[0] - cnt[1]
			if cost < bestCost {
				best, bestCost = a, cost
			}
		}
		var pos, neg, rest []row
		for _, r := range cur {
			c := r.terms[best]
			switch {
			case c > 0:
				pos = append(pos, r)
			case c < 0:
				neg = append(neg, r)
			default:
				rest = append(rest, r)
			}
		}
		next := rest
		seen := map[string]bool{}
		for _, a := range pos {
			for _, b := range neg {
				ca, cb := a.terms[best], -b.terms[best]
				n := row{terms: map[*ir.Value]int64{}}
				ok := true
				for v, c := range a.terms {
					if v == best {
						continue
					}
					x, o := mulOv(c, cb)
					if o {
						ok = false
					}
					n.terms[v] = x
				}
				for v, c := range b.terms {
					if v == best {
						continue
					}
					x, o1 := mulOv(c, ca)
					s, o2 := addOv(n.terms[v], x)
					if o1 || o2 {
						ok = false
					}
					if s == 0 {
						delete(n.terms, v)
					} else {
						n.terms[v] = s
					}
				}
				x1, o1 := mulOv(a.c, cb)
				x2, o2 := mulOv(b.c, ca)
				s, o3 := addOv(x1, x2)
				if o1 || o2 || o3 {
					ok = false
				}
				n.c = s
				if !ok {
					continue // dropping a derived row only weakens the proof
				}
				n, _ = normalizeReference(n)
				if len(n.terms) == 0 {
					if n.c < 0 {
						return true
					}
					continue
				}
				k := rowKey(n)
				if seen[k] {
					continue
				}
				seen[k] = true
				next = append(next, n)
			}
		}
		if len(next) > maxRows {
			return false
		}
		cur = next
	}
	return false
}

func rowKey(r row) string {
	keys := make([]*ir.Value, 0, len(r.terms))
	for a := range r.terms {
		keys = append(keys, a)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ID < keys[j].ID })
	b := make([]byte, 0, 16*len(keys)+8)
	for _, a := range keys {
		b = appendInt(b, int64(a.ID))
		b = append(b, ':')
		b = appendInt(b, r.terms[a])
		b = append(b, ',')
	}
	return string(appendInt(b, r.c))
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}
