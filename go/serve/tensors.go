package serve

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// The protocol's datatype names and the element types of Loom's Tensor they stand for.
var (
	datatypeOf = map[session.DType]string{
		graph.Bool: "BOOL", graph.Uint8: "UINT8", graph.Uint16: "UINT16", graph.Uint32: "UINT32",
		graph.Uint64: "UINT64", graph.Int8: "INT8", graph.Int16: "INT16", graph.Int32: "INT32",
		graph.Int64: "INT64", graph.Float16: "FP16", graph.BFloat16: "BF16", graph.Float: "FP32",
		graph.Double: "FP64", graph.String: "BYTES",
	}
	dtypeOf = func() map[string]session.DType {
		m := map[string]session.DType{}
		for d, n := range datatypeOf {
			m[n] = d
		}
		return m
	}()
)

// parseDatatype maps a protocol datatype name to an element type, or says which names exist.
func parseDatatype(name string) (session.DType, error) {
	if d, ok := dtypeOf[name]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("datatype %q is not supported (want BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64 or BYTES)", name)
}

// elementCount checks a request shape and returns its element count.
func elementCount(shape []int64) (int, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d > 0 && n > math.MaxInt32/d {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= d
	}
	return int(n), nil
}

// makeTensor wraps data (one of the Element slice types) as a tensor of shape.
func makeTensor(shape []int64, data any) (session.Tensor, error) {
	switch v := data.(type) {
	case []bool:
		return session.NewTensor(shape, v)
	case []uint8:
		return session.NewTensor(shape, v)
	case []uint16:
		return session.NewTensor(shape, v)
	case []uint32:
		return session.NewTensor(shape, v)
	case []uint64:
		return session.NewTensor(shape, v)
	case []int8:
		return session.NewTensor(shape, v)
	case []int16:
		return session.NewTensor(shape, v)
	case []int32:
		return session.NewTensor(shape, v)
	case []int64:
		return session.NewTensor(shape, v)
	case []session.Float16:
		return session.NewTensor(shape, v)
	case []session.BFloat16:
		return session.NewTensor(shape, v)
	case []float32:
		return session.NewTensor(shape, v)
	case []float64:
		return session.NewTensor(shape, v)
	case []string:
		return session.NewTensor(shape, v)
	}
	return session.Tensor{}, fmt.Errorf("unsupported element slice %T", data)
}

// decodeRaw decodes the protocol's raw little-endian bytes into a tensor: fixed-size elements
// without padding, or for BYTES each element as a 4-byte little-endian length and its bytes.
func decodeRaw(d session.DType, shape []int64, raw []byte) (session.Tensor, error) {
	n, err := elementCount(shape)
	if err != nil {
		return session.Tensor{}, err
	}
	if d == graph.String {
		elems := make([]string, 0, n)
		rest := raw
		for len(rest) > 0 {
			if len(rest) < 4 {
				return session.Tensor{}, fmt.Errorf("BYTES data: %d stray bytes after element %d (each element is a 4-byte length and its bytes)", len(rest), len(elems))
			}
			l := binary.LittleEndian.Uint32(rest)
			if uint64(l) > uint64(len(rest)-4) {
				return session.Tensor{}, fmt.Errorf("BYTES data: element %d claims %d bytes but %d remain", len(elems), l, len(rest)-4)
			}
			elems = append(elems, string(rest[4:4+l]))
			rest = rest[4+l:]
		}
		if len(elems) != n {
			return session.Tensor{}, fmt.Errorf("shape %v has %d elements but the BYTES data holds %d", shape, n, len(elems))
		}
		return makeTensor(shape, elems)
	}
	size := int(d.ByteSize(1)) // every datatype but BYTES (above) is a whole number of bytes
	if len(raw) != n*size {
		return session.Tensor{}, fmt.Errorf("shape %v of %s needs %d bytes (%d elements of %d bytes) but the data has %d", shape, datatypeOf[d], n*size, n, size, len(raw))
	}
	data, err := makeSlice(d, n)
	if err != nil {
		return session.Tensor{}, err
	}
	if _, err := binary.Decode(raw, binary.LittleEndian, data); err != nil {
		return session.Tensor{}, fmt.Errorf("decoding %s data: %v", datatypeOf[d], err)
	}
	return makeTensor(shape, data)
}

// encodeRaw appends a tensor's elements to dst in the protocol's raw form (see decodeRaw).
func encodeRaw(dst []byte, t session.Tensor) ([]byte, error) {
	if s, ok := t.Data().([]string); ok {
		for _, e := range s {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e)))
			dst = append(dst, e...)
		}
		return dst, nil
	}
	return binary.Append(dst, binary.LittleEndian, t.Data())
}

// makeSlice allocates n zero elements of type d.
func makeSlice(d session.DType, n int) (any, error) {
	t, err := session.Zeros(d, []int64{int64(n)})
	if err != nil {
		return nil, err
	}
	return t.Data(), nil
}

// decodeJSONData decodes a JSON tensor's "data": a flat or nested array of numbers (booleans for
// BOOL, strings for BYTES) in row-major order.
func decodeJSONData(d session.DType, shape []int64, data json.RawMessage) (session.Tensor, error) {
	n, err := elementCount(shape)
	if err != nil {
		return session.Tensor{}, err
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return session.Tensor{}, fmt.Errorf("data is not valid JSON: %v", err)
	}
	flat := make([]any, 0, n)
	var flatten func(v any) error
	flatten = func(v any) error {
		a, ok := v.([]any)
		if !ok {
			flat = append(flat, v)
			return nil
		}
		for _, e := range a {
			if err := flatten(e); err != nil {
				return err
			}
		}
		return nil
	}
	if _, ok := tree.([]any); !ok {
		return session.Tensor{}, fmt.Errorf("data must be an array, got %s", jsonKind(tree))
	}
	if err := flatten(tree); err != nil {
		return session.Tensor{}, err
	}
	if len(flat) != n {
		return session.Tensor{}, fmt.Errorf("shape %v has %d elements but data has %d", shape, n, len(flat))
	}
	out, err := makeSlice(d, n)
	if err != nil {
		return session.Tensor{}, err
	}
	for i, v := range flat {
		if err := setJSONElem(out, i, v); err != nil {
			return session.Tensor{}, fmt.Errorf("data element %d: %v", i, err)
		}
	}
	return makeTensor(shape, out)
}

// jsonKind names the JSON kind of a decoded value, for errors.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// setJSONElem stores one decoded JSON element into slice out at i, checking its kind and range.
func setJSONElem(out any, i int, v any) error {
	switch s := out.(type) {
	case []bool:
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("BOOL wants true or false, got %s", jsonKind(v))
		}
		s[i] = b
		return nil
	case []string:
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("BYTES wants a string, got %s", jsonKind(v))
		}
		s[i] = str
		return nil
	}
	num, ok := v.(json.Number)
	if !ok {
		return fmt.Errorf("wants a number, got %s", jsonKind(v))
	}
	switch s := out.(type) {
	case []float32:
		f, err := strconv.ParseFloat(string(num), 32)
		s[i] = float32(f)
		return numErr(err, num)
	case []float64:
		f, err := strconv.ParseFloat(string(num), 64)
		s[i] = f
		return numErr(err, num)
	case []session.Float16:
		f, err := strconv.ParseFloat(string(num), 32)
		s[i] = session.ToFloat16(float32(f))
		return numErr(err, num)
	case []session.BFloat16:
		f, err := strconv.ParseFloat(string(num), 32)
		s[i] = session.ToBFloat16(float32(f))
		return numErr(err, num)
	case []int8:
		x, err := strconv.ParseInt(string(num), 10, 8)
		s[i] = int8(x)
		return numErr(err, num)
	case []int16:
		x, err := strconv.ParseInt(string(num), 10, 16)
		s[i] = int16(x)
		return numErr(err, num)
	case []int32:
		x, err := strconv.ParseInt(string(num), 10, 32)
		s[i] = int32(x)
		return numErr(err, num)
	case []int64:
		x, err := strconv.ParseInt(string(num), 10, 64)
		s[i] = x
		return numErr(err, num)
	case []uint8:
		x, err := strconv.ParseUint(string(num), 10, 8)
		s[i] = uint8(x)
		return numErr(err, num)
	case []uint16:
		x, err := strconv.ParseUint(string(num), 10, 16)
		s[i] = uint16(x)
		return numErr(err, num)
	case []uint32:
		x, err := strconv.ParseUint(string(num), 10, 32)
		s[i] = uint32(x)
		return numErr(err, num)
	case []uint64:
		x, err := strconv.ParseUint(string(num), 10, 64)
		s[i] = x
		return numErr(err, num)
	}
	return fmt.Errorf("unsupported element slice %T", out)
}

func numErr(err error, num json.Number) error {
	if err == nil {
		return nil
	}
	if ne, ok := err.(*strconv.NumError); ok {
		if ne.Err == strconv.ErrRange {
			return fmt.Errorf("%s is out of the datatype's range", num)
		}
		return fmt.Errorf("%s is not a number of the datatype", num)
	}
	return err
}

// appendJSONData appends a tensor's elements as a flat JSON array. NaN and infinities have no
// JSON form: such an output must be asked for as binary data.
func appendJSONData(dst []byte, t session.Tensor) ([]byte, error) {
	dst = append(dst, '[')
	var err error
	appendFloat := func(i int, f float64, bits int) {
		if i > 0 {
			dst = append(dst, ',')
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if err == nil {
				err = fmt.Errorf("element %d is %v, which JSON cannot represent; request the output as binary data", i, f)
			}
			dst = append(dst, '0')
			return
		}
		dst = strconv.AppendFloat(dst, f, 'g', -1, bits)
	}
	switch s := t.Data().(type) {
	case []float32:
		for i, v := range s {
			appendFloat(i, float64(v), 32)
		}
	case []float64:
		for i, v := range s {
			appendFloat(i, v, 64)
		}
	case []session.Float16:
		for i, v := range s {
			appendFloat(i, float64(v.Float32()), 32)
		}
	case []session.BFloat16:
		for i, v := range s {
			appendFloat(i, float64(v.Float32()), 32)
		}
	case []bool:
		for i, v := range s {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendBool(dst, v)
		}
	case []string:
		for i, v := range s {
			if i > 0 {
				dst = append(dst, ',')
			}
			b, _ := json.Marshal(v) // a string always marshals
			dst = append(dst, b...)
		}
	case []int8:
		dst = appendInts(dst, s)
	case []int16:
		dst = appendInts(dst, s)
	case []int32:
		dst = appendInts(dst, s)
	case []int64:
		dst = appendInts(dst, s)
	case []uint8:
		dst = appendUints(dst, s)
	case []uint16:
		dst = appendUints(dst, s)
	case []uint32:
		dst = appendUints(dst, s)
	case []uint64:
		dst = appendUints(dst, s)
	default:
		return nil, fmt.Errorf("unsupported element slice %T", s)
	}
	return append(dst, ']'), err
}

func appendInts[T int8 | int16 | int32 | int64](dst []byte, s []T) []byte {
	for i, v := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(v), 10)
	}
	return dst
}

func appendUints[T uint8 | uint16 | uint32 | uint64](dst []byte, s []T) []byte {
	for i, v := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(v), 10)
	}
	return dst
}

// concatRows concatenates tensors of one element type along dimension 0; the other
// dimensions must agree (the scheduler only batches requests whose trailing shapes match).
func concatRows(ts []session.Tensor) (session.Tensor, error) {
	first := ts[0]
	shape := first.Shape()
	var rows int64
	for _, t := range ts {
		rows += t.Dims()[0]
	}
	shape[0] = rows
	switch first.Data().(type) {
	case []bool:
		return concatTyped[bool](shape, ts)
	case []uint8:
		return concatTyped[uint8](shape, ts)
	case []uint16:
		return concatTyped[uint16](shape, ts)
	case []uint32:
		return concatTyped[uint32](shape, ts)
	case []uint64:
		return concatTyped[uint64](shape, ts)
	case []int8:
		return concatTyped[int8](shape, ts)
	case []int16:
		return concatTyped[int16](shape, ts)
	case []int32:
		return concatTyped[int32](shape, ts)
	case []int64:
		return concatTyped[int64](shape, ts)
	case []session.Float16:
		return concatTyped[session.Float16](shape, ts)
	case []session.BFloat16:
		return concatTyped[session.BFloat16](shape, ts)
	case []float32:
		return concatTyped[float32](shape, ts)
	case []float64:
		return concatTyped[float64](shape, ts)
	case []string:
		return concatTyped[string](shape, ts)
	}
	return session.Tensor{}, fmt.Errorf("unsupported element type %s", first.DType())
}

func concatTyped[T session.Element](shape []int64, ts []session.Tensor) (session.Tensor, error) {
	n := 0
	for _, t := range ts {
		n += t.Len()
	}
	out := make([]T, 0, n)
	for _, t := range ts {
		s, err := session.TensorOf[T](t)
		if err != nil {
			return session.Tensor{}, err
		}
		out = append(out, s...)
	}
	return session.NewTensor(shape, out)
}

// sliceRows returns rows [from, to) of t along dimension 0, sharing t's elements.
func sliceRows(t session.Tensor, from, to int64) (session.Tensor, error) {
	dims := t.Shape()
	if len(dims) == 0 || to > dims[0] || from < 0 || from > to {
		return session.Tensor{}, fmt.Errorf("rows [%d, %d) of a tensor of shape %v", from, to, dims)
	}
	per := int64(1)
	for _, d := range dims[1:] {
		per *= d
	}
	dims[0] = to - from
	a, b := int(from*per), int(to*per)
	switch s := t.Data().(type) {
	case []bool:
		return session.NewTensor(dims, s[a:b:b])
	case []uint8:
		return session.NewTensor(dims, s[a:b:b])
	case []uint16:
		return session.NewTensor(dims, s[a:b:b])
	case []uint32:
		return session.NewTensor(dims, s[a:b:b])
	case []uint64:
		return session.NewTensor(dims, s[a:b:b])
	case []int8:
		return session.NewTensor(dims, s[a:b:b])
	case []int16:
		return session.NewTensor(dims, s[a:b:b])
	case []int32:
		return session.NewTensor(dims, s[a:b:b])
	case []int64:
		return session.NewTensor(dims, s[a:b:b])
	case []session.Float16:
		return session.NewTensor(dims, s[a:b:b])
	case []session.BFloat16:
		return session.NewTensor(dims, s[a:b:b])
	case []float32:
		return session.NewTensor(dims, s[a:b:b])
	case []float64:
		return session.NewTensor(dims, s[a:b:b])
	case []string:
		return session.NewTensor(dims, s[a:b:b])
	}
	return session.Tensor{}, fmt.Errorf("unsupported element type %s", t.DType())
}
