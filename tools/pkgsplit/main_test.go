package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSplitFixture moves a type with unexported fields and methods out of a package whose
// other file (and test) use them, and checks that the result builds, passes go vet and its test.
func TestSplitFixture(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	write := func(name, src string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("p/a.go", `package p

// T is a value.
type T struct {
	shape []int
	n     int
}

// Shape copies the shape.
func (t T) Shape() []int { return append([]int{}, t.shape...) }

// Dims is the shape, shared.
func (t T) Dims() []int { return t.shape }

func (t T) twice() int { return 2 * t.n }

func newT(n int) T { return T{shape: []int{n}, n: n} }

// New makes a T.
func New(n int) T { return newT(n) }
`)
	write("p/b.go", `package p

// Use uses T's internals.
func Use(n int) int {
	t := newT(n)
	return t.twice() + len(t.shape) + t.n
}
`)
	write("p/b_test.go", `package p

import "testing"

func TestUse(t *testing.T) {
	if got := Use(3); got != 10 {
		t.Fatalf("Use(3) = %d", got)
	}
	if New(2).twice() != 4 {
		t.Fatal("twice")
	}
}
`)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_ = self
	os.Args = []string{"pkgsplit", "-root", dir, "-pkg", "example.com/m/p", "-name", "sub",
		"-newpath", "example.com/m/p/sub", "-newdir", filepath.Join(dir, "p", "sub"), "-files", "a.go",
		"-funcify", "-fieldget", "shape=Dims", "-rename", ".n=Count", "-alias", filepath.Join(dir, "p", "api.go")}
	main()
	for _, args := range [][]string{{"vet", "./..."}, {"test", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "p", "b.go"))
			t.Fatalf("go %s: %v\n%s\nb.go:\n%s", strings.Join(args, " "), err, out, b)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "p", "b.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sub.NewT(n)", "sub.Twice(t)", "len(t.Dims())", "t.Count"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("b.go lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "a.go")); !os.IsNotExist(err) {
		t.Error("a.go is still in p")
	}
}
