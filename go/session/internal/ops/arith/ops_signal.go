package arith

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the signal ops: the window generators (HannWindow, HammingWindow,
// BlackmanWindow) and MelWeightMatrix.

func init() {
	ops.HostOps["HannWindow"] = windowOp(func(k, n float64) float64 { return 0.5 - 0.5*math.Cos(2*math.Pi*k/n) })
	ops.HostOps["HammingWindow"] = windowOp(func(k, n float64) float64 {
		const a0 = 25.0 / 46
		return a0 - (1-a0)*math.Cos(2*math.Pi*k/n)
	})
	ops.HostOps["BlackmanWindow"] = windowOp(func(k, n float64) float64 {
		return 0.42 - 0.5*math.Cos(2*math.Pi*k/n) + 0.08*math.Cos(4*math.Pi*k/n)
	})
	ops.HostOps["MelWeightMatrix"] = opMelWeightMatrix
}

// windowOp makes a window generator from w(k, N), N the periodic or symmetric denominator.
func windowOp(w func(k, n float64) float64) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if in[0].Len() != 1 {
			return nil, fmt.Errorf("size must be a scalar")
		}
		size := tensor.Int64s(in[0])[0]
		if size < 0 {
			return nil, fmt.Errorf("the window size (input 0) is %d; it must not be negative", size)
		}
		if err := ops.ReserveShape(rc, "the window", graph.Double, []int64{size}, 0); err != nil {
			return nil, err
		}
		den := float64(size)
		if n.AttrInt("periodic", 1) == 0 {
			den = float64(size - 1)
		}
		v := make([]float64, size)
		for k := range v {
			v[k] = w(float64(k), den)
		}
		return ops.FloatResult(tensor.DType(n.AttrInt("output_datatype", int64(graph.Float))), []int64{size}, v)
	}
}

func opMelWeightMatrix(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	for i, name := range []string{"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"} {
		if in[i].Len() != 1 {
			return nil, fmt.Errorf("MelWeightMatrix: %s must be a scalar, got shape %v", name, in[i].Dims())
		}
	}
	bins, dft, rate := tensor.Int64s(in[0])[0], tensor.Int64s(in[1])[0], tensor.Int64s(in[2])[0]
	lower, upper := tensor.Float64s(in[3])[0], tensor.Float64s(in[4])[0]
	if bins < 1 || bins > 1<<16 || dft < 1 || dft > 1<<24 || rate < 1 {
		return nil, fmt.Errorf("MelWeightMatrix: num_mel_bins %d, dft_length %d and sample_rate %d out of range", bins, dft, rate)
	}
	if lower < 0 || upper <= lower {
		return nil, fmt.Errorf("MelWeightMatrix: edges %g..%g must satisfy 0 <= lower < upper", lower, upper)
	}
	spectrum := int(dft/2 + 1)
	if err := ops.ReserveShape(rc, "the output", graph.Double, []int64{int64(spectrum), bins}, 0); err != nil {
		return nil, err
	}
	mel := func(hz float64) float64 { return 2595 * math.Log10(1+hz/700) }
	lowMel, highMel := mel(lower), mel(upper)
	// The spec spaces num_mel_bins+2 points by (high-low)/(num_mel_bins+2) and floors each
	// frequency to a DFT bin.
	points := make([]int, bins+2)
	step := (highMel - lowMel) / float64(len(points))
	for i := range points {
		hz := 700 * (math.Pow(10, (float64(i)*step+lowMel)/2595) - 1)
		points[i] = int(math.Floor(float64(dft+1) * hz / float64(rate)))
	}
	out := make([]float64, spectrum*int(bins))
	set := func(j, i int, v float64) {
		if j >= 0 && j < spectrum {
			out[j*int(bins)+i] = v
		}
	}
	for i := 0; i < int(bins); i++ {
		lo, center, hi := points[i], points[i+1], points[i+2]
		// Loops stay inside the spectrum however far the edges reach beyond it.
		if center == lo {
			set(center, i, 1)
		} else {
			for j := max(lo, 0); j <= min(center, spectrum-1); j++ {
				set(j, i, float64(j-lo)/float64(center-lo))
			}
		}
		for j := max(center, 0); j < min(hi, spectrum); j++ {
			set(j, i, float64(hi-j)/float64(hi-center))
		}
	}
	return ops.FloatResult(tensor.DType(n.AttrInt("output_datatype", int64(graph.Float))), []int64{int64(spectrum), bins}, out)
}
