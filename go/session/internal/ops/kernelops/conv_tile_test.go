package kernelops

import (
	"math"
	"testing"
)

// refBestConvTile is bestConvTile as first written, counting each tile's input rows anew for
// every (mr, nvy): the reference its faster form (the rows counted once per nvy) must match.
func refBestConvTile(mg, oh, ow, cg int, kern, str, dil [2]int) (convTile, float64) {
	maxAcc := 16
	if cg == 1 && mg == 1 {
		maxAcc = 8
	}
	vl := vectorWidth(ow)
	maxAcc = accumulators(maxAcc, vl)
	kk := kern[0] * kern[1]
	best, bestCost := convTile{}, math.Inf(1)
	for mr := 1; mr <= min(mg, 16); mr++ {
		for nvy := 1; nvy <= min(oh, 8); nvy++ {
			rows := map[int]bool{}
			for j := range nvy {
				for ky := range kern[0] {
					rows[j*str[0]+ky*dil[0]] = true
				}
			}
			for nvx := 1; nvx <= min(ow/vl, 6); nvx++ {
				nv := nvy * nvx
				if mr*nv > maxAcc {
					continue
				}
				fmas := float64(mr * nv * kk)
				loads := float64(len(rows)*nvx*kern[1])*1.5 + float64(mr*kk)
				perChannel := max(fmas/2, loads/2, float64(4*kk))
				tiles := ceilDiv(mg, mr) * ceilDiv(oh, nvy) * ceilDiv(ow, nvx*vl)
				cost := float64(tiles) * (float64(cg)*perChannel + float64(2*mr*nv) + 30)
				if cost < bestCost || (cost == bestCost && mr*nv > best.mr*best.nvy*best.nvx) {
					best, bestCost = convTile{mr: mr, nvy: nvy, nvx: nvx, vl: vl}, cost
				}
			}
		}
	}
	return best, bestCost
}

// TestConvTileChoiceUnchanged: the conv tile search picks the same tile at the same cost as
// its reference over output sizes, channel counts, kernels, strides and dilations.
func TestConvTileChoiceUnchanged(t *testing.T) {
	n := 0
	for _, mg := range []int{1, 3, 8, 16, 24, 64} {
		for _, oh := range []int{1, 2, 5, 7, 14, 32} {
			for _, ow := range []int{1, 4, 8, 13, 32, 56, 112} {
				for _, cg := range []int{1, 3, 16} {
					for _, kern := range [][2]int{{1, 1}, {3, 3}, {5, 5}, {7, 1}, {1, 7}} {
						for _, sd := range [][2]int{{1, 1}, {2, 1}, {1, 2}, {3, 2}, {2, 3}} {
							str, dil := [2]int{sd[0], sd[0]}, [2]int{sd[1], sd[1]}
							got, gotCost := bestConvTile(mg, oh, ow, cg, kern, str, dil)
							want, wantCost := refBestConvTile(mg, oh, ow, cg, kern, str, dil)
							if got != want || gotCost != wantCost {
								t.Fatalf("mg %d oh %d ow %d cg %d kern %v str %v dil %v: %+v at %g, want %+v at %g",
									mg, oh, ow, cg, kern, str, dil, got, gotCost, want, wantCost)
							}
							n++
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases", n)
}

func BenchmarkBestConvTile(b *testing.B) {
	for b.Loop() {
		bestConvTile(16, 32, 32, 16, [2]int{3, 3}, [2]int{1, 1}, [2]int{1, 1})
	}
}
