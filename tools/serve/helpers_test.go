package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/tools/internal/npy"
)

// Paths from this package's directory (tools/serve) to what the tests use.
const (
	repoRoot    = "../.."
	mnistModel  = "../cmd/loom/demodata/mnist.onnx"
	encoderPath = "../../go/session/testdata/models/tiny_encoder.onnx"
	addModel    = "../../go/session/testdata/models/add.onnx"
	servingDoc  = "../../docs/serving.md"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// loomBinary returns the loom command under test: LOOM_BINARY when set, else one built from
// this checkout (once per test binary) into a temporary directory.
func loomBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LOOM_BINARY"); p != "" {
		return p
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "loom-serve-test-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "loom")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "./cmd/loom")
		cmd.Dir = ".." // the tools module
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/loom: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// serverHasServe reports whether the loom command has the serve subcommand.
func serverHasServe(t *testing.T, bin string) bool {
	t.Helper()
	out, err := exec.Command(bin, "help", "serve").CombinedOutput()
	return err == nil && strings.Contains(string(out), "serve")
}

// readyRE is the one stdout line `loom serve` prints once it serves.
var readyRE = regexp.MustCompile(`^loom serve: ready http=(\S+) grpc=(\S+)$`)

// server is a running `loom serve`.
type server struct {
	cmd      *exec.Cmd
	httpAddr string
	grpcAddr string
	mu       sync.Mutex
	stderr   bytes.Buffer
	stdout   bytes.Buffer
	done     chan struct{} // closed when the process has exited
	waitErr  error
}

func (s *server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", s.stdout.String(), s.stderr.String())
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// startServer starts `loom serve --host 127.0.0.1 --http-port 0 --grpc-port 0 ARGS...` and
// waits for its ready line. Cleanup sends SIGTERM and expects a graceful exit with status 0.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	bin := loomBinary(t)
	if !serverHasServe(t, bin) {
		t.Fatalf("%s has no serve command (`loom help serve` fails)", bin)
	}
	full := append([]string{"serve", "--host", "127.0.0.1", "--http-port", "0", "--grpc-port", "0"}, args...)
	s := &server{cmd: exec.Command(bin, full...), done: make(chan struct{})}
	s.cmd.Stderr = lockedWriter{&s.mu, &s.stderr}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan []string, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stdout.WriteString(line + "\n")
			s.mu.Unlock()
			if m := readyRE.FindStringSubmatch(line); m != nil {
				select {
				case ready <- m:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		<-readerDone // Wait closes the pipe: read all of it first
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.stop(t) })
	select {
	case m := <-ready:
		s.httpAddr, s.grpcAddr = m[1], m[2]
	case <-s.done:
		t.Fatalf("loom %s exited before it was ready: %v\n%s", strings.Join(full, " "), s.waitErr, s.logs())
	case <-time.After(3 * time.Minute):
		t.Fatalf("loom %s printed no ready line in 3 minutes\n%s", strings.Join(full, " "), s.logs())
	}
	t.Logf("loom serve: http=%s grpc=%s", s.httpAddr, s.grpcAddr)
	return s
}

// stop sends SIGTERM and waits for a graceful exit (status 0), killing the server after 60 s.
func (s *server) stop(t *testing.T) {
	select {
	case <-s.done:
	default:
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("SIGTERM: %v", err)
		}
		select {
		case <-s.done:
		case <-time.After(60 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
			t.Errorf("loom serve did not exit within 60 s of SIGTERM\n%s", s.logs())
			return
		}
	}
	if s.waitErr != nil {
		t.Errorf("loom serve exited with %v after SIGTERM, want status 0\n%s", s.waitErr, s.logs())
	}
}

// writeModelRepository lays out <dir>/<name>/1/model.onnx for each model (name -> source
// path) and writes <dir>/<name>/config.json where configs has one.
func writeModelRepository(t *testing.T, dir string, models map[string]string, configs map[string]string) {
	t.Helper()
	for name, src := range models {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, name, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "1", "model.onnx"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if c, ok := configs[name]; ok {
			if err := os.WriteFile(filepath.Join(dir, name, "config.json"), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// writeNpyFloat32 writes a float32 .npy file.
func writeNpyFloat32(path string, shape []int64, data []float32) error {
	t, err := session.NewTensor(shape, data)
	if err != nil {
		return err
	}
	return npy.Write(path, t)
}

// readNpyFloat32 reads a float32 .npy file as NumPy's np.save writes it.
func readNpyFloat32(path string) ([]int64, []float32, error) {
	t, err := npy.Read(path)
	if err != nil {
		return nil, nil, err
	}
	data, err := session.TensorOf[float32](t)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	return t.Shape(), data, nil
}
