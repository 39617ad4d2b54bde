// Command modelrefs writes the fixed-seed inputs of go/session's real-model tests
// (realmodels_test.go) as .npy files; tools/models/make_refs.sh then runs ONNX Runtime on them
// to make the reference outputs committed beside them.
//
//	modelrefs -o go/session/testdata/realmodels
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sileroChunks is how many 512-sample chunks the Silero VAD test streams its state through.
const sileroChunks = 3

func main() {
	out := flag.String("o", "", "the directory to write the inputs under")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: modelrefs -o DIR")
		os.Exit(2)
	}
	if err := write(*out); err != nil {
		fmt.Fprintf(os.Stderr, "modelrefs: %v\n", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	// One generator per model, so that adding a model leaves the others' inputs unchanged.
	enc := rand.New(rand.NewPCG(1, 101))
	if err := writeF32(filepath.Join(dir, "tiny_encoder", "x.npy"), []int64{2, 7, 64}, uniform(enc, 2*7*64, 1)); err != nil {
		return err
	}
	vad := rand.New(rand.NewPCG(2, 202))
	for i := range sileroChunks {
		// Speech-like audio: a few tones under noise, at a level where the model's output moves.
		samples := make([]float32, 512)
		for j := range samples {
			t := float64(i*512+j) / 16000
			v := 0.3*math.Sin(2*math.Pi*220*t) + 0.2*math.Sin(2*math.Pi*587*t+1) + 0.1*(vad.Float64()*2-1)
			samples[j] = float32(v)
		}
		if err := writeF32(filepath.Join(dir, "silero_vad_v5", fmt.Sprintf("input_%d.npy", i)), []int64{1, 512}, samples); err != nil {
			return err
		}
	}
	if err := writeF32(filepath.Join(dir, "silero_vad_v5", "state_0.npy"), []int64{2, 1, 128}, make([]float32, 2*128)); err != nil {
		return err
	}
	ocr := rand.New(rand.NewPCG(3, 303))
	return writeF32(filepath.Join(dir, "ppocr_v4_rec", "x.npy"), []int64{1, 3, 48, 320}, uniform(ocr, 3*48*320, 1))
}

// uniform returns n values uniform in [-scale, scale).
func uniform(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((r.Float64()*2 - 1) * scale)
	}
	return v
}

// writeF32 writes a float32 .npy file (version 1.0, C order).
func writeF32(path string, shape []int64, data []float32) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	s := strings.Join(dims, ", ")
	if len(dims) == 1 {
		s += ","
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", s)
	header += strings.Repeat(" ", (64-(10+len(header)+1)%64)%64) + "\n"
	var buf bytes.Buffer
	buf.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&buf, binary.LittleEndian, uint16(len(header)))
	buf.WriteString(header)
	binary.Write(&buf, binary.LittleEndian, data)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
