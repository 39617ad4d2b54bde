package session_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// ImageDecoder on images encoded here from fresh random pixels: the lossless formats (PNG, BMP,
// TIFF, binary and plain PNM) give the pixels back exactly in RGB, BGR and Grayscale (Pillow's
// luma); JPEG gives a smooth image back within JPEG's loss; data no decoder takes, and a PNM
// claiming a huge size, give an empty image; a bad pixel_format or input is refused.
func TestImageDecoder(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 29))
	t.Logf("seed %d", seed)
	w, h := 3+rnd.IntN(20), 3+rnd.IntN(20)
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = uint8(rnd.IntN(256)), uint8(rnd.IntN(256)), uint8(rnd.IntN(256)), 255
	}
	encoded := map[string][]byte{}
	for name, enc := range map[string]func(*bytes.Buffer) error{
		"png":  func(b *bytes.Buffer) error { return png.Encode(b, img) },
		"bmp":  func(b *bytes.Buffer) error { return bmp.Encode(b, img) },
		"tiff": func(b *bytes.Buffer) error { return tiff.Encode(b, img, &tiff.Options{Compression: tiff.Deflate}) },
	} {
		var b bytes.Buffer
		require.NoError(t, enc(&b), name)
		encoded[name] = b.Bytes()
	}
	var p6, p3 bytes.Buffer
	fmt.Fprintf(&p6, "P6\n# a comment\n%d %d\n255\n", w, h)
	fmt.Fprintf(&p3, "P3 %d %d 255\n", w, h)
	for i := range w * h {
		p6.Write(img.Pix[4*i : 4*i+3])
		fmt.Fprintf(&p3, "%d %d %d\n", img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2])
	}
	encoded["ppm binary"], encoded["ppm plain"] = p6.Bytes(), p3.Bytes()

	decode := func(data []byte, format string) (session.Tensor, error) {
		g := &graph.Graph{Name: "decode", Inputs: []*graph.Value{graph.Input("data", graph.TensorType(graph.Uint8, graph.ShapeOf(int64(len(data)))))},
			Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
			Nodes:   []*graph.Node{graph.NewNode("decoder", "ImageDecoder", []string{"data"}, []string{"y"}, graph.StringAttr("pixel_format", format))}}
		outs, err := runOne(t, g, 20, nil, []session.NamedTensor{{Name: "data", Tensor: session.MustTensor([]int64{int64(len(data))}, data)}})
		if err != nil {
			return session.Tensor{}, err
		}
		return outs[0], nil
	}
	for name, data := range encoded {
		for _, format := range []string{"RGB", "BGR", "Grayscale"} {
			y, err := decode(data, format)
			require.NoError(t, err, "%s %s", name, format)
			c := 3
			if format == "Grayscale" {
				c = 1
			}
			require.Equal(t, []int64{int64(h), int64(w), int64(c)}, y.Shape(), "%s %s", name, format)
			got, err := session.TensorOf[uint8](y)
			require.NoError(t, err)
			for i := range w * h {
				r, g, b := int(img.Pix[4*i]), int(img.Pix[4*i+1]), int(img.Pix[4*i+2])
				switch format {
				case "RGB":
					require.Equal(t, []uint8{uint8(r), uint8(g), uint8(b)}, got[3*i:3*i+3], "%s pixel %d (seed %d)", name, i, seed)
				case "BGR":
					require.Equal(t, []uint8{uint8(b), uint8(g), uint8(r)}, got[3*i:3*i+3], "%s pixel %d", name, i)
				default:
					luma := math.Floor(0.299*float64(r) + 0.587*float64(g) + 0.114*float64(b) + 0.5)
					require.InDelta(t, luma, float64(got[i]), 1, "%s pixel %d", name, i)
				}
			}
		}
	}

	// JPEG: a smooth gradient comes back close to what was encoded.
	smooth := image.NewRGBA(image.Rect(0, 0, 32, 24))
	for y := range 24 {
		for x := range 32 {
			smooth.Set(x, y, color.RGBA{uint8(8 * x), uint8(10 * y), uint8(4*x + 4*y), 255})
		}
	}
	var jb bytes.Buffer
	require.NoError(t, jpeg.Encode(&jb, smooth, &jpeg.Options{Quality: 95}))
	y, err := decode(jb.Bytes(), "RGB")
	require.NoError(t, err)
	require.Equal(t, []int64{24, 32, 3}, y.Shape())
	got, _ := session.TensorOf[uint8](y)
	for i := range 32 * 24 {
		want := smooth.Pix[4*i : 4*i+3]
		for k := range 3 {
			assert.InDelta(t, float64(want[k]), float64(got[3*i+k]), 12, "jpeg pixel %d channel %d", i, k)
		}
	}

	// Undecodable data and a PNM claiming 2^31 x 2^31 pixels: an empty image, no memory taken.
	for _, data := range [][]byte{[]byte("not an image at all"), []byte("P6\n2147483647 2147483647\n255\n\x00\x01"),
		[]byte("\x89PNG\r\n\x1a\n truncated"), jb.Bytes()[:40]} {
		y, err := decode(data, "Grayscale")
		require.NoError(t, err, "%q", data)
		assert.Equal(t, []int64{0, 0, 1}, y.Shape(), "%q", data)
	}
	// A pixel format it does not know: refused naming the node.
	_, err = decode(encoded["png"], "CMYK")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"decoder"`)
	assert.Contains(t, err.Error(), `pixel_format "CMYK"`)
}
