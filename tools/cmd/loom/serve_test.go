package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-port", "-1"}, "--http-port -1: want 0-65535"},
		{[]string{"--model-repository", "no/such/dir"}, "--model-repository no/such/dir: not a directory"},
		{[]string{"--model-name", "m"}, "--model-name names the model of --model-dir"},
		{[]string{"--max-body-bytes", "0"}, "--max-body-bytes 0: want a positive size"},
		{[]string{"--ep", "tpu"}, "unknown execution provider"},
		{[]string{"extra"}, `takes no arguments, got ["extra"]`},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, loomMain(append([]string{"serve"}, tc.args...), &out, &errOut), "%v", tc.args)
		assert.Contains(t, errOut.String(), tc.want)
		assert.Empty(t, out.String())
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, loomMain([]string{"serve", "-h"}, &out, &errOut))
	assert.Contains(t, out.String(), "--model-repository")
}

// `loom serve` with no model arguments serves the demo MNIST model, prints the ready line, and
// shuts down gracefully on its signal.
func TestServeDemoModel(t *testing.T) {
	saved := serveSignals
	serveSignals = []os.Signal{syscall.SIGUSR1}
	defer func() { serveSignals = saved }()
	pr, pw := io.Pipe()
	var errOut syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- loomMain([]string{"serve", "--host", "127.0.0.1", "--http-port", "0", "--grpc-port", "0"}, pw, &errOut)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err, "stderr: %s", errOut.String())
	m := regexp.MustCompile(`^loom serve: ready http=(127\.0\.0\.1:\d+) grpc=(127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(line)
	require.NotNil(t, m, "ready line %q", line)
	go io.Copy(io.Discard, pr) //nolint:errcheck
	base := "http://" + m[1]
	resp, err := http.Get(base + "/v2/health/ready")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	digit, err := embeddedFloats("demodata/digit2.npy")
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "Input3", "datatype": "FP32", "shape": []int{1, 1, 28, 28}, "data": digit.Data()}}})
	require.NoError(t, err)
	resp, err = http.Post(base+"/v2/models/mnist/versions/1/infer", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	var res struct {
		Outputs []struct {
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	resp.Body.Close()
	require.Len(t, res.Outputs, 1)
	assert.Equal(t, 2, argmax(res.Outputs[0].Data), "the demo's digit 2")
	http.DefaultClient.CloseIdleConnections()

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
	select {
	case code := <-exit:
		assert.Equal(t, exitOK, code, "stderr: %s", errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatal("loom serve did not stop on its signal")
	}
	assert.True(t, strings.Contains(errOut.String(), "shutting down"), errOut.String())
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
