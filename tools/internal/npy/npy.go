// Package npy reads and writes NumPy's .npy files (C order, little-endian, the element types
// go/session's tensors have): `loom run`'s inputs and outputs, and the test tools' references.
package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// descriptors maps element types to NumPy's little-endian type descriptors.
var descriptors = map[session.DType]string{
	graph.Float: "<f4", graph.Double: "<f8", graph.Float16: "<f2", graph.Int8: "|i1", graph.Int16: "<i2",
	graph.Int32: "<i4", graph.Int64: "<i8", graph.Uint8: "|u1", graph.Uint16: "<u2", graph.Uint32: "<u4",
	graph.Uint64: "<u8", graph.Bool: "|b1",
}

// Write writes t as a version 1.0 .npy file.
func Write(path string, t session.Tensor) error {
	d, ok := descriptors[t.DType()]
	if !ok {
		return fmt.Errorf("element type %s has no .npy encoding", t.DType())
	}
	dims := make([]string, 0, t.Rank())
	for _, d := range t.Shape() {
		dims = append(dims, strconv.FormatInt(d, 10))
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", d, shape)
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	var buf bytes.Buffer
	buf.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&buf, binary.LittleEndian, uint16(len(header)))
	buf.WriteString(header)
	if err := binary.Write(&buf, binary.LittleEndian, t.Data()); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

var (
	descrRE = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	orderRE = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	shapeRE = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// Read reads a C-ordered, little-endian .npy file (versions 1 to 3).
func Read(path string) (session.Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return session.Tensor{}, err
	}
	return Decode(path, b)
}

// Decode decodes the bytes of a .npy file; path names it in errors.
func Decode(path string, b []byte) (session.Tensor, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return session.Tensor{}, fmt.Errorf("%s is not a .npy file", path)
	}
	var hlen, off int
	if b[6] == 1 {
		hlen, off = int(binary.LittleEndian.Uint16(b[8:])), 10
	} else {
		if len(b) < 12 {
			return session.Tensor{}, fmt.Errorf("%s: truncated header", path)
		}
		hlen, off = int(binary.LittleEndian.Uint32(b[8:])), 12
	}
	if off+hlen > len(b) {
		return session.Tensor{}, fmt.Errorf("%s: truncated header", path)
	}
	header, data := string(b[off:off+hlen]), b[off+hlen:]
	d, o, s := descrRE.FindStringSubmatch(header), orderRE.FindStringSubmatch(header), shapeRE.FindStringSubmatch(header)
	if d == nil || o == nil || s == nil {
		return session.Tensor{}, fmt.Errorf("%s: unreadable header %q", path, header)
	}
	if o[1] == "True" {
		return session.Tensor{}, fmt.Errorf("%s: Fortran order is not supported", path)
	}
	var dt session.DType
	for k, v := range descriptors {
		if v == d[1] || (v[0] == '|' && "<"+v[1:] == d[1]) {
			dt = k
		}
	}
	if dt == graph.Undefined {
		return session.Tensor{}, fmt.Errorf("%s: NumPy type %s is not supported", path, d[1])
	}
	var shape []int64
	for _, f := range strings.Split(s[1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return session.Tensor{}, fmt.Errorf("%s: bad shape %q", path, s[1])
		}
		shape = append(shape, v)
	}
	gt, err := graph.NewTensor("npy", dt, shape, data)
	if err != nil {
		return session.Tensor{}, fmt.Errorf("%s: %v", path, err)
	}
	return session.FromGraphTensor(gt)
}
