package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loomrt/loom/go/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemoPredictsEverySampleCorrectly(t *testing.T) {
	var out, errOut bytes.Buffer
	rc := demoMain([]string{"--ep", "host", "--threads", "1"}, &out, &errOut)
	require.Equal(t, 0, rc, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	text := out.String()
	for i := 0; i < demoSamples; i++ {
		want, err := embeddedFloats(fmt.Sprintf("demodata/digit%d_expected.npy", demoDigits[i]))
		require.NoError(t, err)
		scores, err := session.TensorOf[float32](want)
		require.NoError(t, err)
		expected := argmax(scores)
		assert.Contains(t, text, fmt.Sprintf("Sample %d of %d: the model says %d (correct: the reference answer is %d too)", i+1, demoSamples, expected, expected))
	}
	// The drawing, the chart and the verdicts.
	assert.Equal(t, demoSamples, strings.Count(text, "<- prediction"))
	assert.Equal(t, demoSamples, strings.Count(text, "the 10 scores match the reference outputs"))
	assert.Regexp(t, regexp.MustCompile(`(?m)^  \|[ .:\-=+*#%@]{28}\|`), text)
	assert.Contains(t, text, "All 3 predictions match")
}

func TestDemoRejectsArguments(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, demoMain([]string{"model.onnx"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "usage: loom demo")
	errOut.Reset()
	assert.Equal(t, 2, demoMain([]string{"--ep", "tpu"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "tpu")
	assert.Empty(t, out.String())
}

func TestDigitArtDrawsBrightPixelsDark(t *testing.T) {
	pixels := make([]float32, 28*28)
	for c := 0; c < 28; c++ { // a bright bar over pixel rows 4 and 5: art line 2
		pixels[4*28+c], pixels[5*28+c] = 255, 255
	}
	pixels[20*28+3] = 255 // one bright pixel over a dark one: half ink on line 10
	art := digitArt(pixels)
	require.Len(t, art, 14)
	assert.Equal(t, strings.Repeat("@", 28), art[2])
	assert.Equal(t, strings.Repeat(" ", 28), art[0])
	assert.Equal(t, byte('+'), art[10][3])
}

func TestConfidenceChartIsASoftmax(t *testing.T) {
	// Equal scores for 3 and 7, far below for the rest: 50% each.
	scores := []float32{-50, -50, -50, 4, -50, -50, -50, 4, -50, -50}
	chart := confidenceChart(scores, 3)
	require.Len(t, chart, 11)
	assert.Equal(t, "  3    ██████████            50.0%  <- prediction", chart[4])
	assert.Equal(t, "  7    ██████████            50.0%", chart[8])
	assert.Contains(t, chart[1], "  0.0%")
}

// The committed samples work as `loom bench` inputs too (docs/cli.md uses them).
func TestBenchReadsNpyInputs(t *testing.T) {
	rc, out, errOut := runBenchArgs(t, filepath.Join("demodata", "mnist.onnx"),
		"Input3="+filepath.Join("demodata", "digit2.npy"), "--runs", "2", "--warmup", "0", "--ep", "host")
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "mnist.onnx on host: median")
}
