package main

import (
	"context"
	"embed"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/tools/internal/npy"
)

// The demo's model and samples: the MNIST CNN of github.com/owulveryck/onnx-go v0.5.0 (MIT,
// demodata/LICENSE.onnx-go) and its three test data sets. gen_demodata.go extracts them,
// naming each sample after the digit its reference output picks: digitD.npy is an image of the
// digit D and digitD_expected.npy the model's reference scores for it.
//
//go:generate go run gen_demodata.go
//go:embed demodata/mnist.onnx demodata/digit*.npy
var demoData embed.FS

// demoDigits are the samples in demodata, in the order of onnx-go's test data sets 0, 1, 2:
// digit2.npy, digit0.npy, digit9.npy (TestDemoSamplesAreNamedAfterTheirDigit checks the names
// against the reference outputs).
var demoDigits = []int{2, 0, 9}

// demoSamples is how many samples the demo runs.
var demoSamples = len(demoDigits)

func init() {
	register("demo", "classify three handwritten digits with a small CNN built into this binary", demoMain)
}

// demoMain implements `loom demo [--ep host|cuda|auto] [--threads N]`. For each sample it
// draws the digit, charts the model's confidence per class and checks the prediction and the
// scores against the reference outputs that came with the model; it fails when one differs.
func demoMain(args []string, stdout, stderr io.Writer) int {
	c := newCommand("demo", "demo [--ep host|cuda|auto] [--threads N] [-v]",
		"Runs the MNIST digit classifier built into this binary (the CNN of github.com/owulveryck/onnx-go\n"+
			"v0.5.0, MIT) on its three sample digits and checks the predictions and scores against the\n"+
			"reference outputs (exit 1 when one differs).", stdout, stderr)
	provider := c.String("ep", "host", "execution provider: host, cuda or auto")
	threads := c.Int("threads", 0, "host worker threads (0: one per core)")
	verbose := c.Bool("v", false, "list every node that does not run on the provider --ep names")
	pos, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	if len(pos) != 0 {
		return c.usageError("takes no arguments, got %q", pos)
	}
	if err := checkProvider(*provider); err != nil {
		return c.badArgument("%v", err)
	}
	model, err := demoData.ReadFile("demodata/mnist.onnx")
	if err != nil {
		fmt.Fprintf(stderr, "loom demo: %v\n", err)
		return 1
	}
	start := time.Now()
	s, err := session.LoadBytes(model, session.WithExecutionProvider(session.ExecutionProvider(*provider)), session.WithIntraOpThreads(*threads))
	if err != nil {
		fmt.Fprintf(stderr, "loom demo: %v\n", err)
		return 1
	}
	defer s.Close()
	loadMs := msSince(start)
	// One line: without a GPU every node falls back for the same reason.
	reportFallbacks(stderr, "loom demo", *provider, s.ExecutionProviderFallbackReport(), *verbose)
	in, out := s.Inputs()[0], s.Outputs()[0]
	fmt.Fprintf(stdout, "Loom demo: a convolutional network (%d KB, built into this binary) reads handwritten digits.\n", len(model)/1024)
	fmt.Fprintf(stdout, "Loaded for %s in %.1f ms. Input %q %v: a 28x28 grey image; output %q: one score per digit 0-9.\n",
		s.Provider(), loadMs, in.Name, in.Shape, out.Name)
	// The first run builds the compiled run plan (and compiles, once per machine, any kernel
	// not shipped in the binary); a warm-up run keeps that out of the per-sample latencies.
	warm, err := embeddedFloats(fmt.Sprintf("demodata/digit%d.npy", demoDigits[0]))
	if err != nil {
		fmt.Fprintf(stderr, "loom demo: %v\n", err)
		return 1
	}
	start = time.Now()
	if _, err := s.Run(context.Background(), []session.NamedTensor{{Name: in.Name, Tensor: warm}}); err != nil {
		fmt.Fprintf(stderr, "loom demo: warm-up run: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Warm-up run (builds the run plan; compiles any kernel not shipped in this binary, once per machine): %.1f ms.\n", msSince(start))

	wrong := 0
	for i := 0; i < demoSamples; i++ {
		ok, err := demoSample(stdout, s, i)
		if err != nil {
			fmt.Fprintf(stderr, "loom demo: sample %d: %v\n", i+1, err)
			return 1
		}
		if !ok {
			wrong++
		}
	}
	fmt.Fprintln(stdout)
	if wrong > 0 {
		fmt.Fprintf(stdout, "%d of %d samples differ from the reference answers.\n", wrong, demoSamples)
		return 1
	}
	fmt.Fprintf(stdout, "All %d predictions match the reference answers. Next: `loom run`, `loom bench`, `loom inspect` on your own .onnx files.\n", demoSamples)
	return 0
}

// demoTolerance bounds the score differences from the reference outputs: the scores are logits
// of magnitude ~10-100, summed over ~5000 products in a different order than the reference.
const demoTolerance = 1e-2

// demoSample runs sample i, prints it and reports whether the prediction and the scores match
// the reference.
func demoSample(w io.Writer, s *session.InferenceSession, i int) (bool, error) {
	image, err := embeddedFloats(fmt.Sprintf("demodata/digit%d.npy", demoDigits[i]))
	if err != nil {
		return false, err
	}
	want, err := embeddedFloats(fmt.Sprintf("demodata/digit%d_expected.npy", demoDigits[i]))
	if err != nil {
		return false, err
	}
	if image.Len() != 28*28 || want.Len() != 10 {
		return false, fmt.Errorf("demodata holds %s and %s, want 784 pixels and 10 scores", image, want)
	}
	start := time.Now()
	outs, err := s.Run(context.Background(), []session.NamedTensor{{Name: s.Inputs()[0].Name, Tensor: image}})
	runMs := msSince(start)
	if err != nil {
		return false, err
	}
	got, err := session.TensorOf[float32](outs[0])
	if err != nil || len(got) != 10 {
		return false, fmt.Errorf("the model returned %s, want 10 float scores", outs[0])
	}
	ref, _ := session.TensorOf[float32](want)
	pred, expected := argmax(got), argmax(ref)
	diff := 0.0
	for k := range got {
		diff = max(diff, math.Abs(float64(got[k]-ref[k])))
	}
	ok := pred == expected && diff <= demoTolerance

	verdict := fmt.Sprintf("correct: the reference answer is %d too", expected)
	if pred != expected {
		verdict = fmt.Sprintf("WRONG: the reference answer is %d", expected)
	}
	fmt.Fprintf(w, "\nSample %d of %d: the model says %d (%s), in %.2f ms on %s\n", i+1, demoSamples, pred, verdict, runMs, s.Provider())
	pixels, _ := session.TensorOf[float32](image)
	art := digitArt(pixels)
	chart := confidenceChart(got, pred)
	for line := 0; line < max(len(art), len(chart)); line++ {
		left, right := strings.Repeat(" ", 28), ""
		if line < len(art) {
			left = art[line]
		}
		if line < len(chart) {
			right = chart[line]
		}
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  |%s|   %s", left, right), " "))
	}
	note := "match"
	if diff > demoTolerance {
		note = "DIFFER FROM"
	}
	fmt.Fprintf(w, "  the 10 scores %s the reference outputs (largest difference %.2g)\n", note, diff)
	return ok, nil
}

func embeddedFloats(name string) (session.Tensor, error) {
	b, err := demoData.ReadFile(name)
	if err != nil {
		return session.Tensor{}, err
	}
	t, err := npy.Decode(name, b)
	if err != nil {
		return session.Tensor{}, err
	}
	if _, err := session.TensorOf[float32](t); err != nil {
		return session.Tensor{}, fmt.Errorf("%s: %v", name, err)
	}
	return t, nil
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// digitArt draws a 28x28 image as 14 lines of 28 characters: each character covers one column
// of two pixel rows (terminal cells are about twice as tall as wide), darker ink for brighter
// pixels.
func digitArt(pixels []float32) []string {
	const ramp = " .:-=+*#%@"
	hi := float32(0)
	for _, p := range pixels {
		hi = max(hi, p)
	}
	if hi == 0 {
		hi = 1
	}
	lines := make([]string, 14)
	for r := range lines {
		var b strings.Builder
		for c := 0; c < 28; c++ {
			v := (pixels[2*r*28+c] + pixels[(2*r+1)*28+c]) / 2 / hi
			k := int(v*float32(len(ramp)-1) + 0.5)
			b.WriteByte(ramp[min(max(k, 0), len(ramp)-1)])
		}
		lines[r] = b.String()
	}
	return lines
}

// confidenceChart turns the scores (logits) into probabilities with a softmax and draws one
// bar per digit, marking the prediction.
func confidenceChart(scores []float32, pred int) []string {
	hi := scores[pred]
	probs := make([]float64, len(scores))
	sum := 0.0
	for i, s := range scores {
		probs[i] = math.Exp(float64(s - hi))
		sum += probs[i]
	}
	lines := []string{"digit  confidence"}
	for i, p := range probs {
		p /= sum
		bar := strings.Repeat("█", int(math.Round(p*20)))
		mark := ""
		if i == pred {
			mark = "  <- prediction"
		}
		lines = append(lines, fmt.Sprintf("  %d    %-20s %5.1f%%%s", i, bar, 100*p, mark))
	}
	return lines
}
