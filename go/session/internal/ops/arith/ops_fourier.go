package arith

import (
	"fmt"

	"gonum.org/v1/gonum/dsp/fourier"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for DFT (opsets 17 and 20) and STFT (17), computed in float64 with gonum's
// FFT (any length, O(n log n)). A complex tensor is ONNX's real representation: a last
// dimension of 2 (real, imaginary), or 1 for a real signal.

func init() {
	ops.HostOps["DFT"] = opDFT
	ops.HostOps["STFT"] = opSTFT
}

// fftPlans caches one FFT per length and kind for a single host function call.
type fftPlans struct {
	cplx map[int]*fourier.CmplxFFT
	real map[int]*fourier.FFT
}

func (p *fftPlans) complexFFT(n int) *fourier.CmplxFFT {
	if p.cplx == nil {
		p.cplx = map[int]*fourier.CmplxFFT{}
	}
	if f := p.cplx[n]; f != nil {
		return f
	}
	f := fourier.NewCmplxFFT(n)
	p.cplx[n] = f
	return f
}

func (p *fftPlans) realFFT(n int) *fourier.FFT {
	if p.real == nil {
		p.real = map[int]*fourier.FFT{}
	}
	if f := p.real[n]; f != nil {
		return f
	}
	f := fourier.NewFFT(n)
	p.real[n] = f
	return f
}

// scalarInt reads a one-element integer input (dft_length, axis, frame_step, frame_length).
func scalarInt(t tensor.Tensor, what string, input int) (int64, error) {
	if t.Len() != 1 {
		return 0, fmt.Errorf("%s (input %d) has shape %v, want a scalar", what, input, t.Dims())
	}
	if t.DType().IsFloat() || t.DType() == graph.String || t.DType() == graph.Bool {
		return 0, fmt.Errorf("%s (input %d) is %s, want an integer", what, input, t.DType())
	}
	return tensor.Int64s(t)[0], nil
}

// complexDim checks that x's last dimension holds a real (1) or complex (2) value.
func complexDim(x tensor.Tensor, what string) (int, error) {
	d := x.Dims()
	if len(d) < 2 {
		return 0, fmt.Errorf("%s has rank %d; want at least 2 (the signal and the real/imaginary dimension)", what, len(d))
	}
	if c := d[len(d)-1]; c != 1 && c != 2 {
		return 0, fmt.Errorf("%s has a last dimension of %d; want 1 (real) or 2 (complex)", what, c)
	}
	return int(d[len(d)-1]), nil
}

func opDFT(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	comps, err := complexDim(x, "the input")
	if err != nil {
		return nil, err
	}
	rank := len(x.Dims())
	inverse, onesided := n.AttrInt("inverse", 0) != 0, n.AttrInt("onesided", 0) != 0
	axis := n.AttrInt("axis", 1) // DFT-17: an attribute
	if rc.OpsetVersion() >= 20 {
		axis = -2
		if a := ops.Optional(in, 2); a.IsValid() {
			if axis, err = scalarInt(a, "axis", 2); err != nil {
				return nil, err
			}
		}
	}
	if axis < -int64(rank) || axis >= int64(rank) {
		return nil, fmt.Errorf("axis %d is out of range for an input of rank %d", axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	if int(axis) == rank-1 {
		return nil, fmt.Errorf("axis %d is the real/imaginary dimension; want a signal axis in [%d, %d]", axis, -rank, rank-2)
	}
	ax := int(axis)
	dim := x.Dims()[ax]
	irfft := inverse && onesided
	if irfft && comps != 2 {
		return nil, fmt.Errorf("the inverse of a one-sided transform (IRFFT) needs a complex input (last dimension 2), got %v", x.Dims())
	}
	length := dim
	if irfft {
		length = 2 * (dim - 1)
	}
	if l := ops.Optional(in, 1); l.IsValid() {
		if length, err = scalarInt(l, "dft_length", 1); err != nil {
			return nil, err
		}
	}
	if length < 1 {
		return nil, fmt.Errorf("dft_length %d must be positive (the signal axis has %d elements)", length, dim)
	}
	bins := length // elements of the output along the axis
	outComps := int64(2)
	switch {
	case irfft:
		outComps = 1
	case onesided:
		bins = length/2 + 1
	}
	out := append([]int64{}, x.Dims()...)
	out[ax], out[rank-1] = bins, outComps
	if err := ops.CheckShape(rc, "the output", out); err != nil {
		return nil, err
	}
	// The output, and one line's float64 work arrays.
	if err := ops.ReserveShape(rc, "the output", x.DType(), out, 0); err != nil {
		return nil, err
	}
	if err := ops.ReserveCount(rc, "the transform's work arrays", graph.Double, 6*float64(length), 0); err != nil {
		return nil, err
	}
	xv := tensor.Float64s(x)
	yv := make([]float64, ops.Numel(out))
	outer := ops.Numel(x.Dims()[:ax])
	inner := ops.Numel(x.Dims()[ax+1 : rank-1])
	n0, nl := int(dim), int(length)
	var plans fftPlans
	line := make([]complex128, nl)
	var half []complex128
	var realOut []float64
	if irfft {
		half = make([]complex128, nl/2+1)
		realOut = make([]float64, nl)
	}
	for o := range outer {
		for i := range inner {
			// Element k of this line along the axis: x[o, k, i, c].
			at := func(k int) int { return ((o*n0+k)*inner + i) * comps }
			put := func(k int) int { return ((o*int(bins)+k)*inner + i) * int(outComps) }
			if irfft {
				clear(half)
				for k := range min(n0, len(half)) {
					half[k] = complex(xv[at(k)], xv[at(k)+1])
				}
				plans.realFFT(nl).Sequence(realOut, half)
				for k, v := range realOut {
					yv[put(k)] = v / float64(nl)
				}
				continue
			}
			clear(line)
			for k := range min(n0, nl) {
				re, im := xv[at(k)], 0.0
				if comps == 2 {
					im = xv[at(k)+1]
				}
				line[k] = complex(re, im)
			}
			f := plans.complexFFT(nl)
			if inverse {
				f.Sequence(line, line)
			} else {
				f.Coefficients(line, line)
			}
			for k := range int(bins) {
				v := line[k]
				if inverse {
					v /= complex(float64(nl), 0)
				}
				yv[put(k)], yv[put(k)+1] = real(v), imag(v)
			}
		}
	}
	return ops.FloatResult(x.DType(), out, yv)
}

func opSTFT(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	comps, err := complexDim(x, "the signal")
	if err != nil {
		return nil, err
	}
	if len(x.Dims()) != 3 {
		return nil, fmt.Errorf("the signal has shape %v; want [batch, length, 1 or 2]", x.Dims())
	}
	batch, length := x.Dims()[0], x.Dims()[1]
	step, err := scalarInt(in[1], "frame_step", 1)
	if err != nil {
		return nil, err
	}
	if step < 1 {
		return nil, fmt.Errorf("frame_step %d must be positive", step)
	}
	window := ops.Optional(in, 2)
	frame := length
	switch l := ops.Optional(in, 3); {
	case l.IsValid():
		if frame, err = scalarInt(l, "frame_length", 3); err != nil {
			return nil, err
		}
		if window.IsValid() && (len(window.Dims()) != 1 || window.Dims()[0] != frame) {
			return nil, fmt.Errorf("the window (input 2) has shape %v; want [frame_length] = [%d]", window.Dims(), frame)
		}
	case window.IsValid():
		if len(window.Dims()) != 1 {
			return nil, fmt.Errorf("the window (input 2) has shape %v; want one dimension", window.Dims())
		}
		frame = window.Dims()[0]
	}
	if frame < 1 || frame > length {
		return nil, fmt.Errorf("frame_length %d must be in [1, %d] (the signal's length)", frame, length)
	}
	onesided := n.AttrInt("onesided", 1) != 0
	if onesided && comps == 2 {
		return nil, fmt.Errorf("onesided = 1 needs a real signal (last dimension 1), got a complex one %v", x.Dims())
	}
	frames := (length-frame)/step + 1
	bins := frame
	if onesided {
		bins = frame/2 + 1
	}
	out := []int64{batch, frames, bins, 2}
	if err := ops.CheckShape(rc, "the output", out); err != nil {
		return nil, err
	}
	if err := ops.ReserveShape(rc, "the output", x.DType(), out, 0); err != nil {
		return nil, err
	}
	if err := ops.ReserveCount(rc, "the transform's work arrays", graph.Double, 4*float64(frame), 0); err != nil {
		return nil, err
	}
	var w []float64
	if window.IsValid() {
		w = tensor.Float64s(window)
	}
	xv := tensor.Float64s(x)
	yv := make([]float64, ops.Numel(out))
	fl := int(frame)
	f := fourier.NewCmplxFFT(fl)
	line := make([]complex128, fl)
	for b := range int(batch) {
		for fr := range int(frames) {
			start := fr * int(step)
			for k := range fl {
				i := (b*int(length) + start + k) * comps
				re, im := xv[i], 0.0
				if comps == 2 {
					im = xv[i+1]
				}
				if w != nil {
					re, im = re*w[k], im*w[k]
				}
				line[k] = complex(re, im)
			}
			f.Coefficients(line, line)
			o := (b*int(frames) + fr) * int(bins) * 2
			for k := range int(bins) {
				yv[o+2*k], yv[o+2*k+1] = real(line[k]), imag(line[k])
			}
		}
	}
	return ops.FloatResult(x.DType(), out, yv)
}
