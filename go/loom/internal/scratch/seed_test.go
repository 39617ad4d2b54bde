package scratch

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteSeeds(t *testing.T) {
	root := "../../"
	var inputs [][]byte
	for _, pat := range []string{"../../kernels/*.loom", "types/testdata/*.loom", "parser/testdata/*.loom"} {
		files, _ := filepath.Glob(filepath.Join(root, pat))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			inputs = append(inputs, data)
		}
	}
	extra := []string{
		"", "kernel", "kernel k {", "kernel k[T type = f32] { launch() { grid = (1) ; block = 1 } device() {} }",
		"kernel k { launch(n index) { grid = (n,1,1); block = (1,1,1) } device(x buffer[f32] write, n index) { for i := unroll(4) { x[i:i+4] = vec[4]f32(f32(i)) } } }",
		"kernel k { launch() { grid = (1,1,1); block = (2,1,1) } device(x buffer[i32] read_write) { var a [2][2]vec[4]i32\n a[thread_id.x][1] = a[0][0] >> 3\n barrier()\n x[0] = reduce_add(a[1][1]) } }",
		"/* c */ const A = 1 << 511\nkernel k { launch() { grid = (A > 0, 1, 1) } }",
		"kernel k { device(s f16, b bf16) { x := s + s; y := f32(b) / 0.0 } launch() { grid = (1,1,1); block = (1,1,1) } }",
		"\"\x00", "kernel k { device() { x := ((((((1)))))) } }", "0x_1 1e+ .5 1_000 0b102 0o8",
	}
	for _, e := range extra {
		inputs = append(inputs, []byte(e))
	}
	for _, target := range []string{"parser/testdata/fuzz/FuzzParse", "types/testdata/fuzz/FuzzCheck"} {
		dir := filepath.Join(root, target)
		os.MkdirAll(dir, 0o755)
		for _, in := range inputs {
			sum := sha256.Sum256(in)
			name := fmt.Sprintf("seed-%x", sum[:8])
			os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)), 0o644)
		}
	}
}
