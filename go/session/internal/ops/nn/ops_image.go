package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Image-layout operators: Col2Im (opset 18), the inverse of im2col, and AffineGrid (opset 20),
// the sampling grid of an affine transform (GridSample's usual companion).

func init() {
	ops.HostOps["Col2Im"] = opCol2Im
	ops.HostOps["AffineGrid"] = opAffineGrid
}

// maxGeom bounds the geometry values (image and block sizes, strides, dilations, pads), so
// that the arithmetic on them cannot overflow.
const maxGeom = math.MaxInt32

// col2imGeom reads and checks Col2Im's geometry for spatial rank k: strides and dilations
// (default 1), pads (begin..., end...; default 0).
func col2imGeom(n *graph.Node, k int) (strides, dils, pads []int64, err error) {
	strides, dils, pads = n.AttrInts("strides"), n.AttrInts("dilations"), n.AttrInts("pads")
	fill := func(v []int64, size int, def int64, name string) ([]int64, error) {
		if v == nil {
			v = make([]int64, size)
			for i := range v {
				v[i] = def
			}
			return v, nil
		}
		if len(v) != size {
			return nil, fmt.Errorf("%s %v: want %d values for the %d spatial axes", name, v, size, k)
		}
		return v, nil
	}
	if strides, err = fill(strides, k, 1, "strides"); err != nil {
		return
	}
	if dils, err = fill(dils, k, 1, "dilations"); err != nil {
		return
	}
	if pads, err = fill(pads, 2*k, 0, "pads"); err != nil {
		return
	}
	for i := range k {
		if strides[i] < 1 || strides[i] > maxGeom || dils[i] < 1 || dils[i] > maxGeom {
			return nil, nil, nil, fmt.Errorf("strides %v and dilations %v must be in [1, 2^31)", strides, dils)
		}
	}
	for _, p := range pads {
		if p < 0 || p > maxGeom {
			return nil, nil, nil, fmt.Errorf("pads %v: each must be in [0, 2^31)", pads)
		}
	}
	return strides, dils, pads, nil
}

// opCol2Im rearranges the column blocks of the input (N, C*prod(block_shape), L) into images
// (N, C, image_shape...), summing where blocks overlap: column c*prod(block_shape)+t, block b
// adds to the image position b's block start (b's position in the grid of blocks times the
// strides, less the begin pads) plus t's position in the block times the dilations, when that
// lies in the image. L must be the number of blocks that fit in the padded image.
func opCol2Im(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, imgT, blkT := in[0], in[1], in[2]
	xd := x.Dims()
	if len(xd) != 3 {
		return nil, fmt.Errorf("the input (input 0, shape %v) must be (N, C * prod(block_shape), L): rank 3", xd)
	}
	if x.DType() == graph.String {
		return nil, fmt.Errorf("the input (input 0) is a string tensor: Col2Im sums overlapping blocks, it needs numbers")
	}
	if len(imgT.Dims()) != 1 || len(blkT.Dims()) != 1 || imgT.Len() != blkT.Len() || imgT.Len() == 0 {
		return nil, fmt.Errorf("the image_shape (input 1, shape %v) and block_shape (input 2, shape %v) must be 1-D, of one positive length", imgT.Dims(), blkT.Dims())
	}
	img, blk := tensor.Int64s(imgT), tensor.Int64s(blkT)
	k := len(img)
	strides, dils, pads, err := col2imGeom(n, k)
	if err != nil {
		return nil, err
	}
	for i := range k {
		if img[i] < 0 || img[i] > maxGeom || blk[i] < 1 || blk[i] > maxGeom {
			return nil, fmt.Errorf("image_shape %v must be in [0, 2^31) and block_shape %v in [1, 2^31) on every axis", img, blk)
		}
	}
	// The blocks that fit along each axis, and their count, which must be L (checked as the
	// product grows, so that it cannot overflow).
	nblk := make([]int64, k)
	count := int64(1)
	for i := range k {
		span := img[i] + pads[i] + pads[i+k] - ((blk[i]-1)*dils[i] + 1)
		if span < 0 {
			return nil, fmt.Errorf("the block (block_shape %v, dilations %v) is larger than the padded image (image_shape %v, pads %v) on axis %d", blk, dils, img, pads, i)
		}
		nblk[i] = span/strides[i] + 1
		if count > xd[2]/nblk[i] {
			count = -1 // more than L
		} else if count >= 0 {
			count *= nblk[i]
		}
	}
	if count != xd[2] {
		return nil, fmt.Errorf("the input (input 0, shape %v) holds %d blocks (its last axis); image_shape %v, block_shape %v, strides %v, dilations %v and pads %v make %v blocks", xd, xd[2], img, blk, strides, dils, pads, nblk)
	}
	// The block's size, which must divide the input's axis 1 (checked as it grows).
	ksz := int64(1)
	for _, b := range blk {
		if ksz < 0 || ksz > xd[1]/b {
			ksz = -1 // more than the axis
		} else {
			ksz *= b
		}
	}
	ch := int64(0)
	if xd[1] > 0 {
		if ksz < 0 || xd[1]%ksz != 0 {
			return nil, fmt.Errorf("the input's axis 1 (input 0, shape %v) must be a multiple of the block's size, the product of block_shape %v", xd, blk)
		}
		ch = xd[1] / ksz
	}
	outShape := append([]int64{xd[0], ch}, img...)
	if err := ops.ReserveShape(rc, "the output", x.DType(), outShape, 8); err != nil {
		return nil, err
	}
	if x.Len() == 0 || ops.Numel(outShape) == 0 {
		// Empty (x.Len() is 0 only when N or C is): its shape may hold huge dimensions.
		return []tensor.Tensor{tensor.Take(x, outShape, nil)}, nil
	}
	out := make([]float64, ops.Numel(outShape))
	// Every axis of the input is positive here, so ksz and L are within its element count.
	// dst maps (kernel tap t, block b) to the image offset it adds to, -1 outside the image.
	nb, kk := int(xd[2]), int(ksz)
	imgSt := ops.StridesOf(img)
	dst := make([]int, kk*nb)
	ops.ForEachIndex(blk, func(t int, kp []int) {
		ops.ForEachIndex(nblk, func(b int, bp []int) {
			o := 0
			for d := range k {
				q := int64(bp[d])*strides[d] - pads[d] + int64(kp[d])*dils[d]
				if q < 0 || q >= img[d] {
					o = -1
					break
				}
				o += int(q) * imgSt[d]
			}
			dst[t*nb+b] = o
		})
	})
	xv := tensor.Float64s(x)
	isz := ops.Numel(img)
	for plane := 0; plane < int(xd[0]*ch); plane++ {
		src, o := xv[plane*kk*nb:(plane+1)*kk*nb], out[plane*isz:(plane+1)*isz]
		for j, d := range dst {
			if d >= 0 {
				o[d] += src[j]
			}
		}
	}
	return ops.FloatResult(x.DType(), outShape, out)
}

// opAffineGrid is the grid of normalized coordinates, (N, H, W, 2) or (N, D, H, W, 3), that
// theta (N, 2, 3) or (N, 3, 4) maps the output positions of an image of size (N, C, H, W) or
// (N, C, D, H, W) to: theta[n] times (x, y[, z], 1), x the normalized coordinate of the
// position along the last axis, y along the one before... In [-1, 1]: with align_corners the
// centers of the corner pixels are -1 and 1, without the outer edges are; a size-1 axis is 0.
func opAffineGrid(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	theta, sizeT := in[0], in[1]
	td := theta.Dims()
	if len(sizeT.Dims()) != 1 || (sizeT.Len() != 4 && sizeT.Len() != 5) {
		return nil, fmt.Errorf("the size (input 1, shape %v) must be 1-D: (N, C, H, W) or (N, C, D, H, W)", sizeT.Dims())
	}
	size := tensor.Int64s(sizeT)
	k := len(size) - 2 // spatial rank: 2 or 3
	if len(td) != 3 || td[1] != int64(k) || td[2] != int64(k+1) {
		return nil, fmt.Errorf("the theta (input 0, shape %v) must be (N, %d, %d) for the size %v", td, k, k+1, size)
	}
	for _, s := range size {
		if s < 0 {
			return nil, fmt.Errorf("the size (input 1) %v holds a negative value", size)
		}
	}
	if size[0] != td[0] {
		return nil, fmt.Errorf("the size's batch %d (input 1, %v) differs from the theta's %d (input 0, shape %v)", size[0], size, td[0], td)
	}
	sp := size[2:]
	outShape := append(append([]int64{size[0]}, sp...), int64(k))
	if err := ops.ReserveShape(rc, "the output", theta.DType(), outShape, 8); err != nil {
		return nil, err
	}
	align := n.AttrInt("align_corners", 0) != 0
	// coords[d][i] is the normalized coordinate of position i along spatial axis d.
	if ops.Numel(outShape) == 0 {
		// Its shape may hold huge dimensions beside a 0.
		return []tensor.Tensor{tensor.Take(theta, outShape, nil)}, nil
	}
	coords := make([][]float64, k)
	for d, s := range sp {
		c := make([]float64, s) // within the output's element count: every axis is positive
		for i := range c {
			switch {
			case s == 1:
			case align:
				c[i] = -1 + 2*float64(i)/float64(s-1)
			default:
				c[i] = (2*float64(i)+1)/float64(s) - 1
			}
		}
		coords[d] = c
	}
	tv := tensor.Float64s(theta)
	out := make([]float64, ops.Numel(outShape))
	points := ops.Numel(sp)
	base := make([]float64, k+1) // (x, y[, z], 1)
	base[k] = 1
	for b := 0; b < int(size[0]); b++ {
		th := tv[b*k*(k+1) : (b+1)*k*(k+1)]
		ops.ForEachIndex(sp, func(p int, pos []int) {
			for d := range k {
				base[d] = coords[k-1-d][pos[k-1-d]]
			}
			o := out[(b*points+p)*k : (b*points+p+1)*k]
			for i := range k {
				s := 0.0
				for j, v := range base {
					s += th[i*(k+1)+j] * v
				}
				o[i] = s
			}
		})
	}
	return ops.FloatResult(theta.DType(), outShape, out)
}
