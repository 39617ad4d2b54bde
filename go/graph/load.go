package graph

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
	"github.com/loomrt/loom/go/graph/internal/onnxpb"
	"google.golang.org/protobuf/proto"
)

// LoadOptions tunes loading.
type LoadOptions struct {
	// Dir is the directory external data locations are relative to. Load sets it to the model
	// file's directory; LoadBytes refuses external data when it is empty.
	Dir string
	// Name names the model in error messages (Load uses the file name).
	Name   string
	Limits Limits
}

// Load reads an ONNX model file, mmapping external weights that live beside it. The model is
// decoded, its names resolved (including subgraph references to outer scopes) and its nodes
// sorted topologically; call Check for the schema checks and infer.Shapes (package
// go/graph/infer) for shapes. Close the model when done.
func Load(path string) (*Model, error) {
	return LoadWithOptions(path, LoadOptions{})
}

// LoadWithOptions is Load with explicit options; an empty Dir or Name is filled from path.
func LoadWithOptions(path string, opts LoadOptions) (*Model, error) {
	lim := opts.Limits.withDefaults()
	if opts.Name == "" {
		opts.Name = filepath.Base(path)
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Model: opts.Name, Msg: err.Error()}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{Model: opts.Name, Msg: err.Error()}
	}
	if st.Size() > lim.MaxModelBytes {
		return nil, &Error{Model: opts.Name, Msg: fmt.Sprintf("file is %d bytes, over the %d byte limit", st.Size(), lim.MaxModelBytes)}
	}
	// The file is decoded from a read-only mapping, unmapped as soon as the model is built:
	// read into the Go heap, its bytes stayed resident as garbage until a collection, on top
	// of the decoded model (10 MB of peak memory for a 10 MB model). The decoded model does
	// not alias the mapping: the protobuf decoder copies bytes and strings.
	if st.Mode().IsRegular() && st.Size() > 0 && int64(int(st.Size())) == st.Size() {
		if data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
			m, ok, err := loadMapped(data, opts, true)
			if !ok {
				m, err = decodeBytes(data, opts)
			}
			if uerr := syscall.Munmap(data); uerr != nil && err == nil {
				m.Close()
				return nil, &Error{Model: opts.Name, Msg: uerr.Error()}
			}
			return m, err
		}
		// Some filesystems refuse mmap: read the file instead.
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, &Error{Model: opts.Name, Msg: err.Error()}
	}
	return LoadBytesWithOptions(data, opts)
}

// LoadBytes decodes a serialized ModelProto held in memory. data is only read, and no tensor
// aliases it: the main graph's large weights (raw_data of 64 KiB or more) are copied, as Load
// copies them, into memory the model owns outside the Go heap (released by Close, or once
// neither the model nor its tensors are reachable), the rest into the Go heap. External data
// is refused since there is no directory to resolve it against; use LoadBytesWithOptions.
func LoadBytes(data []byte) (*Model, error) {
	return LoadBytesWithOptions(data, LoadOptions{})
}

// LoadBytesWithOptions is LoadBytes with explicit options.
func LoadBytesWithOptions(data []byte, opts LoadOptions) (*Model, error) {
	if m, ok, err := loadMapped(data, opts, false); ok {
		return m, err
	}
	return decodeBytes(data, opts)
}

// decodeBytes decodes data with the protobuf decoder alone (every field copied into the Go
// heap): what LoadBytesWithOptions does where the wire walk of loadMapped does not apply.
func decodeBytes(data []byte, opts LoadOptions) (*Model, error) {
	lim := opts.Limits.withDefaults()
	if int64(len(data)) > lim.MaxModelBytes {
		return nil, &Error{Model: opts.Name, Msg: fmt.Sprintf("model is %d bytes, over the %d byte limit", len(data), lim.MaxModelBytes)}
	}
	var mp onnxpb.ModelProto
	// The recursion limit bounds message nesting (subgraphs, nested types) while decoding,
	// before the converter sees anything.
	uo := proto.UnmarshalOptions{RecursionLimit: 16*lim.MaxNesting + 16}
	if err := uo.Unmarshal(data, &mp); err != nil {
		return nil, &Error{Model: opts.Name, Msg: "not a valid ONNX ModelProto: " + err.Error()}
	}
	return fromProto(&mp, opts, lim)
}

type loader struct {
	name  string
	lim   Limits
	maps  *modelmem.Mappings
	nodes int
}

func fromProto(mp *onnxpb.ModelProto, opts LoadOptions, lim Limits) (*Model, error) {
	l := &loader{name: opts.Name, lim: lim, maps: modelmem.NewMappings(opts.Dir)}
	if l.name == "" && mp.GetGraph() != nil {
		l.name = mp.GetGraph().GetName()
	}
	m := &Model{
		Name:            l.name,
		IRVersion:       mp.GetIrVersion(),
		ProducerName:    mp.GetProducerName(),
		ProducerVersion: mp.GetProducerVersion(),
		Domain:          mp.GetDomain(),
		ModelVersion:    mp.GetModelVersion(),
		Doc:             mp.GetDocString(),
		MetadataProps:   map[string]string{},
		Opsets:          map[string]int64{},
		mappings:        l.maps,
	}
	fail := func(err error) (*Model, error) {
		_ = l.maps.Close()
		return nil, err
	}
	for _, p := range mp.GetMetadataProps() {
		m.MetadataProps[p.GetKey()] = p.GetValue()
	}
	for _, o := range mp.GetOpsetImport() {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		if prev, dup := m.Opsets[d]; dup && prev != o.GetVersion() {
			return fail(&Error{Model: l.name, Msg: fmt.Sprintf("opset domain %q imported twice (versions %d and %d)", d, prev, o.GetVersion())})
		}
		if o.GetVersion() < 1 {
			return fail(&Error{Model: l.name, Msg: fmt.Sprintf("opset domain %q has version %d", d, o.GetVersion())})
		}
		m.Opsets[d] = o.GetVersion()
	}
	if len(mp.GetOpsetImport()) == 0 && mp.GetIrVersion() < 3 {
		m.Opsets[""] = 1 // IR versions before 3 had no opset_import and meant opset 1
	}
	if mp.GetGraph() == nil {
		return fail(&Error{Model: l.name, Msg: "model has no graph"})
	}
	g, err := l.graph(mp.GetGraph(), nil, 0, mp.GetGraph().GetName())
	if err != nil {
		return fail(err)
	}
	m.Graph = g
	for _, fp := range mp.GetFunctions() {
		fn := &Function{Name: fp.GetName(), Domain: fp.GetDomain(), Overload: fp.GetOverload(), Inputs: fp.GetInput(), Outputs: fp.GetOutput(), Attributes: fp.GetAttribute(), Opsets: map[string]int64{}}
		for _, o := range fp.GetOpsetImport() {
			fn.Opsets[o.GetDomain()] = o.GetVersion()
		}
		for _, ap := range fp.GetAttributeProto() {
			a, err := l.attr(ap, g, 1, "function "+fp.GetName()+"."+ap.GetName())
			if err != nil {
				if e, ok := err.(*Error); ok {
					return fail(e)
				}
				return fail(&Error{Model: l.name, Msg: fmt.Sprintf("function %s: default of attribute %q: %v", fp.GetName(), ap.GetName(), err)})
			}
			fn.AttrDefaults = append(fn.AttrDefaults, a)
		}
		for _, np := range fp.GetNode() {
			n, err := l.node(np, g, 1, "function "+fp.GetName())
			if err != nil {
				return fail(err)
			}
			fn.Nodes = append(fn.Nodes, n)
		}
		m.Functions = append(m.Functions, fn)
	}
	if err := expandFunctions(m, l.lim); err != nil {
		return fail(err)
	}
	if err := resolve(m); err != nil {
		return fail(err)
	}
	return m, nil
}

func (l *loader) errf(graph string, n *onnxpb.NodeProto, value, format string, args ...any) *Error {
	e := &Error{Model: l.name, Graph: graph, Value: value, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Node = n.GetName()
		e.Op = n.GetOpType()
		if e.Node == "" && len(n.GetOutput()) > 0 {
			e.Node = "<output " + n.GetOutput()[0] + ">"
		}
	}
	return e
}

func (l *loader) graph(gp *onnxpb.GraphProto, parent *Graph, depth int, path string) (*Graph, error) {
	if depth > l.lim.MaxNesting {
		return nil, &Error{Model: l.name, Graph: path, Msg: fmt.Sprintf("subgraphs nested deeper than %d", l.lim.MaxNesting)}
	}
	g := &Graph{Name: gp.GetName(), Doc: gp.GetDocString(), Parent: parent, Initializers: map[string]*Tensor{}, Values: map[string]*Value{}}
	for _, tp := range gp.GetInitializer() {
		t, err := l.tensor(tp, 0)
		if err != nil {
			return nil, l.errf(path, nil, tp.GetName(), "initializer: %v", err)
		}
		if t.Name == "" {
			return nil, l.errf(path, nil, "", "initializer without a name")
		}
		if _, dup := g.Initializers[t.Name]; dup {
			return nil, l.errf(path, nil, t.Name, "initializer defined twice")
		}
		g.AddInitializer(t)
	}
	for _, sp := range gp.GetSparseInitializer() {
		st, err := l.sparse(sp)
		if err != nil {
			return nil, l.errf(path, nil, sp.GetValues().GetName(), "sparse initializer: %v", err)
		}
		t, err := densify(st, l.lim)
		if err != nil {
			return nil, l.errf(path, nil, sp.GetValues().GetName(), "sparse initializer: %v", err)
		}
		if _, dup := g.Initializers[t.Name]; dup || t.Name == "" {
			return nil, l.errf(path, nil, t.Name, "sparse initializer unnamed or defined twice")
		}
		g.AddInitializer(t)
	}
	seenIn := map[string]bool{}
	for _, vp := range gp.GetInput() {
		v, err := l.valueInfo(vp, path)
		if err != nil {
			return nil, err
		}
		if v.Name == "" {
			return nil, l.errf(path, nil, "", "graph input without a name")
		}
		if seenIn[v.Name] {
			return nil, l.errf(path, nil, v.Name, "graph input declared twice")
		}
		seenIn[v.Name] = true
		if t := g.Initializers[v.Name]; t != nil {
			v.Initializer = t
			if v.Declared.Kind == KindUnknown {
				v.Type = t.Type()
			} else {
				v.Type = v.Declared.Clone()
			}
		}
		g.Values[v.Name] = v
		g.Inputs = append(g.Inputs, v)
	}
	for _, np := range gp.GetNode() {
		n, err := l.node(np, g, depth, path)
		if err != nil {
			return nil, err
		}
		g.Nodes = append(g.Nodes, n)
	}
	for _, vp := range gp.GetValueInfo() {
		v, err := l.valueInfo(vp, path)
		if err != nil {
			return nil, err
		}
		ex := g.ensureValue(v.Name)
		if ex.Declared.Kind == KindUnknown {
			ex.Declared = v.Declared
			ex.Doc = v.Doc
			if ex.Type.Kind == KindUnknown {
				ex.Type = v.Type
			}
		}
	}
	for _, vp := range gp.GetOutput() {
		v, err := l.valueInfo(vp, path)
		if err != nil {
			return nil, err
		}
		if v.Name == "" {
			return nil, l.errf(path, nil, "", "graph output without a name")
		}
		g.Outputs = append(g.Outputs, v)
	}
	return g, nil
}

func (l *loader) valueInfo(vp *onnxpb.ValueInfoProto, path string) (*Value, error) {
	v := &Value{Name: vp.GetName(), Doc: vp.GetDocString()}
	if vp.GetType() != nil {
		t, err := l.typ(vp.GetType(), 0)
		if err != nil {
			return nil, l.errf(path, nil, v.Name, "type: %v", err)
		}
		v.Declared = t
		v.Type = t.Clone()
	}
	return v, nil
}

func (l *loader) typ(tp *onnxpb.TypeProto, depth int) (Type, error) {
	if depth > l.lim.MaxNesting {
		return Type{}, fmt.Errorf("type nested deeper than %d", l.lim.MaxNesting)
	}
	switch v := tp.GetValue().(type) {
	case *onnxpb.TypeProto_TensorType:
		return l.tensorType(KindTensor, v.TensorType.GetElemType(), v.TensorType.GetShape())
	case *onnxpb.TypeProto_SparseTensorType:
		return l.tensorType(KindSparseTensor, v.SparseTensorType.GetElemType(), v.SparseTensorType.GetShape())
	case *onnxpb.TypeProto_SequenceType:
		t := Type{Kind: KindSequence}
		if e := v.SequenceType.GetElemType(); e != nil {
			in, err := l.typ(e, depth+1)
			if err != nil {
				return Type{}, err
			}
			t.Inner = &in
		}
		return t, nil
	case *onnxpb.TypeProto_OptionalType:
		t := Type{Kind: KindOptional}
		if e := v.OptionalType.GetElemType(); e != nil {
			in, err := l.typ(e, depth+1)
			if err != nil {
				return Type{}, err
			}
			t.Inner = &in
		}
		return t, nil
	case *onnxpb.TypeProto_MapType:
		t := Type{Kind: KindMap, Key: DataType(v.MapType.GetKeyType())}
		if e := v.MapType.GetValueType(); e != nil {
			in, err := l.typ(e, depth+1)
			if err != nil {
				return Type{}, err
			}
			t.Inner = &in
		}
		return t, nil
	}
	return Type{}, nil
}

func (l *loader) tensorType(kind TypeKind, elem int32, sp *onnxpb.TensorShapeProto) (Type, error) {
	t := Type{Kind: kind, Elem: DataType(elem)}
	if elem != 0 && !t.Elem.Valid() {
		return Type{}, fmt.Errorf("unknown element type %d", elem)
	}
	if sp == nil {
		return t, nil
	}
	if len(sp.GetDim()) > l.lim.MaxRank {
		return Type{}, fmt.Errorf("rank %d over the limit of %d", len(sp.GetDim()), l.lim.MaxRank)
	}
	t.Ranked = true
	t.Shape = make(Shape, len(sp.GetDim()))
	for i, d := range sp.GetDim() {
		switch v := d.GetValue().(type) {
		case *onnxpb.TensorShapeProto_Dimension_DimValue:
			if v.DimValue < 0 {
				// Some exporters write -1 for "unknown"; treat as unknown, not as an error.
				t.Shape[i] = UnknownDim()
				continue
			}
			if v.DimValue > l.lim.MaxDim {
				return Type{}, fmt.Errorf("dimension %d of %d over the limit of %d", i, v.DimValue, l.lim.MaxDim)
			}
			t.Shape[i] = DimOf(v.DimValue)
		case *onnxpb.TensorShapeProto_Dimension_DimParam:
			t.Shape[i] = SymDim(v.DimParam)
		default:
			t.Shape[i] = UnknownDim()
		}
	}
	return t, nil
}

func (l *loader) node(np *onnxpb.NodeProto, g *Graph, depth int, path string) (*Node, error) {
	l.nodes++
	if l.nodes > l.lim.MaxNodes {
		return nil, l.errf(path, np, "", "more than %d nodes", l.lim.MaxNodes)
	}
	if np.GetOpType() == "" {
		return nil, l.errf(path, np, "", "node has no op_type")
	}
	d := np.GetDomain()
	if d == "ai.onnx" {
		d = ""
	}
	n := &Node{Name: np.GetName(), OpType: np.GetOpType(), Domain: d, Inputs: append([]string{}, np.GetInput()...), Outputs: append([]string{}, np.GetOutput()...), Doc: np.GetDocString(), Overload: np.GetOverload()}
	seen := map[string]bool{}
	for _, ap := range np.GetAttribute() {
		if ap.GetName() == "" {
			return nil, l.errf(path, np, "", "attribute without a name")
		}
		if seen[ap.GetName()] {
			return nil, l.errf(path, np, "", "attribute %q given twice", ap.GetName())
		}
		seen[ap.GetName()] = true
		a, err := l.attr(ap, g, depth, path+"/"+n.Label()+"."+ap.GetName())
		if err != nil {
			if e, ok := err.(*Error); ok {
				return nil, e
			}
			return nil, l.errf(path, np, "", "attribute %q: %v", ap.GetName(), err)
		}
		n.Attrs = append(n.Attrs, a)
	}
	return n, nil
}

func (l *loader) attr(ap *onnxpb.AttributeProto, g *Graph, depth int, path string) (*Attribute, error) {
	a := &Attribute{Name: ap.GetName(), Type: AttrType(ap.GetType()), RefAttrName: ap.GetRefAttrName(), Doc: ap.GetDocString()}
	if a.Type == AttrUndefined {
		a.Type = guessAttrType(ap)
	}
	if _, ok := attrTypeNames[a.Type]; !ok {
		return nil, fmt.Errorf("unknown attribute type %d", ap.GetType())
	}
	var err error
	switch a.Type {
	case AttrFloat:
		a.Float = ap.GetF()
	case AttrInt:
		a.Int = ap.GetI()
	case AttrString:
		a.String = ap.GetS()
	case AttrTensor:
		if ap.GetT() == nil && a.RefAttrName == "" {
			return nil, fmt.Errorf("TENSOR attribute without a tensor")
		}
		if ap.GetT() != nil {
			a.Tensor, err = l.tensor(ap.GetT(), 0)
		}
	case AttrSparseTensor:
		if ap.GetSparseTensor() != nil {
			a.Sparse, err = l.sparse(ap.GetSparseTensor())
		}
	case AttrGraph:
		if ap.GetG() == nil && a.RefAttrName == "" {
			return nil, fmt.Errorf("GRAPH attribute without a graph")
		}
		if ap.GetG() != nil {
			a.Graph, err = l.graph(ap.GetG(), g, depth+1, path)
		}
	case AttrTypeProto:
		if ap.GetTp() != nil {
			var t Type
			t, err = l.typ(ap.GetTp(), 0)
			a.TypeProto = &t
		}
	case AttrFloats:
		a.Floats = ap.GetFloats()
	case AttrInts:
		a.Ints = ap.GetInts()
	case AttrStrings:
		a.Strings = ap.GetStrings()
	case AttrTensors:
		for _, tp := range ap.GetTensors() {
			t, err := l.tensor(tp, 0)
			if err != nil {
				return nil, err
			}
			a.Tensors = append(a.Tensors, t)
		}
	case AttrSparseTensors:
		for _, sp := range ap.GetSparseTensors() {
			s, err := l.sparse(sp)
			if err != nil {
				return nil, err
			}
			a.Sparses = append(a.Sparses, s)
		}
	case AttrGraphs:
		for i, gp := range ap.GetGraphs() {
			sg, err := l.graph(gp, g, depth+1, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			a.Graphs = append(a.Graphs, sg)
		}
	case AttrTypeProtos:
		for _, tp := range ap.GetTypeProtos() {
			t, err := l.typ(tp, 0)
			if err != nil {
				return nil, err
			}
			a.TypeProtos = append(a.TypeProtos, &t)
		}
	}
	return a, err
}

// guessAttrType serves IR versions before 0.0.2, whose attributes carried no type field.
func guessAttrType(ap *onnxpb.AttributeProto) AttrType {
	switch {
	case ap.F != nil:
		return AttrFloat
	case ap.I != nil:
		return AttrInt
	case ap.S != nil:
		return AttrString
	case ap.T != nil:
		return AttrTensor
	case ap.G != nil:
		return AttrGraph
	case len(ap.Floats) > 0:
		return AttrFloats
	case len(ap.Ints) > 0:
		return AttrInts
	case len(ap.Strings) > 0:
		return AttrStrings
	case len(ap.Tensors) > 0:
		return AttrTensors
	case len(ap.Graphs) > 0:
		return AttrGraphs
	}
	return AttrUndefined
}

func (l *loader) sparse(sp *onnxpb.SparseTensorProto) (*SparseTensor, error) {
	if sp.GetValues() == nil || sp.GetIndices() == nil {
		return nil, fmt.Errorf("sparse tensor without values or indices")
	}
	vals, err := l.tensor(sp.GetValues(), 0)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	idx, err := l.tensor(sp.GetIndices(), 0)
	if err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	if len(sp.GetDims()) > l.lim.MaxRank {
		return nil, fmt.Errorf("rank %d over the limit of %d", len(sp.GetDims()), l.lim.MaxRank)
	}
	return &SparseTensor{Values: vals, Indices: idx, Dims: append([]int64{}, sp.GetDims()...)}, nil
}

// densify expands a COO sparse tensor, refusing out-of-range indices and oversized results.
func densify(st *SparseTensor, lim Limits) (*Tensor, error) {
	n, err := checkedProduct(st.Dims)
	if err != nil {
		return nil, err
	}
	if n > lim.MaxFoldElements*64 || n > lim.MaxElements {
		return nil, fmt.Errorf("dense size of %d elements too large", n)
	}
	if st.Values.DType == String {
		return nil, fmt.Errorf("string sparse tensors are not supported")
	}
	nnz := st.Values.NumElements()
	if len(st.Values.Dims) != 1 {
		return nil, fmt.Errorf("values must be 1-D")
	}
	idx, err := st.Indices.Int64s()
	if err != nil {
		return nil, err
	}
	rank := int64(len(st.Dims))
	linear := make([]int64, nnz)
	switch {
	case len(st.Indices.Dims) == 1 && st.Indices.Dims[0] == nnz:
		copy(linear, idx)
	case len(st.Indices.Dims) == 2 && st.Indices.Dims[0] == nnz && st.Indices.Dims[1] == rank:
		for i := int64(0); i < nnz; i++ {
			off := int64(0)
			for j := int64(0); j < rank; j++ {
				x := idx[i*rank+j]
				if x < 0 || x >= st.Dims[j] {
					return nil, fmt.Errorf("index %d out of range", x)
				}
				off = off*st.Dims[j] + x
			}
			linear[i] = off
		}
	default:
		return nil, fmt.Errorf("indices shape %v does not fit %d values of rank %d", st.Indices.Dims, nnz, rank)
	}
	esz := int64(st.Values.DType.BitSize() / 8)
	if esz == 0 {
		return nil, fmt.Errorf("sparse %v not supported", st.Values.DType)
	}
	raw := make([]byte, n*esz)
	for i, off := range linear {
		if off < 0 || off >= n {
			return nil, fmt.Errorf("index %d out of range", off)
		}
		copy(raw[off*esz:(off+1)*esz], st.Values.Raw[int64(i)*esz:])
	}
	return &Tensor{Name: st.Values.Name, DType: st.Values.DType, Dims: append([]int64{}, st.Dims...), Raw: raw}, nil
}

// tensor converts a TensorProto, decoding whichever field holds the data into the packed raw
// form and checking its length against the dims.
func (l *loader) tensor(tp *onnxpb.TensorProto, _ int) (*Tensor, error) {
	dt := DataType(tp.GetDataType())
	if !dt.Valid() {
		return nil, fmt.Errorf("tensor %q: unknown element type %d", tp.GetName(), tp.GetDataType())
	}
	dims := tp.GetDims()
	if len(dims) > l.lim.MaxRank {
		return nil, fmt.Errorf("tensor %q: rank %d over the limit of %d", tp.GetName(), len(dims), l.lim.MaxRank)
	}
	for _, d := range dims {
		if d < 0 || d > l.lim.MaxDim {
			return nil, fmt.Errorf("tensor %q: dimension %d out of range", tp.GetName(), d)
		}
	}
	n, err := checkedProduct(dims)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", tp.GetName(), err)
	}
	if n > l.lim.MaxElements {
		return nil, fmt.Errorf("tensor %q: %d elements over the limit of %d", tp.GetName(), n, l.lim.MaxElements)
	}
	if tp.GetSegment() != nil {
		return nil, fmt.Errorf("tensor %q: segmented tensors are not supported", tp.GetName())
	}
	t := &Tensor{Name: tp.GetName(), DType: dt, Dims: append([]int64{}, dims...), Doc: tp.GetDocString()}
	if dt == String {
		if int64(len(tp.GetStringData())) != n {
			return nil, fmt.Errorf("tensor %q: %d strings for %d elements", t.Name, len(tp.GetStringData()), n)
		}
		t.Strings = tp.GetStringData()
		return t, nil
	}
	want := dt.ByteSize(n)
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		ref := WeightRef{Length: -1}
		for _, kv := range tp.GetExternalData() {
			switch kv.GetKey() {
			case "location":
				ref.Location = kv.GetValue()
			case "offset":
				ref.Offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
			case "length":
				ref.Length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("tensor %q: external data %s: %v", t.Name, kv.GetKey(), err)
			}
		}
		if ref.Length < 0 {
			ref.Length = want
		}
		if ref.Length != want {
			return nil, fmt.Errorf("tensor %q: external length %d, want %d bytes for %d %v elements", t.Name, ref.Length, want, n, dt)
		}
		raw, err := l.maps.Bytes(ref.Location, ref.Offset, ref.Length)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %v", t.Name, err)
		}
		t.Raw, t.Ref = raw, ref
		return t, nil
	}
	if tp.RawData != nil {
		if int64(len(tp.GetRawData())) != want {
			return nil, fmt.Errorf("tensor %q: %d raw bytes, want %d for %d %v elements", t.Name, len(tp.GetRawData()), want, n, dt)
		}
		t.Raw = tp.GetRawData()
		return t, nil
	}
	le := binary.LittleEndian
	var raw []byte
	// count checks the number of proto field entries (per elements each) before allocating.
	count := func(got int, per int64) error {
		if int64(got) != (n+per-1)/per {
			return fmt.Errorf("tensor %q: %d data entries for %d %v elements", t.Name, got, n, dt)
		}
		raw = make([]byte, 0, want)
		return nil
	}
	switch dt {
	case Float, Complex64:
		if dt == Complex64 {
			n *= 2
		}
		if err := count(len(tp.GetFloatData()), 1); err != nil {
			return nil, err
		}
		for _, v := range tp.GetFloatData() {
			raw = le.AppendUint32(raw, math.Float32bits(v))
		}
	case Double, Complex128:
		if dt == Complex128 {
			n *= 2
		}
		if err := count(len(tp.GetDoubleData()), 1); err != nil {
			return nil, err
		}
		for _, v := range tp.GetDoubleData() {
			raw = le.AppendUint64(raw, math.Float64bits(v))
		}
	case Int64:
		if err := count(len(tp.GetInt64Data()), 1); err != nil {
			return nil, err
		}
		for _, v := range tp.GetInt64Data() {
			raw = le.AppendUint64(raw, uint64(v))
		}
	case Uint32, Uint64:
		if err := count(len(tp.GetUint64Data()), 1); err != nil {
			return nil, err
		}
		for _, v := range tp.GetUint64Data() {
			if dt == Uint32 {
				raw = le.AppendUint32(raw, uint32(v))
			} else {
				raw = le.AppendUint64(raw, v)
			}
		}
	case Int32, Int16, Uint16, Int8, Uint8, Bool, Float16, BFloat16,
		Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
		if err := count(len(tp.GetInt32Data()), 1); err != nil {
			return nil, err
		}
		for _, v := range tp.GetInt32Data() {
			switch dt.BitSize() {
			case 32:
				raw = le.AppendUint32(raw, uint32(v))
			case 16:
				raw = le.AppendUint16(raw, uint16(v))
			default:
				raw = append(raw, byte(v))
			}
		}
	case Uint4, Int4, Float4E2M1:
		// Two 4-bit elements per int32 entry, the first in the low nibble.
		if err := count(len(tp.GetInt32Data()), 2); err != nil {
			return nil, err
		}
		for _, v := range tp.GetInt32Data() {
			raw = append(raw, byte(v))
		}
	case Uint2, Int2:
		// Four 2-bit elements per int32 entry, the first in the lowest bits.
		if err := count(len(tp.GetInt32Data()), 4); err != nil {
			return nil, err
		}
		for _, v := range tp.GetInt32Data() {
			raw = append(raw, byte(v))
		}
	default:
		return nil, fmt.Errorf("tensor %q: no data field for %v", t.Name, dt)
	}
	if int64(len(raw)) != want {
		return nil, fmt.Errorf("tensor %q: decoded %d bytes, want %d", t.Name, len(raw), want)
	}
	t.Raw = raw
	return t, nil
}
