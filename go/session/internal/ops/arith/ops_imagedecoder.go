package arith

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"strconv"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ImageDecoder (opset 20): an encoded image (a 1-D uint8 tensor) decoded into (H, W, C) uint8,
// C 3 for pixel_format RGB or BGR and 1 for Grayscale. BMP, TIFF and WebP decode with
// golang.org/x/image, PNG and JPEG with Go's standard library, PNM (P1-P6) here. JPEG chroma
// is upsampled as the spec says (libjpeg-turbo's "fancy" upsampling, with its rounding) and
// converted with libjpeg's fixed-point YCbCr to RGB; Grayscale is Pillow's luma of the RGB
// pixels, as ONNX's reference takes it. Data that no decoder takes (JPEG 2000 among it) gives
// an empty (0, 0, C) image, as the spec asks of an image that cannot be decoded.

func init() {
	ops.HostOps["ImageDecoder"] = opImageDecoder
}

// maxImagePixels bounds a decoded image (a header may claim any size).
const maxImagePixels = 1 << 28

func opImageDecoder(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	enc := in[0]
	if enc.DType() != graph.Uint8 || len(enc.Dims()) != 1 {
		return nil, fmt.Errorf("the encoded stream is %s; want a 1-D uint8 tensor", enc)
	}
	data := enc.Data().([]uint8)
	format := n.AttrString("pixel_format", "RGB")
	channels := int64(3)
	switch format {
	case "RGB", "BGR":
	case "Grayscale":
		channels = 1
	default:
		return nil, fmt.Errorf("pixel_format %q is not RGB, BGR or Grayscale", format)
	}
	img := decodeImage(data)
	if img == nil {
		return []tensor.Tensor{tensor.Raw(graph.Uint8, []int64{0, 0, channels}, []uint8{})}, nil
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	shape := []int64{int64(h), int64(w), channels}
	if err := ops.ReserveShape(rc, "the decoded image", graph.Uint8, shape, 0); err != nil {
		return nil, err
	}
	out := make([]uint8, h*w*int(channels))
	var rgb func(x, y int) (r, g, b uint8)
	if yc, ok := img.(*image.YCbCr); ok {
		rgb = fancyRGB(yc, isWebP(data))
	} else {
		rgb = func(x, y int) (uint8, uint8, uint8) {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			return c.R, c.G, c.B
		}
	}
	for y := range h {
		for x := range w {
			r, g, bl := rgb(x, y)
			o := (y*w + x) * int(channels)
			switch format {
			case "RGB":
				out[o], out[o+1], out[o+2] = r, g, bl
			case "BGR":
				out[o], out[o+1], out[o+2] = bl, g, r
			default: // Pillow's ITU-R 601-2 luma: L = R·299/1000 + G·587/1000 + B·114/1000
				out[o] = uint8((int(r)*19595 + int(g)*38470 + int(bl)*7471 + 0x8000) >> 16)
			}
		}
	}
	return []tensor.Tensor{tensor.Raw(graph.Uint8, shape, out)}, nil
}

// decodeImage decodes data by its signature, or returns nil when no decoder takes it (or it
// claims more than maxImagePixels).
func decodeImage(data []byte) image.Image {
	var decode func(io.Reader) (image.Image, error)
	var config func(io.Reader) (image.Config, error)
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		decode, config = png.Decode, png.DecodeConfig
	case bytes.HasPrefix(data, []byte("\xff\xd8")):
		decode, config = jpeg.Decode, jpeg.DecodeConfig
	case bytes.HasPrefix(data, []byte("BM")):
		decode, config = bmp.Decode, bmp.DecodeConfig
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		decode, config = tiff.Decode, tiff.DecodeConfig
	case isWebP(data):
		decode, config = webp.Decode, webp.DecodeConfig
	case len(data) >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6':
		img, err := decodePNM(data)
		if err != nil {
			return nil
		}
		return img
	default:
		return nil
	}
	c, err := config(bytes.NewReader(data))
	if err != nil || c.Width <= 0 || c.Height <= 0 || int64(c.Width)*int64(c.Height) > maxImagePixels {
		return nil
	}
	img, err := decode(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	return img
}

// isWebP reports whether data starts as a WebP file does.
func isWebP(data []byte) bool {
	return len(data) >= 12 && bytes.HasPrefix(data, []byte("RIFF")) && string(data[8:12]) == "WEBP"
}

// decodePNM decodes the Netpbm formats: P1/P4 bitmaps (1 is black), P2/P5 gray maps and
// P3/P6 pixmaps, with a maximum value up to 65535 (scaled to 0-255, rounded).
func decodePNM(data []byte) (image.Image, error) {
	r := bufio.NewReader(bytes.NewReader(data))
	magic := make([]byte, 2)
	if _, err := io.ReadFull(r, magic); err != nil {
		return nil, err
	}
	kind := magic[1] - '0'
	// token reads the next whitespace-separated header or plain-text value, skipping comments.
	token := func() (int, error) {
		var digits []byte
		for {
			c, err := r.ReadByte()
			if err != nil {
				if len(digits) > 0 {
					break
				}
				return 0, err
			}
			if c == '#' && len(digits) == 0 {
				if _, err := r.ReadString('\n'); err != nil {
					return 0, err
				}
				continue
			}
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' {
				if len(digits) > 0 {
					break
				}
				continue
			}
			if kind == 1 && len(digits) == 0 && (c == '0' || c == '1') {
				return int(c - '0'), nil // P1's pixels need no separators
			}
			digits = append(digits, c)
			if len(digits) > 9 {
				return 0, fmt.Errorf("a number of over 9 digits")
			}
		}
		return strconv.Atoi(string(digits))
	}
	w, err := token()
	if err != nil {
		return nil, err
	}
	h, err := token()
	if err != nil {
		return nil, err
	}
	if w <= 0 || h <= 0 || int64(w)*int64(h) > maxImagePixels {
		return nil, fmt.Errorf("size %dx%d", w, h)
	}
	maxv := 1
	if kind != 1 && kind != 4 {
		if maxv, err = token(); err != nil {
			return nil, err
		}
		if maxv < 1 || maxv > 65535 {
			return nil, fmt.Errorf("maximum value %d", maxv)
		}
	}
	scale := func(v int) uint8 {
		if v > maxv {
			v = maxv
		}
		return uint8((v*255 + maxv/2) / maxv)
	}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	set := func(i int, r, g, b uint8) {
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = r, g, b, 255
	}
	sample := func() (int, error) { // one binary sample of P5/P6
		if maxv < 256 {
			c, err := r.ReadByte()
			return int(c), err
		}
		var b [2]byte
		_, err := io.ReadFull(r, b[:])
		return int(b[0])<<8 | int(b[1]), err
	}
	switch kind {
	case 1, 2, 3, 5, 6:
		per := 1
		if kind == 3 || kind == 6 {
			per = 3
		}
		var v [3]int
		for i := range w * h {
			for k := range per {
				if kind == 5 || kind == 6 {
					v[k], err = sample()
				} else {
					v[k], err = token()
				}
				if err != nil {
					return nil, err
				}
			}
			switch {
			case kind == 1:
				g := uint8(255 * (1 - min(v[0], 1)))
				set(i, g, g, g)
			case per == 1:
				g := scale(v[0])
				set(i, g, g, g)
			default:
				set(i, scale(v[0]), scale(v[1]), scale(v[2]))
			}
		}
		return img, nil
	case 4:
		row := make([]byte, (w+7)/8)
		for y := range h {
			if _, err := io.ReadFull(r, row); err != nil {
				return nil, err
			}
			for x := range w {
				g := uint8(255)
				if row[x/8]>>(7-uint(x%8))&1 == 1 {
					g = 0
				}
				set(y*w+x, g, g, g)
			}
		}
		return img, nil
	}
	return nil, fmt.Errorf("P%d", kind)
}

// fancyRGB converts a decoded JPEG (or WebP) YCbCr image to RGB as libjpeg-turbo does by
// default: chroma upsampled by a triangle filter (each output pixel ¾ of its nearest input
// sample and ¼ of the next one, in each subsampled direction, rounding alternately down and up),
// then libjpeg's fixed-point YCbCr to RGB. Subsampling ratios other than 4:2:0 and 4:2:2 use
// Go's nearest-sample conversion.
func fancyRGB(img *image.YCbCr, limited bool) func(x, y int) (r, g, b uint8) {
	bd := img.Bounds()
	w, h := bd.Dx(), bd.Dy()
	var vert bool
	switch img.SubsampleRatio {
	case image.YCbCrSubsampleRatio420:
		vert = true
	case image.YCbCrSubsampleRatio422:
	default:
		return func(x, y int) (uint8, uint8, uint8) {
			c := img.YCbCrAt(bd.Min.X+x, bd.Min.Y+y)
			return color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
		}
	}
	cw := (w + 1) / 2
	ch := h
	if vert {
		ch = (h + 1) / 2
	}
	up := func(plane []uint8) []uint8 {
		out := make([]uint8, w*h)
		row := make([]int, cw)
		for y := range h {
			cy := y
			if vert {
				cy = y / 2
			}
			for i := range cw {
				v := int(plane[cy*img.CStride+i])
				if !vert {
					row[i] = v
					continue
				}
				nb := cy - 1 // the neighbouring chroma row: above for an even output row, below for odd
				if y%2 == 1 {
					nb = cy + 1
				}
				nb = max(0, min(ch-1, nb))
				row[i] = v*3 + int(plane[nb*img.CStride+i]) // the column sums, 4x the sample
			}
			// The row is extended by its edge samples; the 2-D filter rounds even outputs half
			// up and odd ones half down, the horizontal one the other way round.
			at := func(i int) int { return row[max(0, min(cw-1, i))] }
			for x := range w {
				i := x / 2
				var v int
				switch {
				case vert && x%2 == 0:
					v = (at(i)*3 + at(i-1) + 8) >> 4
				case vert:
					v = (at(i)*3 + at(i+1) + 7) >> 4
				case x%2 == 0:
					v = (at(i)*3 + at(i-1) + 1) >> 2
				default:
					v = (at(i)*3 + at(i+1) + 2) >> 2
				}
				out[y*w+x] = uint8(v)
			}
		}
		return out
	}
	cb, cr := up(img.Cb), up(img.Cr)
	clamp := func(v int) uint8 { return uint8(max(0, min(255, v))) }
	fix := func(f float64) int { return int(f*65536 + 0.5) }
	if limited {
		// WebP's lossy (VP8) samples are ITU-R BT.601 with Y in 16-235 and chroma in 16-240.
		ky, kr, kgu, kgv, kb := fix(255.0/219), fix(1.402*255/224), fix(0.344136*255/224), fix(0.714136*255/224), fix(1.772*255/224)
		return func(x, y int) (uint8, uint8, uint8) {
			yy := ky * (int(img.Y[y*img.YStride+x]) - 16)
			u, v := int(cb[y*w+x])-128, int(cr[y*w+x])-128
			return clamp((yy + kr*v + 32768) >> 16), clamp((yy - kgu*u - kgv*v + 32768) >> 16), clamp((yy + kb*u + 32768) >> 16)
		}
	}
	cr2r, cb2g, cr2g, cb2b := fix(1.40200), fix(0.34414), fix(0.71414), fix(1.77200)
	return func(x, y int) (uint8, uint8, uint8) {
		yy := int(img.Y[y*img.YStride+x])
		u, v := int(cb[y*w+x])-128, int(cr[y*w+x])-128
		return clamp(yy + (cr2r*v+32768)>>16), clamp(yy + (-cb2g*u-cr2g*v+32768)>>16), clamp(yy + (cb2b*u+32768)>>16)
	}
}
