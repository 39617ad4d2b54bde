package arith

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions of the ai.onnx.ml domain: Binarizer, ArrayFeatureExtractor, LabelEncoder
// (opset 4) and TreeEnsemble (opset 5). They are registered in ops.HostOps under the key
// "ai.onnx.ml:<op>" (ops.PlannerKey's spelling), which the interpreter routes for nodes of
// that domain.

// mlDomain prefixes the registry keys of the ai.onnx.ml operators.
const mlDomain = "ai.onnx.ml:"

func init() {
	ops.HostOps[mlDomain+"Binarizer"] = opBinarizer
	ops.HostOps[mlDomain+"ArrayFeatureExtractor"] = opArrayFeatureExtractor
	ops.HostOps[mlDomain+"LabelEncoder"] = opLabelEncoder
	ops.HostOps[mlDomain+"TreeEnsemble"] = opTreeEnsemble
}

func mlInput(in []tensor.Tensor, i int, op, what string) (tensor.Tensor, error) {
	if i >= len(in) || !in[i].IsValid() {
		return tensor.Tensor{}, fmt.Errorf("%s needs the input %s", op, what)
	}
	return in[i], nil
}

// opBinarizer maps each element x to 1 when x > threshold, else 0 (NaN included: the
// comparison is false).
func opBinarizer(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, err := mlInput(in, 0, "Binarizer", "X")
	if err != nil {
		return nil, err
	}
	switch x.DType() {
	case graph.Float, graph.Double, graph.Int64, graph.Int32:
	default:
		return nil, fmt.Errorf("Binarizer: X must be float, double, int64 or int32, got %s", x.DType())
	}
	th := float64(n.AttrFloat("threshold", 0))
	if err := ops.ReserveShape(rc, "the output", x.DType(), x.Dims(), 0); err != nil {
		return nil, err
	}
	var out any
	switch v := x.Data().(type) {
	case []float32:
		o := make([]float32, len(v))
		for i, e := range v {
			if float64(e) > th {
				o[i] = 1
			}
		}
		out = o
	case []float64:
		o := make([]float64, len(v))
		for i, e := range v {
			if e > th {
				o[i] = 1
			}
		}
		out = o
	case []int64:
		o := make([]int64, len(v))
		for i, e := range v {
			if float64(e) > th {
				o[i] = 1
			}
		}
		out = o
	case []int32:
		o := make([]int32, len(v))
		for i, e := range v {
			if float64(e) > th {
				o[i] = 1
			}
		}
		out = o
	default:
		return nil, fmt.Errorf("Binarizer: unsupported element type %s", x.DType())
	}
	return []tensor.Tensor{tensor.Raw(x.DType(), append([]int64{}, x.Dims()...), out)}, nil
}

// take returns src[idx[i]] for each i, def where idx[i] < 0.
func take[T any](src []T, idx []int, def T) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		if j < 0 {
			out[i] = def
		} else {
			out[i] = src[j]
		}
	}
	return out
}

// takeAny is take over a tensor's element slice; def is a one-element slice of the same type
// (or nil when no index is negative).
func takeAny(src any, idx []int, def any) (any, error) {
	switch s := src.(type) {
	case []float32:
		return take(s, idx, first[float32](def)), nil
	case []float64:
		return take(s, idx, first[float64](def)), nil
	case []tensor.Float16:
		return take(s, idx, first[tensor.Float16](def)), nil
	case []tensor.BFloat16:
		return take(s, idx, first[tensor.BFloat16](def)), nil
	case []int8:
		return take(s, idx, first[int8](def)), nil
	case []int16:
		return take(s, idx, first[int16](def)), nil
	case []int32:
		return take(s, idx, first[int32](def)), nil
	case []int64:
		return take(s, idx, first[int64](def)), nil
	case []uint8:
		return take(s, idx, first[uint8](def)), nil
	case []uint16:
		return take(s, idx, first[uint16](def)), nil
	case []uint32:
		return take(s, idx, first[uint32](def)), nil
	case []uint64:
		return take(s, idx, first[uint64](def)), nil
	case []bool:
		return take(s, idx, first[bool](def)), nil
	case []string:
		return take(s, idx, first[string](def)), nil
	}
	return nil, fmt.Errorf("unsupported element slice %T", src)
}

func first[T any](s any) T {
	var z T
	if v, ok := s.([]T); ok && len(v) > 0 {
		return v[0]
	}
	return z
}

// opArrayFeatureExtractor selects, along the last axis of X, the elements at the indices Y:
// Z has X's shape with the last dimension replaced by Y's element count (a 1-D X gives
// [1, len(Y)]). An index outside [0, X.shape[-1]) is an error.
func opArrayFeatureExtractor(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, err := mlInput(in, 0, "ArrayFeatureExtractor", "X")
	if err != nil {
		return nil, err
	}
	y, err := mlInput(in, 1, "ArrayFeatureExtractor", "Y")
	if err != nil {
		return nil, err
	}
	if y.DType() != graph.Int64 {
		return nil, fmt.Errorf("ArrayFeatureExtractor: Y must be int64, got %s", y.DType())
	}
	dims := x.Dims()
	if len(dims) == 0 {
		return nil, fmt.Errorf("ArrayFeatureExtractor: X must have at least one dimension")
	}
	last := dims[len(dims)-1]
	index := tensor.Int64s(y)
	for i, j := range index {
		if j < 0 || j >= last {
			return nil, fmt.Errorf("ArrayFeatureExtractor: index Y[%d] = %d is out of range [0, %d)", i, j, last)
		}
	}
	var shape []int64
	if len(dims) == 1 {
		shape = []int64{1, int64(len(index))}
	} else {
		shape = append(append([]int64{}, dims[:len(dims)-1]...), int64(len(index)))
	}
	if err := ops.ReserveShape(rc, "the output", x.DType(), shape, 0); err != nil {
		return nil, err
	}
	rows := 0
	if last > 0 {
		rows = x.Len() / int(last)
	} else {
		rows = 1
		for _, d := range dims[:len(dims)-1] {
			rows *= int(d)
		}
	}
	idx := make([]int, 0, rows*len(index))
	for r := range rows {
		for _, j := range index {
			idx = append(idx, r*int(last)+int(j))
		}
	}
	out, err := takeAny(x.Data(), idx, nil)
	if err != nil {
		return nil, fmt.Errorf("ArrayFeatureExtractor: %w", err)
	}
	return []tensor.Tensor{tensor.Raw(x.DType(), shape, out)}, nil
}

// mlKey is an element as a LabelEncoder key: strings as themselves, integers as int64,
// floating-point values by their float64 bits with every NaN one key (a NaN key maps NaN
// inputs) and -0 the same key as +0.
type mlKey struct {
	s     string
	i     int64
	f     uint64
	kind  byte
	isNaN bool
}

func mlKeys(t tensor.Tensor) ([]mlKey, error) {
	switch v := t.Data().(type) {
	case []string:
		out := make([]mlKey, len(v))
		for i, s := range v {
			out[i] = mlKey{s: s, kind: 's'}
		}
		return out, nil
	case []float32, []float64, []tensor.Float16, []tensor.BFloat16:
		fs := tensor.Float64s(t)
		out := make([]mlKey, len(fs))
		for i, f := range fs {
			switch {
			case math.IsNaN(f):
				out[i] = mlKey{kind: 'f', isNaN: true}
			case f == 0:
				out[i] = mlKey{kind: 'f'}
			default:
				out[i] = mlKey{kind: 'f', f: math.Float64bits(f)}
			}
		}
		return out, nil
	case []int8, []int16, []int32, []int64, []uint8, []uint16, []uint32, []uint64, []bool:
		is := tensor.Int64s(t)
		out := make([]mlKey, len(is))
		for i, x := range is {
			out[i] = mlKey{i: x, kind: 'i'}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported element type %s", t.DType())
}

// keyClass groups element types whose values mlKeys compares: strings, floating point,
// integers.
func keyClass(dt tensor.DType) byte {
	switch dt {
	case graph.String:
		return 's'
	case graph.Float, graph.Double, graph.Float16, graph.BFloat16:
		return 'f'
	}
	return 'i'
}

// labelEncoderSide is the keys or the values of a LabelEncoder: exactly one of the
// <side>_floats, <side>_int64s, <side>_strings and <side>_tensor attributes.
func labelEncoderSide(n *graph.Node, side string) (tensor.Tensor, error) {
	var found []string
	var t tensor.Tensor
	if a := n.Attr(side + "_floats"); a != nil {
		found = append(found, a.Name)
		t = tensor.Raw(graph.Float, []int64{int64(len(a.Floats))}, append([]float32{}, a.Floats...))
	}
	if a := n.Attr(side + "_int64s"); a != nil {
		found = append(found, a.Name)
		t = tensor.Raw(graph.Int64, []int64{int64(len(a.Ints))}, append([]int64{}, a.Ints...))
	}
	if a := n.Attr(side + "_strings"); a != nil {
		found = append(found, a.Name)
		s := make([]string, len(a.Strings))
		for i, b := range a.Strings {
			s[i] = string(b)
		}
		t = tensor.Raw(graph.String, []int64{int64(len(s))}, s)
	}
	if a := n.Attr(side + "_tensor"); a != nil {
		found = append(found, a.Name)
		if a.Tensor == nil {
			return tensor.Tensor{}, fmt.Errorf("LabelEncoder: %s_tensor holds no tensor", side)
		}
		var err error
		if t, err = tensor.FromGraphTensor(a.Tensor); err != nil {
			return tensor.Tensor{}, fmt.Errorf("LabelEncoder: %s_tensor: %w", side, err)
		}
	}
	if len(found) != 1 {
		return tensor.Tensor{}, fmt.Errorf("LabelEncoder needs exactly one of %s_floats, %s_int64s, %s_strings and %s_tensor, got %v", side, side, side, side, found)
	}
	return t, nil
}

// labelEncoderDefault is the value of unmapped inputs as a one-element slice of the values'
// element type: default_tensor when set, else default_float (-0.0), default_int64 (-1) or
// default_string ("_Unused") by the values' type.
func labelEncoderDefault(n *graph.Node, dt tensor.DType) (any, error) {
	if a := n.Attr("default_tensor"); a != nil && a.Tensor != nil {
		d, err := tensor.FromGraphTensor(a.Tensor)
		if err != nil {
			return nil, fmt.Errorf("LabelEncoder: default_tensor: %w", err)
		}
		if d.DType() != dt || d.Len() != 1 {
			return nil, fmt.Errorf("LabelEncoder: default_tensor must hold one %s, got %d of %s", dt, d.Len(), d.DType())
		}
		return d.Data(), nil
	}
	switch dt {
	case graph.String:
		return []string{n.AttrString("default_string", "_Unused")}, nil
	case graph.Float:
		return []float32{n.AttrFloat("default_float", float32(math.Copysign(0, -1)))}, nil
	case graph.Double:
		return []float64{float64(n.AttrFloat("default_float", float32(math.Copysign(0, -1))))}, nil
	case graph.Float16, graph.BFloat16:
		t, err := tensor.FromFloat64s(dt, []int64{1}, []float64{float64(n.AttrFloat("default_float", float32(math.Copysign(0, -1))))})
		if err != nil {
			return nil, err
		}
		return t.Data(), nil
	}
	t, err := tensor.FromFloat64s(dt, []int64{1}, []float64{float64(n.AttrInt("default_int64", -1))})
	if err != nil {
		return nil, fmt.Errorf("LabelEncoder: values of type %s: %w", dt, err)
	}
	return t.Data(), nil
}

// opLabelEncoder maps each element of X through keys -> values (same position), unmapped
// elements to the default; Y has X's shape and the values' type.
func opLabelEncoder(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, err := mlInput(in, 0, "LabelEncoder", "X")
	if err != nil {
		return nil, err
	}
	keys, err := labelEncoderSide(n, "keys")
	if err != nil {
		return nil, err
	}
	values, err := labelEncoderSide(n, "values")
	if err != nil {
		return nil, err
	}
	if keys.Len() != values.Len() {
		return nil, fmt.Errorf("LabelEncoder: %d keys but %d values", keys.Len(), values.Len())
	}
	if keyClass(keys.DType()) != keyClass(x.DType()) {
		return nil, fmt.Errorf("LabelEncoder: X of type %s cannot match keys of type %s", x.DType(), keys.DType())
	}
	def, err := labelEncoderDefault(n, values.DType())
	if err != nil {
		return nil, err
	}
	kk, err := mlKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("LabelEncoder: keys: %w", err)
	}
	xk, err := mlKeys(x)
	if err != nil {
		return nil, fmt.Errorf("LabelEncoder: X: %w", err)
	}
	if err := ops.ReserveShape(rc, "the output", values.DType(), x.Dims(), 0); err != nil {
		return nil, err
	}
	table := make(map[mlKey]int, len(kk))
	for i, k := range kk {
		if _, dup := table[k]; !dup { // the first of duplicate keys wins
			table[k] = i
		}
	}
	idx := make([]int, len(xk))
	for i, k := range xk {
		j, ok := table[k]
		if !ok {
			j = -1
		}
		idx[i] = j
	}
	out, err := takeAny(values.Data(), idx, def)
	if err != nil {
		return nil, fmt.Errorf("LabelEncoder: %w", err)
	}
	return []tensor.Tensor{tensor.Raw(values.DType(), append([]int64{}, x.Dims()...), out)}, nil
}

// Node modes, aggregate functions and post transforms of TreeEnsemble.
const (
	treeLEQ = iota
	treeLT
	treeGTE
	treeGT
	treeEQ
	treeNEQ
	treeMember
)

const (
	aggAverage = iota
	aggSum
	aggMin
	aggMax
)

const (
	postNone = iota
	postSoftmax
	postLogistic
	postSoftmaxZero
	postProbit
)

// treeEnsemble is a decoded, checked TreeEnsemble node.
type treeEnsemble struct {
	splits     []float64
	features   []int64
	modes      []uint8
	trueIDs    []int64
	falseIDs   []int64
	trueLeaf   []bool
	falseLeaf  []bool
	missTrue   []bool
	members    [][]float64 // by node: the set of a BRANCH_MEMBER node
	leafTarget []int64
	leafWeight []float64
	roots      []int64
	nTargets   int64
	agg        int64
	post       int64
}

func tensorAttr(n *graph.Node, name string) (tensor.Tensor, bool, error) {
	a := n.Attr(name)
	if a == nil || a.Tensor == nil {
		return tensor.Tensor{}, false, nil
	}
	t, err := tensor.FromGraphTensor(a.Tensor)
	if err != nil {
		return tensor.Tensor{}, false, fmt.Errorf("TreeEnsemble: %s: %w", name, err)
	}
	return t, true, nil
}

func flagsOf(v []int64) []bool {
	out := make([]bool, len(v))
	for i, x := range v {
		out[i] = x != 0
	}
	return out
}

func parseTreeEnsemble(n *graph.Node, xType tensor.DType) (*treeEnsemble, error) {
	te := &treeEnsemble{
		features:   n.AttrInts("nodes_featureids"),
		trueIDs:    n.AttrInts("nodes_truenodeids"),
		falseIDs:   n.AttrInts("nodes_falsenodeids"),
		trueLeaf:   flagsOf(n.AttrInts("nodes_trueleafs")),
		falseLeaf:  flagsOf(n.AttrInts("nodes_falseleafs")),
		leafTarget: n.AttrInts("leaf_targetids"),
		roots:      n.AttrInts("tree_roots"),
		nTargets:   n.AttrInt("n_targets", 0),
		agg:        n.AttrInt("aggregate_function", aggSum),
		post:       n.AttrInt("post_transform", postNone),
	}
	splits, ok, err := tensorAttr(n, "nodes_splits")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("TreeEnsemble needs the attribute nodes_splits")
	}
	weights, ok, err := tensorAttr(n, "leaf_weights")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("TreeEnsemble needs the attribute leaf_weights")
	}
	modes, ok, err := tensorAttr(n, "nodes_modes")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("TreeEnsemble needs the attribute nodes_modes")
	}
	for _, t := range []struct {
		name string
		t    tensor.Tensor
	}{{"nodes_splits", splits}, {"leaf_weights", weights}} {
		if t.t.DType() != xType {
			return nil, fmt.Errorf("TreeEnsemble: %s must have X's type %s, got %s", t.name, xType, t.t.DType())
		}
	}
	if modes.DType() != graph.Uint8 {
		return nil, fmt.Errorf("TreeEnsemble: nodes_modes must be a uint8 tensor, got %s", modes.DType())
	}
	te.modes = modes.Data().([]uint8)
	te.splits = tensor.Float64s(splits)
	te.leafWeight = tensor.Float64s(weights)
	nn := len(te.modes)
	lens := []struct {
		name string
		n    int
	}{
		{"nodes_splits", len(te.splits)}, {"nodes_featureids", len(te.features)},
		{"nodes_truenodeids", len(te.trueIDs)}, {"nodes_falsenodeids", len(te.falseIDs)},
		{"nodes_trueleafs", len(te.trueLeaf)}, {"nodes_falseleafs", len(te.falseLeaf)},
	}
	if a := n.Attr("nodes_missing_value_tracks_true"); a != nil {
		te.missTrue = flagsOf(a.Ints)
		lens = append(lens, struct {
			name string
			n    int
		}{"nodes_missing_value_tracks_true", len(te.missTrue)})
	}
	if hr, ok, err := tensorAttr(n, "nodes_hitrates"); err != nil {
		return nil, err
	} else if ok {
		lens = append(lens, struct {
			name string
			n    int
		}{"nodes_hitrates", hr.Len()})
	}
	for _, l := range lens {
		if l.n != nn {
			return nil, fmt.Errorf("TreeEnsemble: nodes_modes has %d elements but %s has %d", nn, l.name, l.n)
		}
	}
	if len(te.leafTarget) != len(te.leafWeight) {
		return nil, fmt.Errorf("TreeEnsemble: leaf_targetids has %d elements but leaf_weights has %d", len(te.leafTarget), len(te.leafWeight))
	}
	if te.nTargets <= 0 {
		return nil, fmt.Errorf("TreeEnsemble: n_targets must be positive, got %d", te.nTargets)
	}
	if len(te.roots) == 0 {
		return nil, fmt.Errorf("TreeEnsemble: tree_roots is empty")
	}
	if te.agg < aggAverage || te.agg > aggMax {
		return nil, fmt.Errorf("TreeEnsemble: aggregate_function %d is not one of 0 (AVERAGE), 1 (SUM), 2 (MIN), 3 (MAX)", te.agg)
	}
	if te.post < postNone || te.post > postProbit {
		return nil, fmt.Errorf("TreeEnsemble: post_transform %d is not one of 0..4", te.post)
	}
	for i, r := range te.roots {
		if r < 0 || r >= int64(nn) {
			return nil, fmt.Errorf("TreeEnsemble: tree_roots[%d] = %d is not a node index in [0, %d)", i, r, nn)
		}
	}
	for i, t := range te.leafTarget {
		if t < 0 || t >= te.nTargets {
			return nil, fmt.Errorf("TreeEnsemble: leaf_targetids[%d] = %d is out of range [0, %d)", i, t, te.nTargets)
		}
	}
	nMember := 0
	for i := range nn {
		if te.modes[i] > treeMember {
			return nil, fmt.Errorf("TreeEnsemble: nodes_modes[%d] = %d is not a node mode (0..6)", i, te.modes[i])
		}
		if te.modes[i] == treeMember {
			nMember++
		}
		if te.features[i] < 0 {
			return nil, fmt.Errorf("TreeEnsemble: nodes_featureids[%d] = %d is negative", i, te.features[i])
		}
		for _, c := range []struct {
			side string
			id   int64
			leaf bool
		}{{"true", te.trueIDs[i], te.trueLeaf[i]}, {"false", te.falseIDs[i], te.falseLeaf[i]}} {
			if c.leaf && (c.id < 0 || c.id >= int64(len(te.leafWeight))) {
				return nil, fmt.Errorf("TreeEnsemble: node %d's %s branch is leaf %d, out of range [0, %d)", i, c.side, c.id, len(te.leafWeight))
			}
			if !c.leaf && (c.id < 0 || c.id >= int64(nn)) {
				return nil, fmt.Errorf("TreeEnsemble: node %d's %s branch is node %d, out of range [0, %d)", i, c.side, c.id, nn)
			}
		}
	}
	// membership_values lists the sets of the BRANCH_MEMBER nodes in the order they appear in
	// nodes_modes, each ended by a NaN.
	if nMember > 0 {
		mv, ok, err := tensorAttr(n, "membership_values")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("TreeEnsemble: %d BRANCH_MEMBER node(s) but no membership_values", nMember)
		}
		vals := tensor.Float64s(mv)
		var sets [][]float64
		cur := []float64{}
		for _, v := range vals {
			if math.IsNaN(v) {
				sets = append(sets, cur)
				cur = []float64{}
				continue
			}
			cur = append(cur, v)
		}
		if len(cur) > 0 {
			sets = append(sets, cur) // the last set may go without its NaN
		}
		if len(sets) != nMember {
			return nil, fmt.Errorf("TreeEnsemble: membership_values holds %d set(s) for %d BRANCH_MEMBER node(s)", len(sets), nMember)
		}
		te.members = make([][]float64, nn)
		k := 0
		for i := range nn {
			if te.modes[i] == treeMember {
				te.members[i] = sets[k]
				k++
			}
		}
	}
	return te, nil
}

// branch reports whether node i sends the feature value x to its true branch.
func (te *treeEnsemble) branch(i int, x float64) bool {
	if te.missTrue != nil && te.missTrue[i] && math.IsNaN(x) {
		return true
	}
	s := te.splits[i]
	switch te.modes[i] {
	case treeLEQ:
		return x <= s
	case treeLT:
		return x < s
	case treeGTE:
		return x >= s
	case treeGT:
		return x > s
	case treeEQ:
		return x == s
	case treeNEQ:
		return x != s
	default: // treeMember
		for _, m := range te.members[i] {
			if x == m {
				return true
			}
		}
		return false
	}
}

// leafOf walks the tree rooted at node root for the row x to its leaf; a walk longer than the
// node count went round a cycle.
func (te *treeEnsemble) leafOf(root int64, x []float64) (int, error) {
	node := int(root)
	for range len(te.modes) + 1 {
		f := te.features[node]
		if f >= int64(len(x)) {
			return 0, fmt.Errorf("TreeEnsemble: node %d reads feature %d, but X has %d", node, f, len(x))
		}
		var id int64
		var leaf bool
		if te.branch(node, x[f]) {
			id, leaf = te.trueIDs[node], te.trueLeaf[node]
		} else {
			id, leaf = te.falseIDs[node], te.falseLeaf[node]
		}
		if leaf {
			return int(id), nil
		}
		node = int(id)
	}
	return 0, fmt.Errorf("TreeEnsemble: the tree rooted at node %d reaches no leaf within %d steps (a cycle)", root, len(te.modes)+1)
}

// opTreeEnsemble computes, for each row of X [N, F], the aggregate over the trees of the
// weights of the leaves each tree reaches, by target: Y [N, n_targets] of X's type.
func opTreeEnsemble(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, err := mlInput(in, 0, "TreeEnsemble", "X")
	if err != nil {
		return nil, err
	}
	var finMax float64
	switch x.DType() {
	case graph.Float:
		finMax = math.MaxFloat32
	case graph.Double:
		finMax = math.MaxFloat64
	case graph.Float16:
		finMax = 65504
	default:
		return nil, fmt.Errorf("TreeEnsemble: X must be float, double or float16, got %s", x.DType())
	}
	dims := x.Dims()
	if len(dims) != 2 {
		return nil, fmt.Errorf("TreeEnsemble: X must be 2-D [N, F], got shape %v", dims)
	}
	te, err := parseTreeEnsemble(n, x.DType())
	if err != nil {
		return nil, err
	}
	rows, feats := int(dims[0]), int(dims[1])
	shape := []int64{dims[0], te.nTargets}
	if err := ops.ReserveShape(rc, "the output", graph.Double, shape, 0); err != nil {
		return nil, err
	}
	// round keeps the accumulation in X's precision, as the spec's reference does.
	round := func(v float64) float64 { return v }
	if x.DType() != graph.Double {
		round = func(v float64) float64 { return float64(float32(v)) }
	}
	xs := tensor.Float64s(x)
	nt := int(te.nTargets)
	out := make([]float64, rows*nt)
	nTrees := float64(len(te.roots))
	for r := range rows {
		row := xs[r*feats : (r+1)*feats]
		acc := out[r*nt : (r+1)*nt]
		switch te.agg {
		case aggMin:
			for i := range acc {
				acc[i] = finMax
			}
		case aggMax:
			for i := range acc {
				acc[i] = -finMax
			}
		}
		for _, root := range te.roots {
			leaf, err := te.leafOf(root, row)
			if err != nil {
				return nil, err
			}
			w, t := te.leafWeight[leaf], te.leafTarget[leaf]
			switch te.agg {
			case aggSum:
				acc[t] = round(acc[t] + w)
			case aggAverage:
				acc[t] = round(acc[t] + round(w/nTrees))
			case aggMin:
				acc[t] = math.Min(acc[t], w)
			case aggMax:
				acc[t] = math.Max(acc[t], w)
			}
		}
		postTransform(te.post, acc)
	}
	res, err := tensor.FromFloat64s(x.DType(), shape, out)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{res}, nil
}

// postTransform applies TreeEnsemble's post_transform to one row of scores.
func postTransform(post int64, v []float64) {
	switch post {
	case postSoftmax, postSoftmaxZero:
		hi := math.Inf(-1)
		for _, x := range v {
			if !(post == postSoftmaxZero && x == 0) {
				hi = math.Max(hi, x)
			}
		}
		sum := 0.0
		for i, x := range v {
			if post == postSoftmaxZero && x == 0 {
				continue
			}
			v[i] = math.Exp(x - hi)
			sum += v[i]
		}
		if sum > 0 {
			for i, x := range v {
				if post == postSoftmaxZero && x == 0 {
					continue
				}
				v[i] = x / sum
			}
		}
	case postLogistic:
		for i, x := range v {
			v[i] = 1 / (1 + math.Exp(-x))
		}
	case postProbit:
		for i, x := range v {
			v[i] = math.Sqrt2 * math.Erfinv(2*x-1)
		}
	}
}
