package ir

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/loomrt/loom/go/loom/types"
)

// TypeString prints a value type.
func TypeString(t any) string {
	switch t := t.(type) {
	case *Slot:
		return t.String()
	case *types.Buffer:
		return fmt.Sprintf("buffer<%s, %s>", t.Elem, t.Access)
	case *types.View:
		sp := ""
		if t.Shared {
			sp = ", shared"
		}
		return fmt.Sprintf("view<%d x %s, %s%s>", t.Rank, t.Elem, t.Access, sp)
	case *types.Vector:
		return fmt.Sprintf("vector<%dx%s>", t.Len, t.Elem)
	case types.Type:
		return t.String()
	}
	return fmt.Sprint(t)
}

func dialectOf(t any) string {
	switch t := t.(type) {
	case *types.Vector:
		return "vector"
	case *types.Basic:
		if t.Kind() == types.Index {
			return "index"
		}
		return "scalar"
	}
	return "scalar"
}

// Name returns the op's printed name, dialect included.
func (op *Op) Name() string {
	var rt any
	if op.Result != nil {
		rt = op.Result.Type
	}
	switch op.Code {
	case OpConst:
		return dialectOf(rt) + ".constant"
	case OpSpec:
		return "kernel.spec"
	case OpBinary, OpUnary:
		return dialectOf(rt) + "." + subNames[op.Sub]
	case OpCmp:
		return dialectOf(op.Args[0].Type) + ".cmp"
	case OpCast:
		return dialectOf(rt) + ".cast"
	case OpSelect:
		return dialectOf(rt) + ".select"
	case OpFma:
		return dialectOf(rt) + ".fma"
	case OpSplat:
		return "vector.splat"
	case OpReduce:
		return "vector.reduce_" + subNames[op.Sub]
	case OpInf:
		return "scalar.inf"
	case OpThreadID:
		return "kernel.thread_id"
	case OpBlockID:
		return "kernel.block_id"
	case OpBufLen:
		return "buffer.len"
	case OpLoad, OpStore:
		verb := ".load"
		if op.Code == OpStore {
			verb = ".store"
		}
		switch op.Args[0].Type.(type) {
		case *types.Buffer:
			return "buffer" + verb
		case *types.View:
			return "view" + verb
		case *types.Vector:
			return "vector.extract"
		}
		return "local" + verb
	case OpViewMake:
		return "view.make"
	case OpSharedView:
		return "view.shared"
	case OpAlloc:
		return "local.alloc"
	case OpFor:
		return "scf.for"
	case OpIf:
		return "scf.if"
	case OpBarrier:
		return "kernel.barrier"
	case OpAssume:
		return "kernel.assume"
	case OpLaunchCheck:
		return "kernel.launch_check"
	case OpGeometry:
		return "kernel.geometry"
	}
	return "unknown"
}

type printer struct {
	b      strings.Builder
	indent int
}

func (p *printer) line(format string, args ...any) {
	p.b.WriteString(strings.Repeat("  ", p.indent))
	fmt.Fprintf(&p.b, format, args...)
	p.b.WriteByte('\n')
}

func ref(v *Value) string {
	if v == nil {
		return "%<nil>"
	}
	if v.Name != "" {
		return "%" + v.Name + "." + strconv.Itoa(v.ID)
	}
	return "%" + strconv.Itoa(v.ID)
}

func refs(vs []*Value) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = ref(v)
	}
	return strings.Join(s, ", ")
}

func checksString(cs []uint8) string {
	var parts []string
	for i, c := range cs {
		var w []string
		if c&CheckLower != 0 {
			w = append(w, "lower")
		}
		if c&CheckUpper != 0 {
			w = append(w, "upper")
		}
		if len(w) > 0 {
			parts = append(parts, fmt.Sprintf("%d:%s", i, strings.Join(w, "+")))
		}
	}
	if len(parts) == 0 {
		return "proven"
	}
	return "check " + strings.Join(parts, ",")
}

func (p *printer) op(op *Op) {
	res := ""
	if op.Result != nil {
		res = ref(op.Result) + " = "
	}
	name := op.Name()
	var ty string
	if op.Result != nil {
		ty = " : " + TypeString(op.Result.Type)
	}
	switch op.Code {
	case OpConst:
		b := types.Elem(op.Result.Type.(types.Type))
		if b.IsFloat() {
			p.line("%s%s %s%s", res, name, strconv.FormatFloat(op.Float, 'g', -1, 64), ty)
		} else if b.IsBool() {
			p.line("%s%s %v%s", res, name, op.Int != 0, ty)
		} else {
			p.line("%s%s %d%s", res, name, op.Int, ty)
		}
	case OpSpec:
		p.line("%s%s %q%s", res, name, op.Str, ty)
	case OpCmp:
		p.line("%s%s %s, %s%s", res, name, subNames[op.Sub], refs(op.Args), ty)
	case OpThreadID, OpBlockID:
		p.line("%s%s %c%s", res, name, "xyz"[op.Int], ty)
	case OpInf:
		p.line("%s%s%s", res, name, ty)
	case OpLoad:
		p.line("%s%s %s[%s] {%s}%s", res, name, ref(op.Args[0]), refs(op.Args[1:]), checksString(op.Checks), ty)
	case OpStore:
		p.line("%s %s, %s[%s] {%s}", name, ref(op.Args[1]), ref(op.Args[0]), refs(op.Args[2:]), checksString(op.Checks))
	case OpViewMake:
		r := int(op.Int)
		p.line("%s%s %s shape [%s] strides [%s] offset %s%s", res, name, ref(op.Args[0]),
			refs(op.Args[1:1+r]), refs(op.Args[1+r:1+2*r]), ref(op.Args[1+2*r]), ty)
	case OpSharedView:
		r := int(op.Int)
		p.line("%s%s shape [%s] strides [%s] offset %s%s", res, name,
			refs(op.Args[0:r]), refs(op.Args[r:2*r]), ref(op.Args[2*r]), ty)
	case OpFor:
		u := ""
		if op.Unroll {
			u = " {unroll}"
		}
		p.line("%s %s = %s to %s step %s%s {", name, ref(op.Regions[0].Args[0]), ref(op.Args[0]), ref(op.Args[1]), ref(op.Args[2]), u)
		p.block(op.Regions[0])
		p.line("}")
	case OpIf:
		p.line("%s %s {", name, ref(op.Args[0]))
		p.block(op.Regions[0])
		if len(op.Regions[1].Ops) > 0 {
			p.line("} else {")
			p.block(op.Regions[1])
		}
		p.line("}")
	default:
		args := ""
		if len(op.Args) > 0 {
			args = " " + refs(op.Args)
		}
		p.line("%s%s%s%s", res, name, args, ty)
	}
}

func (p *printer) block(b *Block) {
	p.indent++
	for _, op := range b.Ops {
		p.op(op)
	}
	p.indent--
}

// String prints the function in MLIR-like text.
func (f *Func) String() string {
	var p printer
	var params []string
	for _, v := range f.Params {
		params = append(params, ref(v)+": "+TypeString(v.Type))
	}
	p.line("kernel.func @%s(%s) {", f.Name, strings.Join(params, ", "))
	p.block(f.Body)
	p.line("}")
	return p.b.String()
}

// String prints the launch program.
func (l *Launch) String() string {
	var p printer
	var params []string
	for _, v := range l.Params {
		params = append(params, ref(v)+": "+TypeString(v.Type))
	}
	p.line("kernel.launch(%s) {", strings.Join(params, ", "))
	p.block(l.Body)
	p.line("}")
	return p.b.String()
}
