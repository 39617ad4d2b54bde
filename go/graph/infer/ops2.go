package infer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/graph"
)

// windowParams reads the kernel, strides, dilations and pads of a convolution or pooling node
// for nSpatial axes.
func (c *inferNode) windowParams(nSpatial int, kernel []int64) (strides, dil, pads []int64, err error) {
	strides = c.n.AttrInts("strides")
	dil = c.n.AttrInts("dilations")
	pads = c.n.AttrInts("pads")
	fill := func(v []int64, n int, def int64) []int64 {
		if v != nil {
			return v
		}
		out := make([]int64, n)
		for i := range out {
			out[i] = def
		}
		return out
	}
	strides, dil, pads = fill(strides, nSpatial, 1), fill(dil, nSpatial, 1), fill(pads, 2*nSpatial, 0)
	if len(kernel) != nSpatial || len(strides) != nSpatial || len(dil) != nSpatial || len(pads) != 2*nSpatial {
		return nil, nil, nil, fmt.Errorf("kernel %v, strides %v, dilations %v or pads %v do not fit %d spatial axes", kernel, strides, dil, pads, nSpatial)
	}
	for i := range kernel {
		if kernel[i] <= 0 || strides[i] <= 0 || dil[i] <= 0 {
			return nil, nil, nil, fmt.Errorf("kernel %v, strides %v and dilations %v must be positive", kernel, strides, dil)
		}
	}
	return strides, dil, pads, nil
}

func inferConv(c *inferNode) error {
	xi, wi, elem := 0, 1, c.elem(0)
	switch c.n.OpType {
	case "QLinearConv":
		xi, wi = 0, 3
		elem = graph.Uint8
		if c.has(7) {
			elem = c.elem(7)
		}
	case "ConvInteger":
		elem = graph.Int32
	}
	x, ok := c.shape(xi)
	w, ok2 := c.shape(wi)
	if !ok {
		return c.out(0, graph.UnrankedTensor(elem))
	}
	if len(x) < 3 {
		return fmt.Errorf("input %v has no spatial axes", x)
	}
	n := len(x) - 2
	kernel := c.n.AttrInts("kernel_shape")
	if kernel == nil && ok2 && len(w) == len(x) {
		for _, d := range w[2:] {
			if !d.Known() {
				return c.out(0, graph.TensorType(elem, unknownDims(len(x))))
			}
			kernel = append(kernel, d.Value)
		}
	}
	if kernel == nil {
		return c.out(0, graph.TensorType(elem, unknownDims(len(x))))
	}
	strides, dil, pads, err := c.windowParams(n, kernel)
	if err != nil {
		return err
	}
	outC := graph.UnknownDim()
	if ok2 && len(w) > 0 {
		outC = w[0]
	}
	if ok2 && len(w) > 1 && x[1].Known() && w[1].Known() {
		g := c.n.AttrInt("group", 1)
		if g <= 0 || w[1].Value*g != x[1].Value {
			return fmt.Errorf("input channels %d do not match weights %v with group %d", x[1].Value, w, g)
		}
	}
	out := graph.Shape{x[0], outC}
	autoPad := c.n.AttrString("auto_pad", "NOTSET")
	for i := 0; i < n; i++ {
		out = append(out, convOutDim(x[2+i], kernel[i], strides[i], dil[i], pads[i], pads[i+n], autoPad, false))
	}
	return c.out(0, graph.TensorType(elem, out))
}

func inferConvTranspose(c *inferNode) error {
	x, ok := c.shape(0)
	w, ok2 := c.shape(1)
	elem := c.elem(0)
	if !ok || len(x) < 3 {
		return c.out(0, graph.UnrankedTensor(elem))
	}
	n := len(x) - 2
	kernel := c.n.AttrInts("kernel_shape")
	if kernel == nil && ok2 && len(w) == len(x) {
		for _, d := range w[2:] {
			if !d.Known() {
				return c.out(0, graph.TensorType(elem, unknownDims(len(x))))
			}
			kernel = append(kernel, d.Value)
		}
	}
	if kernel == nil {
		return c.out(0, graph.TensorType(elem, unknownDims(len(x))))
	}
	strides, dil, pads, err := c.windowParams(n, kernel)
	if err != nil {
		return err
	}
	outC := graph.UnknownDim()
	if ok2 && len(w) > 1 {
		outC = dimMul(w[1], graph.DimOf(c.n.AttrInt("group", 1)))
	}
	out := graph.Shape{x[0], outC}
	if os := c.n.AttrInts("output_shape"); os != nil {
		if len(os) == n+2 {
			os = os[2:]
		}
		if len(os) != n {
			return fmt.Errorf("output_shape %v does not fit %d spatial axes", os, n)
		}
		return c.out(0, graph.TensorType(elem, append(out, graph.ShapeOf(os...)...)))
	}
	outPad := c.n.AttrInts("output_padding")
	autoPad := c.n.AttrString("auto_pad", "NOTSET")
	for i := 0; i < n; i++ {
		op := int64(0)
		if i < len(outPad) {
			op = outPad[i]
		}
		in := x[2+i]
		if autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER" {
			out = append(out, dimMul(in, graph.DimOf(strides[i])))
			continue
		}
		if autoPad == "VALID" {
			pads[i], pads[i+n] = 0, 0
		}
		extra := op + (kernel[i]-1)*dil[i] + 1 - pads[i] - pads[i+n] - strides[i]
		out = append(out, dimAddConst(dimMul(in, graph.DimOf(strides[i])), extra))
	}
	return c.out(0, graph.TensorType(elem, out))
}

func inferPool(c *inferNode) error {
	x, ok := c.shape(0)
	elem := c.elem(0)
	if !ok || len(x) < 3 {
		if err := c.out(0, graph.UnrankedTensor(elem)); err != nil {
			return err
		}
		return c.out(1, graph.UnrankedTensor(graph.Int64))
	}
	n := len(x) - 2
	kernel := c.n.AttrInts("kernel_shape")
	strides, dil, pads, err := c.windowParams(n, kernel)
	if err != nil {
		return err
	}
	ceil := c.n.AttrInt("ceil_mode", 0) != 0
	autoPad := c.n.AttrString("auto_pad", "NOTSET")
	out := graph.Shape{x[0], x[1]}
	for i := 0; i < n; i++ {
		out = append(out, convOutDim(x[2+i], kernel[i], strides[i], dil[i], pads[i], pads[i+n], autoPad, ceil))
	}
	if err := c.out(0, graph.TensorType(elem, out)); err != nil {
		return err
	}
	return c.out(1, graph.TensorType(graph.Int64, out))
}

func inferGlobalPool(c *inferNode) error {
	x, ok := c.shape(0)
	if !ok || len(x) < 2 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	out := graph.Shape{x[0], x[1]}
	for range x[2:] {
		out = append(out, graph.DimOf(1))
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferMaxUnpool(c *inferNode) error {
	x, ok := c.shape(0)
	if d, ok := c.data(2); ok {
		s := make(graph.Shape, len(d.vals))
		for i, v := range d.vals {
			s[i] = v.dim()
		}
		return c.out(0, graph.TensorType(c.elem(0), s))
	}
	if !ok || len(x) < 3 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	if c.has(2) {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(len(x))))
	}
	n := len(x) - 2
	kernel := c.n.AttrInts("kernel_shape")
	strides, _, pads, err := c.windowParams(n, kernel)
	if err != nil {
		return err
	}
	out := graph.Shape{x[0], x[1]}
	for i := 0; i < n; i++ {
		out = append(out, dimAddConst(dimMul(x[2+i], graph.DimOf(strides[i])), kernel[i]-strides[i]-pads[i]-pads[i+n]))
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferRoiPool(c *inferNode) error {
	x, ok := c.shape(0)
	r, ok2 := c.shape(1)
	if !ok || !ok2 || len(x) < 2 || len(r) < 1 {
		return c.out(0, graph.TensorType(c.elem(0), unknownDims(4)))
	}
	var ph, pw int64
	if c.n.OpType == "MaxRoiPool" {
		p := c.n.AttrInts("pooled_shape")
		if len(p) != 2 {
			return fmt.Errorf("pooled_shape %v", p)
		}
		ph, pw = p[0], p[1]
	} else {
		ph, pw = c.n.AttrInt("output_height", 1), c.n.AttrInt("output_width", 1)
	}
	return c.out(0, graph.TensorType(c.elem(0), graph.Shape{r[0], x[1], graph.DimOf(ph), graph.DimOf(pw)}))
}

func inferRNN(c *inferNode) error {
	elem := c.elem(0)
	x, ok := c.shape(0)
	dirs := int64(1)
	if c.n.AttrString("direction", "forward") == "bidirectional" {
		dirs = 2
	}
	hidden := graph.UnknownDim()
	if a := c.n.Attr("hidden_size"); a != nil {
		hidden = graph.DimOf(a.Int)
	} else if r, ok := c.shape(2); ok && len(r) == 3 {
		hidden = r[2]
	}
	layout := c.n.AttrInt("layout", 0)
	if !ok || len(x) != 3 {
		for i := range c.n.Outputs {
			if err := c.out(i, graph.UnrankedTensor(elem)); err != nil {
				return err
			}
		}
		return nil
	}
	seq, batch := x[0], x[1]
	if layout != 0 {
		seq, batch = x[1], x[0]
	}
	y := graph.Shape{seq, graph.DimOf(dirs), batch, hidden}
	h := graph.Shape{graph.DimOf(dirs), batch, hidden}
	if layout != 0 {
		y = graph.Shape{batch, seq, graph.DimOf(dirs), hidden}
		h = graph.Shape{batch, graph.DimOf(dirs), hidden}
	}
	if err := c.out(0, graph.TensorType(elem, y)); err != nil {
		return err
	}
	for i := 1; i < len(c.n.Outputs); i++ {
		if err := c.out(i, graph.TensorType(elem, h.Clone())); err != nil {
			return err
		}
	}
	return nil
}

func inferDFT(c *inferNode) error {
	x, ok := c.shape(0)
	elem := c.elem(0)
	if !ok || len(x) < 2 {
		return c.out(0, graph.UnrankedTensor(elem))
	}
	axis := c.n.AttrInt("axis", 1)
	if c.opset >= 20 {
		axis = -2
		if c.has(2) {
			v, ok := c.ints(2)
			if !ok || len(v) != 1 {
				return c.out(0, graph.TensorType(elem, unknownDims(len(x))))
			}
			axis = v[0]
		}
	}
	ax, err := graph.NormAxis(axis, len(x))
	if err != nil {
		return err
	}
	if ax == len(x)-1 {
		return fmt.Errorf("axis %d is the complex axis", axis)
	}
	out := x.Clone()
	out[len(out)-1] = graph.DimOf(2)
	onesided, inverse := c.n.AttrInt("onesided", 0) != 0, c.n.AttrInt("inverse", 0) != 0
	n := x[ax]
	if onesided && inverse {
		// IRFFT: a one-sided complex spectrum in, the full real signal out, by default of
		// length 2 * (signal_dim_axis - 1).
		n = dimMul(dimAddConst(n, -1), graph.DimOf(2))
		out[len(out)-1] = graph.DimOf(1)
	}
	if c.has(1) {
		if v, ok := c.ints(1); ok && len(v) == 1 {
			n = graph.DimOf(v[0])
		} else {
			n = graph.UnknownDim()
		}
	}
	if onesided && !inverse {
		n = dimAddConst(dimDiv(n, 2, false), 1)
	}
	out[ax] = n
	return c.out(0, graph.TensorType(elem, out))
}

func inferSTFT(c *inferNode) error {
	x, ok := c.shape(0)
	elem := c.elem(0)
	if !ok || len(x) != 3 {
		return c.out(0, graph.TensorType(elem, unknownDims(4)))
	}
	step, okStep := c.ints(1)
	var fl int64 = -1
	if v, ok := c.ints(3); ok && len(v) == 1 {
		fl = v[0]
	} else if w, ok := c.shape(2); ok && len(w) == 1 && w[0].Known() {
		fl = w[0].Value
	}
	frames, bins := graph.UnknownDim(), graph.UnknownDim()
	if fl > 0 {
		if c.n.AttrInt("onesided", 1) != 0 {
			bins = graph.DimOf(fl/2 + 1)
		} else {
			bins = graph.DimOf(fl)
		}
		if okStep && len(step) == 1 && step[0] > 0 && x[1].Known() && x[1].Value >= fl {
			frames = graph.DimOf((x[1].Value-fl)/step[0] + 1)
		}
	}
	return c.out(0, graph.TensorType(elem, graph.Shape{x[0], frames, bins, graph.DimOf(2)}))
}

func inferGridSample(c *inferNode) error {
	x, ok := c.shape(0)
	g, ok2 := c.shape(1)
	if !ok || !ok2 || len(x) < 3 || len(g) != len(x) {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	out := graph.Shape{x[0], x[1]}
	out = append(out, g[1:len(g)-1]...)
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferCol2Im(c *inferNode) error {
	x, ok := c.shape(0)
	img, ok2 := c.data(1)
	blk, ok3 := c.ints(2)
	if !ok || len(x) != 3 || !ok2 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	ch := graph.UnknownDim()
	if ok3 {
		p := int64(1)
		for _, b := range blk {
			p *= b
		}
		ch = dimDiv(x[1], p, false)
	}
	out := graph.Shape{x[0], ch}
	for _, v := range img.vals {
		out = append(out, v.dim())
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferCenterCropPad(c *inferNode) error {
	x, ok := c.shape(0)
	sh, ok2 := c.data(1)
	if !ok || !ok2 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	out := x.Clone()
	axes := c.n.AttrInts("axes")
	if axes == nil {
		for i := range x {
			axes = append(axes, int64(i))
		}
	}
	if len(axes) != len(sh.vals) {
		return fmt.Errorf("shape has %d entries for %d axes", len(sh.vals), len(axes))
	}
	for i, a := range axes {
		ax, err := graph.NormAxis(a, len(x))
		if err != nil {
			return err
		}
		out[ax] = sh.vals[i].dim()
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferAffineGrid(c *inferNode) error {
	sz, ok := c.data(1)
	if !ok || (len(sz.vals) != 4 && len(sz.vals) != 5) {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	out := graph.Shape{sz.vals[0].dim()}
	for _, v := range sz.vals[2:] {
		out = append(out, v.dim())
	}
	out = append(out, graph.DimOf(int64(len(sz.vals)-2)))
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferAttention(c *inferNode) error {
	q, ok := c.shape(0)
	v, ok2 := c.shape(2)
	if !ok || !ok2 || len(q) != len(v) {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	out := q.Clone()
	if len(q) == 4 {
		out[3] = v[3]
	} else if len(q) == 3 {
		if a := c.n.Attr("kv_num_heads"); a != nil && a.Int > 0 {
			out[2] = dimMul(dimDiv(v[2], a.Int, false), graph.DimOf(c.n.AttrInt("q_num_heads", 0)))
		} else {
			out[2] = graph.UnknownDim()
		}
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

// inferEinsum parses the equation, binds each letter (and the ellipsis) to input dimensions
// and builds the output from the explicit or implicit output term.
func inferEinsum(c *inferNode) error {
	eq := strings.ReplaceAll(c.n.AttrString("equation", ""), " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != c.numIn() {
		return fmt.Errorf("equation %q has %d terms for %d inputs", eq, len(terms), c.numIn())
	}
	letters := map[byte]graph.Dim{}
	count := map[byte]int{}
	var ell graph.Shape
	for i, term := range terms {
		s, ok := c.shape(i)
		if !ok {
			return c.out(0, graph.UnrankedTensor(c.elem(0)))
		}
		labels := strings.Replace(term, "...", ".", 1)
		nEll := len(s) - (len(labels) - strings.Count(labels, "."))
		if strings.Contains(labels, ".") {
			if nEll < 0 {
				return fmt.Errorf("term %q does not fit shape %v", term, s)
			}
		} else if nEll != 0 {
			return fmt.Errorf("term %q does not fit shape %v", term, s)
		}
		j := 0
		for k := 0; k < len(labels); k++ {
			ch := labels[k]
			if ch == '.' {
				b, err := broadcastShapes(ell, s[j:j+nEll])
				if err != nil {
					return err
				}
				ell = b
				j += nEll
				continue
			}
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z') {
				return fmt.Errorf("equation %q has label %q", eq, ch)
			}
			d := s[j]
			if prev, ok := letters[ch]; ok {
				if prev.Known() && d.Known() && prev.Value != d.Value && prev.Value != 1 && d.Value != 1 {
					return fmt.Errorf("label %c is %d and %d", ch, prev.Value, d.Value)
				}
				if !prev.Known() || prev.Value == 1 {
					letters[ch] = d
				}
			} else {
				letters[ch] = d
			}
			count[ch]++
			j++
		}
	}
	var out graph.Shape
	if explicit {
		labels := strings.Replace(rhs, "...", ".", 1)
		for k := 0; k < len(labels); k++ {
			if labels[k] == '.' {
				out = append(out, ell...)
				continue
			}
			d, ok := letters[labels[k]]
			if !ok {
				return fmt.Errorf("output label %c not in the inputs", labels[k])
			}
			out = append(out, d)
		}
	} else {
		out = append(out, ell...)
		var once []int
		for ch, n := range count {
			if n == 1 {
				once = append(once, int(ch))
			}
		}
		sort.Ints(once)
		for _, ch := range once {
			out = append(out, letters[byte(ch)])
		}
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

// subgraph infers a body graph given the types of its inputs; scratch runs keep their errors
// to themselves.
func (c *inferNode) subgraph(g *graph.Graph, inputs []graph.Type, scratch bool) []graph.Type {
	inf := c.inf
	if scratch {
		cp := *c.inf
		cp.el = &graph.ErrorList{}
		inf = &cp
	}
	s := &inferScope{g: g, parent: c.s, path: graph.GraphPath(g, c.s.path+"/"+c.n.Label()), data: map[string]symData{}, consts: map[string]*graph.Tensor{}, depth: c.s.depth + 1, fixedInits: c.s.fixedInits}
	for i, in := range g.Inputs {
		var t graph.Type
		if i < len(inputs) {
			t = inputs[i]
		}
		in.Inferred = t.Clone()
		if err := compatible(in.Declared, t); err != nil && !scratch {
			inf.el.Add(&graph.Error{Model: inf.m.Name, Graph: s.path, Value: in.Name, Msg: fmt.Sprintf("subgraph input declared %v but receives %v: %v", in.Declared, t, err)})
		}
		in.Type = mergeTypes(in.Declared, t)
	}
	inf.graph(s)
	out := make([]graph.Type, len(g.Outputs))
	for i, o := range g.Outputs {
		out[i] = o.Type.Clone()
	}
	return out
}

func inferIf(c *inferNode) error {
	// A condition known from constants or the signature selects its branch; the other branch
	// is still inferred, but its errors are dropped, as its assumptions need not hold.
	taken := -1
	if v, ok := c.ints(0); ok && len(v) == 1 {
		taken = 1
		if v[0] != 0 {
			taken = 0
		}
	}
	var outs [][]graph.Type
	for i, name := range []string{"then_branch", "else_branch"} {
		a := c.n.Attr(name)
		if a == nil || a.Graph == nil {
			return fmt.Errorf("missing %s", name)
		}
		outs = append(outs, c.subgraph(a.Graph, nil, taken >= 0 && taken != i))
	}
	if len(outs[0]) != len(outs[1]) || len(outs[0]) != len(c.n.Outputs) {
		return fmt.Errorf("branches have %d and %d outputs for %d node outputs", len(outs[0]), len(outs[1]), len(c.n.Outputs))
	}
	for i := range c.n.Outputs {
		if taken >= 0 {
			if err := c.out(i, outs[taken][i]); err != nil {
				return err
			}
			continue
		}
		a, b := outs[0][i], outs[1][i]
		if a.Kind == graph.KindTensor && b.Kind == graph.KindTensor && a.Elem != graph.Undefined && b.Elem != graph.Undefined && a.Elem != b.Elem {
			return fmt.Errorf("output %d is %v in one branch and %v in the other", i, a.Elem, b.Elem)
		}
		if err := c.out(i, unifyTypes(a, b)); err != nil {
			return err
		}
	}
	return nil
}

// maxTwoPassDepth bounds the nesting at which loop bodies are inferred twice (once to learn
// how loop-carried shapes change), keeping nested loops from costing 2^depth passes.
const maxTwoPassDepth = 3

func inferLoop(c *inferNode) error {
	a := c.n.Attr("body")
	if a == nil || a.Graph == nil {
		return fmt.Errorf("missing body")
	}
	body := a.Graph
	nCarried := c.numIn() - 2
	if nCarried < 0 {
		nCarried = 0
	}
	inputs := []graph.Type{graph.TensorType(graph.Int64, graph.Shape{}), graph.TensorType(graph.Bool, graph.Shape{})}
	for i := 0; i < nCarried; i++ {
		inputs = append(inputs, c.in(2+i).Clone())
	}
	if c.s.depth < maxTwoPassDepth {
		first := c.subgraph(body, inputs, true)
		for i := 0; i < nCarried && 1+i < len(first); i++ {
			inputs[2+i] = unifyTypes(inputs[2+i], first[1+i])
		}
	} else {
		for i := 0; i < nCarried; i++ {
			inputs[2+i] = relaxShape(inputs[2+i])
		}
	}
	outs := c.subgraph(body, inputs, false)
	if len(outs) < 1+nCarried {
		return fmt.Errorf("body has %d outputs, needs at least %d", len(outs), 1+nCarried)
	}
	trip := graph.UnknownDim()
	if v, ok := c.ints(0); ok && len(v) == 1 && !c.has(1) && v[0] >= 0 {
		trip = graph.DimOf(v[0])
	}
	for i := 0; i < len(c.n.Outputs); i++ {
		var t graph.Type
		switch {
		case i < nCarried:
			t = unifyTypes(inputs[2+i], outs[1+i])
		case 1+i < len(outs):
			t = outs[1+i].Clone()
			if t.Kind == graph.KindTensor && t.Ranked {
				t.Shape = append(graph.Shape{trip}, t.Shape...)
			}
		}
		if err := c.out(i, t); err != nil {
			return err
		}
	}
	return nil
}

func relaxShape(t graph.Type) graph.Type {
	out := t.Clone()
	if out.Kind == graph.KindTensor && out.Ranked {
		out.Shape = unknownDims(len(out.Shape))
	}
	return out
}

func inferScan(c *inferNode) error {
	a := c.n.Attr("body")
	if a == nil || a.Graph == nil {
		return fmt.Errorf("missing body")
	}
	body := a.Graph
	m := int(c.n.AttrInt("num_scan_inputs", 0))
	first := 0
	if c.opset < 9 {
		first = 1 // sequence_lens
	}
	nState := c.numIn() - first - m
	if m <= 0 || nState < 0 {
		return fmt.Errorf("num_scan_inputs %d does not fit %d inputs", m, c.numIn())
	}
	inAxes := c.n.AttrInts("scan_input_axes")
	outAxes := c.n.AttrInts("scan_output_axes")
	var inputs []graph.Type
	for i := 0; i < nState; i++ {
		t := c.in(first + i).Clone()
		if c.opset < 9 && t.Ranked && len(t.Shape) > 0 {
			t.Shape = t.Shape[1:]
		}
		inputs = append(inputs, t)
	}
	seqLen := graph.UnknownDim()
	batch := graph.UnknownDim()
	for j := 0; j < m; j++ {
		t := c.in(first + nState + j).Clone()
		if t.Kind == graph.KindTensor && t.Ranked {
			ax := 0
			if c.opset < 9 {
				ax = 1
				if len(t.Shape) < 2 {
					return fmt.Errorf("scan input %d has rank %d", j, len(t.Shape))
				}
				batch = t.Shape[0]
			} else if j < len(inAxes) {
				var err error
				if ax, err = graph.NormAxis(inAxes[j], len(t.Shape)); err != nil {
					return err
				}
			}
			if ax >= len(t.Shape) {
				return fmt.Errorf("scan input %d has rank %d", j, len(t.Shape))
			}
			if j == 0 {
				seqLen = t.Shape[ax]
			}
			sh := append(append(graph.Shape{}, t.Shape[:ax]...), t.Shape[ax+1:]...)
			if c.opset < 9 {
				sh = t.Shape[2:].Clone()
			}
			t.Shape = sh
		}
		inputs = append(inputs, t)
	}
	outs := c.subgraph(body, inputs, false)
	for i := 0; i < len(c.n.Outputs) && i < len(outs); i++ {
		t := outs[i].Clone()
		if t.Kind == graph.KindTensor && t.Ranked {
			switch {
			case i < nState && c.opset < 9:
				t.Shape = append(graph.Shape{batch}, t.Shape...)
			case i >= nState && c.opset < 9:
				t.Shape = append(graph.Shape{batch, seqLen}, t.Shape...)
			case i >= nState:
				k := i - nState
				ax := 0
				if k < len(outAxes) {
					var err error
					if ax, err = graph.NormAxis(outAxes[k], len(t.Shape)+1); err != nil {
						return err
					}
				}
				t.Shape = append(append(append(graph.Shape{}, t.Shape[:ax]...), seqLen), t.Shape[ax:]...)
			}
		}
		if err := c.out(i, t); err != nil {
			return err
		}
	}
	return nil
}

func inferSequenceMap(c *inferNode) error {
	a := c.n.Attr("body")
	if a == nil || a.Graph == nil {
		return fmt.Errorf("missing body")
	}
	var inputs []graph.Type
	for i := 0; i < c.numIn(); i++ {
		t := c.in(i)
		if t.Kind == graph.KindSequence && t.Inner != nil {
			inputs = append(inputs, t.Inner.Clone())
		} else if t.Kind == graph.KindSequence {
			inputs = append(inputs, graph.Type{})
		} else {
			inputs = append(inputs, t.Clone())
		}
	}
	outs := c.subgraph(a.Graph, inputs, false)
	for i := range c.n.Outputs {
		if i < len(outs) {
			if err := c.out(i, seqOf(outs[i])); err != nil {
				return err
			}
		}
	}
	return nil
}

// inferLinearAttention (opset 27): output (batch, sequence, q_num_heads·value head size) of
// query's type; present_state (batch, kv_num_heads, key head size, value head size) of
// past_state's type (query's without one).
func inferLinearAttention(c *inferNode) error {
	hq, hkv := c.n.AttrInt("q_num_heads", 0), c.n.AttrInt("kv_num_heads", 0)
	if hq <= 0 || hkv <= 0 || hq%hkv != 0 {
		return fmt.Errorf("q_num_heads %d must be a positive multiple of kv_num_heads %d", hq, hkv)
	}
	stateElem := c.elem(0)
	if c.has(3) {
		stateElem = c.elem(3)
	}
	q, okq := c.shape(0)
	v, okv := c.shape(2)
	if !okq || !okv || len(q) != 3 || len(v) != 3 {
		if err := c.out(0, graph.UnrankedTensor(c.elem(0))); err != nil {
			return err
		}
		return c.out(1, graph.UnrankedTensor(stateElem))
	}
	dk, dv := dimDiv(q[2], hq, false), dimDiv(v[2], hkv, false)
	if err := c.out(0, graph.TensorType(c.elem(0), graph.Shape{q[0], q[1], dimMul(dv, graph.DimOf(hq))})); err != nil {
		return err
	}
	return c.out(1, graph.TensorType(stateElem, graph.Shape{q[0], graph.DimOf(hkv), dk, dv}))
}

// inferCausalConvWithState (opset 27): output the input's type and shape; present_state
// (batch, channels, kernel size - 1).
func inferCausalConvWithState(c *inferNode) error {
	x, ok := c.shape(0)
	if !ok || len(x) != 3 {
		if err := c.out(0, graph.UnrankedTensor(c.elem(0))); err != nil {
			return err
		}
		return c.out(1, graph.UnrankedTensor(c.elem(0)))
	}
	if err := c.out(0, graph.TensorType(c.elem(0), x.Clone())); err != nil {
		return err
	}
	state := graph.UnknownDim()
	if w, ok := c.shape(1); ok && len(w) == 3 && w[2].Known() && w[2].Value >= 1 {
		state = graph.DimOf(w[2].Value - 1)
	}
	return c.out(1, graph.TensorType(c.elem(0), graph.Shape{x[0], x[1], state}))
}
