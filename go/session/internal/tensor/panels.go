package tensor

// Column panels: the layout in which the host's gemm_nn reads a packed B (PACKB, see
// go/session/internal/ops/kernelops): panel t of nr columns holds columns j0 = min(t·nr,
// n - nr) .. j0 + nr - 1 of B [k, n] (the last panel overlapping its neighbour when nr does
// not divide n), its row p at [t, p, :].

// PackPanels writes B [k, n], element (p, j) at b[p·rs + j·cs], into packed in panels of nr
// columns.
func PackPanels(packed, b []float32, k, n, nr, rs, cs int) {
	for t := range (n + nr - 1) / nr {
		j0 := min(t*nr, n-nr)
		for p := range k {
			row := packed[(t*k+p)*nr : (t*k+p+1)*nr]
			if cs == 1 {
				copy(row, b[p*rs+j0:])
				continue
			}
			for c := range row {
				row[c] = b[p*rs+(j0+c)*cs]
			}
		}
	}
}

// PackPanelsInPlace lays B out in panels of nr columns as PackPanels does, in buf, whose
// first k·n elements are B [k, n] row-major and whose length is the panels' (np·k·nr, np =
// ⌈n/nr⌉). First each row moves to a stride of whole panels, its last panel's
// columns the overlapping n - nr .. n - 1 (from the last row back, so that no row overwrites
// one not yet moved); then the [k, np] matrix of nr-column pieces is transposed to [np, k] by
// following the permutation's cycles, a bitmap marking the pieces in place.
func PackPanelsInPlace(buf []float32, k, n, nr int) {
	np := (n + nr - 1) / nr
	w := np * nr
	piece := make([]float32, nr)
	if w != n {
		for p := k - 1; p >= 0; p-- {
			copy(piece, buf[p*n+n-nr:p*n+n])
			copy(buf[p*w:p*w+w-nr], buf[p*n:p*n+w-nr])
			copy(buf[p*w+w-nr:p*w+w], piece)
		}
	}
	at := func(i int) []float32 { return buf[i*nr : i*nr+nr] }
	done := make([]uint64, (k*np+63)/64)
	for s := range k * np {
		if done[s/64]&(1<<(s%64)) != 0 {
			continue
		}
		// Piece d of the panels (panel d / k, row d % k) is piece (d % k)·np + d / k of the
		// rows: move each into place along the cycle through s.
		copy(piece, at(s))
		for d := s; ; {
			done[d/64] |= 1 << (d % 64)
			src := (d%k)*np + d/k
			if src == s {
				copy(at(d), piece)
				break
			}
			copy(at(d), at(src))
			d = src
		}
	}
}

// UnpackPanelsT writes Bᵀ [n, k] (row-major: B as Gemm with transB stores it) from B's panels
// of nr columns.
func UnpackPanelsT(packed, dst []float32, k, n, nr int) {
	for t := range (n + nr - 1) / nr {
		j0 := min(t*nr, n-nr)
		for p := range k {
			for c, v := range packed[(t*k+p)*nr : (t*k+p+1)*nr] {
				dst[(j0+c)*k+p] = v
			}
		}
	}
}

// UnpackPanels writes B [k, n] (row-major) from its panels of nr columns.
func UnpackPanels(packed, dst []float32, k, n, nr int) {
	for t := range (n + nr - 1) / nr {
		j0 := min(t*nr, n-nr)
		for p := range k {
			copy(dst[p*n+j0:p*n+j0+nr], packed[(t*k+p)*nr:(t*k+p+1)*nr])
		}
	}
}
