//go:build ignore

// gen_demodata extracts the model and sample digits of `loom demo` into demodata/: the MNIST
// CNN that github.com/owulveryck/onnx-go@v0.5.0 (MIT) ships as a Go string literal, and its
// three ONNX test data sets converted to .npy, each named after the digit its reference output
// picks (digitD.npy, digitD_expected.npy; demo.go's demoDigits lists them in data set order).
// Run it with `go generate` in tools/cmd/loom; the output is byte-for-byte the same every time.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/go/session/conformance"
)

const module = "github.com/owulveryck/onnx-go@v0.5.0"

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen_demodata: ")
	dir := download()
	src := filepath.Join(dir, "internal", "examples", "mnist")
	model := modelLiteral(filepath.Join(src, "mnist_binary.go"))
	write("demodata/mnist.onnx", model)
	lic, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
	if err != nil {
		log.Fatal(err)
	}
	write("demodata/LICENSE.onnx-go", lic)
	seen := map[int]bool{}
	for i := 0; i < 3; i++ {
		set := filepath.Join(src, fmt.Sprintf("test_data_set_%d", i))
		image, _ := npyOf(filepath.Join(set, "input_0.pb"))
		expected, scores := npyOf(filepath.Join(set, "output_0.pb"))
		digit := 0
		for k, v := range scores {
			if v > scores[digit] {
				digit = k
			}
		}
		if seen[digit] {
			log.Fatalf("two samples are the digit %d", digit)
		}
		seen[digit] = true
		write(fmt.Sprintf("demodata/digit%d.npy", digit), image)
		write(fmt.Sprintf("demodata/digit%d_expected.npy", digit), expected)
	}
}

// download fetches the module through the Go proxy (outside any module, so no go.mod changes).
func download() string {
	tmp, err := os.MkdirTemp("", "gen_demodata")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("go mod download %s: %v", module, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		log.Fatalf("go mod download %s: no directory in %q", module, out)
	}
	return info.Dir
}

// modelLiteral returns the bytes of the string literal that GetMnist returns.
func modelLiteral(path string) []byte {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		log.Fatal(err)
	}
	var lit string
	ast.Inspect(f, func(n ast.Node) bool {
		if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.STRING && len(b.Value) > len(lit) {
			lit = b.Value
		}
		return true
	})
	s, err := strconv.Unquote(lit)
	if err != nil || len(s) < 1000 {
		log.Fatalf("%s: no model literal found", path)
	}
	return []byte(s)
}

// npyOf converts a serialized float TensorProto to a .npy file's bytes; it returns its
// elements too.
func npyOf(path string) ([]byte, []float32) {
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	t, _, err := conformance.DecodeTensor(b)
	if err != nil {
		log.Fatalf("%s: %v", path, err)
	}
	vals, err := session.TensorOf[float32](t)
	if err != nil {
		log.Fatalf("%s: %v", path, err)
	}
	dims := make([]string, 0, t.Rank())
	for _, d := range t.Shape() {
		dims = append(dims, strconv.FormatInt(d, 10))
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape)
	header += strings.Repeat(" ", (64-(10+len(header)+1)%64)%64) + "\n"
	var buf bytes.Buffer
	buf.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&buf, binary.LittleEndian, uint16(len(header)))
	buf.WriteString(header)
	binary.Write(&buf, binary.LittleEndian, vals)
	return buf.Bytes(), vals
}

func write(path string, b []byte) {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s  %x  %d bytes\n", path, sha256.Sum256(b), len(b))
}
