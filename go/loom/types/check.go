package types

import (
	"fmt"
	"go/constant"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/loom/ast"
	"github.com/loomrt/loom/go/loom/scanner"
	"github.com/loomrt/loom/go/loom/token"
)

// MaxUnroll bounds the trip count of an unroll loop.
const MaxUnroll = 1024

// MaxVectorLanes bounds the lanes of a vector type.
const MaxVectorLanes = 64

// MaxArrayElems bounds the elements of a local array.
const MaxArrayElems = 4096

// SpecValue is the value bound to one specialization constant.
type SpecValue struct {
	Name       string
	Pos        token.Pos
	IsType     bool
	Type       *Basic         // value constants: the declared type
	Value      constant.Value // value constants
	TypeValue  *Basic         // type constants
	Overridden bool           // set by the specialization rather than the default
}

// Text renders the value the way a specialization config spells it.
func (s *SpecValue) Text() string {
	if s.IsType {
		return s.TypeValue.String()
	}
	return constText(s.Value)
}

func constText(v constant.Value) string {
	switch v.Kind() {
	case constant.Bool:
		return fmt.Sprint(constant.BoolVal(v))
	case constant.Int:
		return v.ExactString()
	case constant.Float:
		f, _ := constant.Float64Val(v)
		return fmt.Sprint(f)
	}
	return v.String()
}

// Kernel is a checked kernel: its specialization, parameters and launch program.
type Kernel struct {
	Name     string
	Decl     *ast.KernelDecl
	Filename string
	Spec     []*SpecValue
	Launch   *ast.LaunchDecl
	Device   *ast.DeviceDecl

	Workload       []*Object // launch parameters, in order
	WorkloadDevice []int     // for each workload parameter, the index of the device parameter
	Params         []*Object // device parameters, in order
	Grid, Block    [3]ast.Expr
	Shared         ast.Expr
	LaunchLocals   []ast.Stmt // := and const statements of the launch program, in order

	Info *Info
}

// Buffers returns the buffer parameters in binding order.
func (k *Kernel) Buffers() []*Object {
	var out []*Object
	for _, p := range k.Params {
		if _, ok := p.Type.(*Buffer); ok {
			out = append(out, p)
		}
	}
	return out
}

// Scalars returns the scalar parameters in blob order.
func (k *Kernel) Scalars() []*Object {
	var out []*Object
	for _, p := range k.Params {
		if _, ok := p.Type.(*Buffer); !ok {
			out = append(out, p)
		}
	}
	return out
}

type checker struct {
	filename string
	errs     scanner.ErrorList
	info     *Info
	kernel   *Kernel

	inLaunch bool
	inDevice bool
	level    int // block nesting inside the device body (0 = top level)
	// synced counts the enclosing levels that are block-uniform loops nested in one another
	// from the top level (unroll loops, and range loops whose bounds are the same in every
	// thread): while it equals level, every thread of the block runs the code the same number
	// of times, so barrier() is allowed there.
	synced    int
	discovery bool // first pass over the device body: find reassigned variables
	mutable   map[token.Pos]bool
}

func (c *checker) errorf(pos token.Pos, format string, args ...any) {
	if c.discovery {
		return
	}
	c.errs.Addf(token.Position{Filename: c.filename, Pos: pos}, format, args...)
}

// Kernels lists the kernel names declared in f, in source order.
func Kernels(f *ast.File) []string {
	var names []string
	for _, k := range f.Kernels {
		if k != nil && k.Name != nil {
			names = append(names, k.Name.Name)
		}
	}
	return names
}

// Check type-checks the kernel named symbol in f under the specialization config (constant
// name to value text). Errors are returned as a sorted scanner.ErrorList.
func Check(f *ast.File, symbol string, config map[string]string) (*Kernel, error) {
	c := &checker{filename: f.Name}
	var decl *ast.KernelDecl
	for _, k := range f.Kernels {
		if k != nil && k.Name != nil && k.Name.Name == symbol {
			if decl != nil {
				c.errorf(k.Name.Pos(), "kernel %s redeclared (first at %d:%d)", symbol, decl.Name.Pos().Line, decl.Name.Pos().Col)
				continue
			}
			decl = k
		}
	}
	if decl == nil {
		names := Kernels(f)
		have := "none"
		if len(names) > 0 {
			have = strings.Join(names, ", ")
		}
		c.errs.Addf(token.Position{Filename: f.Name}, "no kernel named %q (kernels: %s)", symbol, have)
		return nil, c.errs.Err()
	}
	k := c.checkKernel(f, decl, config)
	if err := c.errs.Err(); err != nil {
		return nil, err
	}
	return k, nil
}

// CheckAll type-checks every kernel of f with its default specialization.
func CheckAll(f *ast.File) error {
	var all scanner.ErrorList
	seen := map[string]bool{}
	for _, k := range f.Kernels {
		if k == nil || k.Name == nil {
			continue
		}
		c := &checker{filename: f.Name}
		if seen[k.Name.Name] {
			c.errorf(k.Name.Pos(), "kernel %s redeclared", k.Name.Name)
		}
		seen[k.Name.Name] = true
		c.checkKernel(f, k, nil)
		all = append(all, c.errs...)
	}
	return all.Err()
}

func (c *checker) checkKernel(f *ast.File, decl *ast.KernelDecl, config map[string]string) *Kernel {
	c.info = newInfo()
	k := &Kernel{Name: decl.Name.Name, Decl: decl, Filename: f.Name, Info: c.info}
	c.kernel = k

	fileScope := newScope(universe)
	for _, cd := range f.Consts {
		c.constDecl(fileScope, cd)
	}
	kscope := newScope(fileScope)
	c.bindSpec(kscope, decl, config)

	for _, d := range decl.Decls {
		switch d := d.(type) {
		case *ast.ConstDecl:
			c.constDecl(kscope, d)
		case *ast.LaunchDecl:
			if k.Launch != nil {
				c.errorf(d.Pos(), "kernel %s has more than one launch program", k.Name)
				continue
			}
			k.Launch = d
		case *ast.DeviceDecl:
			if k.Device != nil {
				c.errorf(d.Pos(), "kernel %s has more than one device body", k.Name)
				continue
			}
			k.Device = d
		}
	}
	if k.Device == nil {
		c.errorf(decl.Name.Pos(), "kernel %s has no device body", k.Name)
	}
	if k.Launch == nil {
		c.errorf(decl.Name.Pos(), "kernel %s has no launch program", k.Name)
	}
	if k.Device != nil {
		c.deviceParams(kscope, k.Device)
	}
	if k.Launch != nil {
		c.launch(kscope, k.Launch)
	}
	if k.Device != nil {
		// Pass 1 finds the := variables that are assigned again (they live in memory slots and
		// are never uniform); pass 2 checks for real.
		c.mutable = map[token.Pos]bool{}
		c.discovery = true
		saved := c.info
		c.info = newInfo()
		c.deviceBody(kscope, k.Device)
		c.discovery = false
		c.info = saved
		k.Info = saved
		c.deviceBody(kscope, k.Device)
	}
	return k
}

// ---------------------------------------------------------------- specialization

func validKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func (c *checker) bindSpec(s *scope, decl *ast.KernelDecl, config map[string]string) {
	declared := map[string]*ast.SpecParam{}
	for _, sp := range decl.Spec {
		if sp == nil || sp.Name == nil {
			continue
		}
		if declared[sp.Name.Name] != nil {
			c.errorf(sp.Name.Pos(), "specialization constant %s redeclared", sp.Name.Name)
			continue
		}
		declared[sp.Name.Name] = sp
	}
	keys := make([]string, 0, len(config))
	for key := range config {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if !validKey(key) {
			c.errorf(decl.Name.Pos(), "specialization key %q of kernel %s: keys may only hold letters, digits, '.', '_' and '-'", key, decl.Name.Name)
			continue
		}
		if declared[key] == nil {
			var names []string
			for _, sp := range decl.Spec {
				if sp != nil && sp.Name != nil {
					names = append(names, sp.Name.Name)
				}
			}
			have := "none"
			if len(names) > 0 {
				have = strings.Join(names, ", ")
			}
			c.errorf(decl.Name.Pos(), "unknown specialization key %q for kernel %s (constants: %s)", key, decl.Name.Name, have)
		}
	}
	for _, sp := range decl.Spec {
		if sp == nil || sp.Name == nil || declared[sp.Name.Name] != sp {
			continue
		}
		text, overridden := config[sp.Name.Name]
		sv := &SpecValue{Name: sp.Name.Name, Pos: sp.Name.Pos(), IsType: sp.IsType, Overridden: overridden}
		if sp.IsType {
			sv.TypeValue = Typ[Invalid]
			if overridden {
				if b := LookupBasic(strings.TrimSpace(text)); b != nil {
					sv.TypeValue = b
				} else {
					c.errorf(sp.Name.Pos(), "specialization %s=%q: not a scalar type name (i1, i8..i64, u8..u64, f16, bf16, f32, f64, index)", sp.Name.Name, text)
				}
			} else {
				t := c.typExpr(s, sp.Default)
				if b, ok := t.(*Basic); ok {
					sv.TypeValue = b
				} else if !IsInvalid(t) {
					c.errorf(sp.Default.Pos(), "default of type constant %s must be a scalar type, not %s", sp.Name.Name, t)
				}
			}
			s.names[sp.Name.Name] = &Object{Kind: ObjType, Name: sp.Name.Name, Pos: sp.Name.Pos(), Type: sv.TypeValue, Spec: true}
			c.info.Defs[sp.Name] = s.names[sp.Name.Name]
		} else {
			t := c.typExpr(s, sp.Type)
			b, ok := t.(*Basic)
			if !ok {
				if !IsInvalid(t) {
					c.errorf(sp.Type.Pos(), "specialization constant %s must have a scalar type, not %s", sp.Name.Name, t)
				}
				b = Typ[Invalid]
			}
			sv.Type = b
			sv.Value = constant.MakeUnknown()
			if overridden && b.Kind() != Invalid {
				if v, err := parseSpecValue(text, b); err != nil {
					c.errorf(sp.Name.Pos(), "specialization %s=%q: %v", sp.Name.Name, text, err)
				} else {
					sv.Value = v
				}
			} else if !overridden {
				x := c.expr(s, sp.Default)
				if x.mode != ModeConstant {
					if x.mode != ModeInvalid {
						c.errorf(sp.Default.Pos(), "default of %s is not a constant", sp.Name.Name)
					}
				} else if b.Kind() != Invalid {
					if v, ok := c.representable(x, b); ok {
						sv.Value = v
					}
				}
			}
			obj := &Object{Kind: ObjConst, Name: sp.Name.Name, Pos: sp.Name.Pos(), Type: b, Val: sv.Value, Spec: true, Uniform: true}
			if sv.Value.Kind() == constant.Unknown {
				obj.Type = Typ[Invalid]
			}
			s.names[sp.Name.Name] = obj
			c.info.Defs[sp.Name] = obj
		}
		c.kernel.Spec = append(c.kernel.Spec, sv)
	}
}

// ---------------------------------------------------------------- declarations

func (c *checker) declare(s *scope, id *ast.Ident, obj *Object) {
	if id.Name == "_" {
		return
	}
	if prev := s.names[id.Name]; prev != nil {
		c.errorf(id.Pos(), "%s redeclared in this block", id.Name)
		return
	}
	s.names[id.Name] = obj
	c.info.Defs[id] = obj
}

func (c *checker) constDecl(s *scope, d *ast.ConstDecl) {
	if d == nil || d.Name == nil || d.Value == nil {
		return
	}
	x := c.expr(s, d.Value)
	obj := &Object{Kind: ObjConst, Name: d.Name.Name, Pos: d.Name.Pos(), Type: Typ[Invalid], Val: constant.MakeUnknown(), Uniform: true}
	if x.mode != ModeInvalid {
		if x.mode != ModeConstant {
			c.errorf(d.Value.Pos(), "%s is not a constant", exprString(d.Value))
		} else {
			t := x.typ
			if d.Type != nil {
				t = c.typExpr(s, d.Type)
			}
			if b, ok := t.(*Basic); ok && !IsInvalid(b) {
				if v, ok := c.representable(x, b); ok {
					obj.Type, obj.Val = b, v
				}
			} else if !IsInvalid(t) {
				c.errorf(d.Type.Pos(), "constant %s must have a scalar type", d.Name.Name)
			}
		}
	}
	c.declare(s, d.Name, obj)
}

func (c *checker) deviceParams(ks *scope, d *ast.DeviceDecl) {
	k := c.kernel
	seen := map[string]bool{}
	binding := 0
	for i, f := range d.Params {
		if f == nil || f.Name == nil || f.Type == nil {
			continue
		}
		t := c.typExpr(ks, f.Type)
		obj := &Object{Kind: ObjVar, Name: f.Name.Name, Pos: f.Name.Pos(), Type: t, VarKind: VarParam, Index: i, Uniform: true, TopLevel: true}
		if bt, ok := t.(*Buffer); ok {
			mode := Access(0)
			if f.Access == nil {
				c.errorf(f.Name.Pos(), "buffer parameter %s needs an access mode: read, write or read_write", f.Name.Name)
			} else {
				switch f.Access.Name {
				case "read":
					mode = Read
				case "write":
					mode = Write
				case "read_write":
					mode = ReadWrite
				default:
					c.errorf(f.Access.Pos(), "unknown access mode %s (want read, write or read_write)", f.Access.Name)
				}
			}
			obj.Type = &Buffer{Elem: bt.Elem, Access: mode}
			obj.Binding = binding
			binding++
		} else {
			if f.Access != nil {
				c.errorf(f.Access.Pos(), "scalar parameter %s takes no access mode", f.Name.Name)
			}
			if b, ok := t.(*Basic); !ok {
				if !IsInvalid(t) {
					c.errorf(f.Type.Pos(), "parameter %s: a parameter is a scalar or a buffer, not %s", f.Name.Name, t)
				}
				obj.Type = Typ[Invalid]
			} else {
				_ = b
			}
		}
		if seen[f.Name.Name] {
			c.errorf(f.Name.Pos(), "duplicate parameter %s", f.Name.Name)
		}
		seen[f.Name.Name] = true
		c.info.Defs[f.Name] = obj
		k.Params = append(k.Params, obj)
	}
}

func (c *checker) launch(ks *scope, d *ast.LaunchDecl) {
	k := c.kernel
	s := newScope(ks)
	c.inLaunch = true
	defer func() { c.inLaunch = false }()
	for _, f := range d.Params {
		if f == nil || f.Name == nil || f.Type == nil {
			continue
		}
		t := c.typExpr(ks, f.Type)
		obj := &Object{Kind: ObjVar, Name: f.Name.Name, Pos: f.Name.Pos(), Type: t, VarKind: VarWorkload, Index: len(k.Workload), Uniform: true}
		if b, ok := t.(*Basic); !ok || !b.IsInteger() {
			if !IsInvalid(t) {
				c.errorf(f.Type.Pos(), "workload parameter %s must have an integer type, not %s", f.Name.Name, t)
			}
			obj.Type = Typ[Invalid]
		}
		if f.Access != nil {
			c.errorf(f.Access.Pos(), "workload parameter %s takes no access mode", f.Name.Name)
		}
		dev := -1
		for i, p := range k.Params {
			if p.Name == f.Name.Name {
				dev = i
				if !Identical(p.Type, obj.Type) && !IsInvalid(obj.Type) && !IsInvalid(p.Type) {
					c.errorf(f.Name.Pos(), "workload parameter %s has type %s but device parameter %s has type %s", f.Name.Name, obj.Type, p.Name, p.Type)
				}
			}
		}
		if dev < 0 && k.Device != nil {
			c.errorf(f.Name.Pos(), "workload parameter %s has no device parameter of the same name", f.Name.Name)
		}
		c.declare(s, f.Name, obj)
		k.Workload = append(k.Workload, obj)
		k.WorkloadDevice = append(k.WorkloadDevice, dev)
	}
	if d.Body == nil {
		return
	}
	set := map[string]token.Pos{}
	for _, st := range d.Body.List {
		switch st := st.(type) {
		case *ast.ConstStmt:
			c.constDecl(s, st.Decl)
			k.LaunchLocals = append(k.LaunchLocals, st)
		case *ast.AssignStmt:
			id, isIdent := st.Lhs.(*ast.Ident)
			if !isIdent {
				c.errorf(st.Lhs.Pos(), "launch programs assign only grid, block, shared and new names")
				continue
			}
			if st.Tok == token.DEFINE {
				x := c.expr(s, st.Rhs)
				c.launchValue(&x)
				obj := &Object{Kind: ObjVar, Name: id.Name, Pos: id.Pos(), Type: x.typ, VarKind: VarLocal, Uniform: true}
				if x.mode == ModeConstant {
					obj.Kind, obj.Val = ObjConst, x.val
				}
				c.declare(s, id, obj)
				k.LaunchLocals = append(k.LaunchLocals, st)
				continue
			}
			if st.Tok != token.ASSIGN {
				c.errorf(st.TokPos, "launch programs only use = and :=")
				continue
			}
			if prev, dup := set[id.Name]; dup {
				c.errorf(id.Pos(), "%s assigned twice (first at %d:%d)", id.Name, prev.Line, prev.Col)
				continue
			}
			switch id.Name {
			case "grid", "block":
				set[id.Name] = id.Pos()
				var elts []ast.Expr
				if t, ok := st.Rhs.(*ast.TupleExpr); ok {
					elts = t.Elts
				} else {
					elts = []ast.Expr{st.Rhs}
				}
				if len(elts) > 3 {
					c.errorf(st.Rhs.Pos(), "%s has at most 3 dimensions, got %d", id.Name, len(elts))
					elts = elts[:3]
				}
				dst := &k.Grid
				if id.Name == "block" {
					dst = &k.Block
				}
				for i, e := range elts {
					x := c.expr(s, e)
					c.launchValue(&x)
					dst[i] = e
				}
			case "shared":
				set[id.Name] = id.Pos()
				x := c.expr(s, st.Rhs)
				c.launchValue(&x)
				k.Shared = st.Rhs
			default:
				c.errorf(id.Pos(), "launch programs assign grid, block and shared; declare other names with :=")
			}
		default:
			c.errorf(st.Pos(), "launch programs hold only :=, const and the grid, block and shared assignments")
		}
	}
	if _, ok := set["grid"]; !ok {
		c.errorf(d.Launch, "launch program does not set grid")
	}
	if _, ok := set["block"]; !ok {
		c.errorf(d.Launch, "launch program does not set block")
	}
}

// launchValue requires an integer scalar and converts untyped constants to index.
func (c *checker) launchValue(x *operand) {
	if x.mode == ModeInvalid {
		return
	}
	if x.mode != ModeConstant && x.mode != ModeValue {
		c.errorf(x.expr.Pos(), "%s is not a value", exprString(x.expr))
		x.mode = ModeInvalid
		return
	}
	b, ok := x.typ.(*Basic)
	if !ok || !b.IsInteger() {
		c.errorf(x.expr.Pos(), "launch programs compute integers; %s has type %s", exprString(x.expr), x.typ)
		x.mode = ModeInvalid
		return
	}
	if b.IsUntyped() {
		c.convertUntyped(x, Typ[Index])
	}
}

// ---------------------------------------------------------------- device body

func (c *checker) deviceBody(ks *scope, d *ast.DeviceDecl) {
	if d.Body == nil {
		return
	}
	s := newScope(ks)
	for _, p := range c.kernel.Params {
		if p.Name != "_" {
			if prev := s.names[p.Name]; prev == nil {
				s.names[p.Name] = p
			}
		}
	}
	c.inDevice = true
	c.level = 0
	c.synced = 0
	defer func() { c.inDevice = false }()
	for _, st := range d.Body.List {
		c.stmt(s, st)
	}
}

func (c *checker) block(s *scope, b *ast.BlockStmt) {
	if b == nil {
		return
	}
	inner := newScope(s)
	c.level++
	for _, st := range b.List {
		c.stmt(inner, st)
	}
	c.level--
}

func (c *checker) newLocal(id *ast.Ident, t Type, uniform bool, kind VarKind) *Object {
	obj := &Object{Kind: ObjVar, Name: id.Name, Pos: id.Pos(), Type: t, VarKind: kind,
		TopLevel: c.level == 0}
	obj.Mutable = c.mutable[id.Pos()]
	obj.Uniform = uniform && !obj.Mutable
	return obj
}

func (c *checker) stmt(s *scope, st ast.Stmt) {
	switch st := st.(type) {
	case nil, *ast.BadStmt:
	case *ast.ConstStmt:
		c.constDecl(s, st.Decl)
	case *ast.BlockStmt:
		c.block(s, st)
	case *ast.VarStmt:
		c.varStmt(s, st)
	case *ast.AssignStmt:
		c.assign(s, st)
	case *ast.IfStmt:
		x := c.expr(s, st.Cond)
		c.condition(&x, "if")
		c.block(s, st.Body)
		if st.Else != nil {
			if b, ok := st.Else.(*ast.BlockStmt); ok {
				c.block(s, b)
			} else {
				c.level++
				c.stmt(s, st.Else)
				c.level--
			}
		}
	case *ast.ForStmt:
		c.forStmt(s, st)
	case *ast.AssumeStmt:
		if c.level != 0 {
			c.errorf(st.Assume, "assume belongs at the top level of the device body")
		}
		x := c.expr(s, st.Cond)
		c.condition(&x, "assume")
		if x.mode == ModeValue && !x.uniform {
			c.errorf(st.Cond.Pos(), "assume needs a condition that is the same in every thread of the block (no thread_id, loads or variables)")
		}
		if x.mode == ModeConstant && !constant.BoolVal(x.val) {
			c.errorf(st.Cond.Pos(), "assumption is always false")
		}
	case *ast.ExprStmt:
		call, ok := ast.Unparen(st.X).(*ast.CallExpr)
		if ok {
			if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok {
				if obj := s.lookup(id.Name); obj != nil && obj.Kind == ObjBuiltin && obj.Builtin == BuiltinBarrier {
					c.info.Uses[id] = obj
					c.info.Calls[call] = BuiltinBarrier
					if len(call.Args) != 0 {
						c.errorf(call.Lparen, "barrier takes no arguments")
					}
					if c.level != c.synced {
						c.errorf(call.Pos(), "barrier() belongs at the top level of the device body or in loops there whose bounds are the same in every thread (unroll loops, range loops over parameters, constants and block ids), never under if")
					}
					return
				}
			}
		}
		x := c.expr(s, st.X)
		if x.mode != ModeInvalid {
			c.errorf(st.X.Pos(), "%s is not used", exprString(st.X))
		}
	default:
		c.errorf(st.Pos(), "unexpected statement")
	}
}

func (c *checker) condition(x *operand, what string) {
	if x.mode == ModeInvalid {
		return
	}
	if x.mode != ModeConstant && x.mode != ModeValue {
		c.errorf(x.expr.Pos(), "%s condition is not a value", what)
		x.mode = ModeInvalid
		return
	}
	if b, ok := x.typ.(*Basic); !ok || !b.IsBool() {
		c.errorf(x.expr.Pos(), "%s condition must be i1, not %s", what, x.typ)
		x.mode = ModeInvalid
		return
	}
	c.convertUntyped(x, Typ[I1])
}

func (c *checker) varStmt(s *scope, st *ast.VarStmt) {
	if st.Name == nil {
		return
	}
	var t Type
	if st.Type != nil {
		t = c.typExpr(s, st.Type)
	}
	if st.Value != nil {
		x := c.expr(s, st.Value)
		if t == nil {
			c.defaultType(&x)
			t = x.typ
		} else {
			c.assignable(&x, t, "variable "+st.Name.Name)
		}
	}
	if t == nil {
		t = Typ[Invalid]
	}
	switch t.(type) {
	case *Basic, *Vector, *Array:
	default:
		c.errorf(st.Name.Pos(), "variable %s cannot have type %s", st.Name.Name, t)
		t = Typ[Invalid]
	}
	if b, ok := t.(*Basic); ok && b.IsUntyped() {
		t = Typ[Invalid]
	}
	obj := c.newLocal(st.Name, t, false, VarLocal)
	obj.Mutable = true
	obj.Uniform = false
	c.declare(s, st.Name, obj)
}

func (c *checker) assign(s *scope, st *ast.AssignStmt) {
	if st.Tok == token.DEFINE {
		id, ok := st.Lhs.(*ast.Ident)
		if !ok {
			c.errorf(st.Lhs.Pos(), "non-name %s on left side of :=", exprString(st.Lhs))
			c.expr(s, st.Rhs)
			return
		}
		x := c.expr(s, st.Rhs)
		if x.mode == ModeType || x.mode == ModeBuiltin || x.mode == ModeNoValue {
			c.errorf(st.Rhs.Pos(), "%s is not a value", exprString(st.Rhs))
			x.mode = ModeInvalid
		}
		c.defaultType(&x)
		t := x.typ
		if x.mode == ModeInvalid {
			t = Typ[Invalid]
		}
		if v, isView := t.(*View); isView {
			if c.level != 0 {
				c.errorf(st.Rhs.Pos(), "views are created at the top level of the device body")
			}
			_ = v
		}
		switch t.(type) {
		case *Buffer:
			c.errorf(st.Rhs.Pos(), "cannot copy buffer %s; make a view of it", exprString(st.Rhs))
			t = Typ[Invalid]
		case *Array:
			c.errorf(st.Rhs.Pos(), "cannot copy array %s; copy its elements", exprString(st.Rhs))
			t = Typ[Invalid]
		}
		obj := c.newLocal(id, t, x.uniform, VarLocal)
		obj.Pure = !obj.Mutable && c.pure(st.Rhs)
		if _, isView := t.(*View); isView {
			if obj.Mutable {
				c.errorf(id.Pos(), "view %s cannot be assigned again", id.Name)
			}
			obj.Mutable = false
			obj.Uniform = true
		}
		c.declare(s, id, obj)
		return
	}

	// =, op=
	if id, ok := st.Lhs.(*ast.Ident); ok {
		obj := s.lookup(id.Name)
		if obj == nil {
			c.errorf(id.Pos(), "undefined: %s", id.Name)
			c.expr(s, st.Rhs)
			return
		}
		c.info.Uses[id] = obj
		switch {
		case obj.Kind == ObjConst:
			c.errorf(id.Pos(), "cannot assign to constant %s", id.Name)
		case obj.Kind != ObjVar:
			c.errorf(id.Pos(), "cannot assign to %s", id.Name)
		case obj.VarKind == VarParam:
			c.errorf(id.Pos(), "cannot assign to parameter %s", id.Name)
		case obj.VarKind == VarLoop:
			c.errorf(id.Pos(), "cannot assign to loop variable %s", id.Name)
		default:
			if c.discovery {
				c.mutable[obj.Pos] = true
			}
			if _, isArr := obj.Type.(*Array); isArr {
				c.errorf(id.Pos(), "cannot assign a whole array; assign its elements")
			}
			if _, isView := obj.Type.(*View); isView {
				c.errorf(id.Pos(), "view %s cannot be assigned again", id.Name)
			}
			c.info.Types[id] = TypeAndValue{Mode: ModeValue, Type: obj.Type}
			c.assignValue(s, st, obj.Type)
			return
		}
		c.expr(s, st.Rhs)
		return
	}
	ix, ok := st.Lhs.(*ast.IndexExpr)
	if !ok {
		c.errorf(st.Lhs.Pos(), "cannot assign to %s", exprString(st.Lhs))
		c.expr(s, st.Rhs)
		return
	}
	t := c.indexExpr(s, ix, accessWrite(st.Tok))
	if _, isArr := t.(*Array); isArr {
		c.errorf(st.Lhs.Pos(), "cannot assign a whole array; assign its elements")
		t = Typ[Invalid]
	}
	if IsInvalid(t) {
		c.expr(s, st.Rhs)
		return
	}
	c.assignValue(s, st, t)
}

type accessKind uint8

const (
	accessLoad accessKind = 1 << iota
	accessStore
)

func accessWrite(tok token.Token) accessKind {
	if tok == token.ASSIGN {
		return accessStore
	}
	return accessStore | accessLoad
}

var opAssign = map[token.Token]token.Token{
	token.ADD_ASSIGN: token.ADD, token.SUB_ASSIGN: token.SUB, token.MUL_ASSIGN: token.MUL,
	token.QUO_ASSIGN: token.QUO, token.REM_ASSIGN: token.REM, token.AND_ASSIGN: token.AND,
	token.OR_ASSIGN: token.OR, token.XOR_ASSIGN: token.XOR, token.SHL_ASSIGN: token.SHL,
	token.SHR_ASSIGN: token.SHR,
}

// OpAssign returns the binary operator of a compound assignment token (+= → +).
func OpAssign(tok token.Token) (token.Token, bool) {
	op, ok := opAssign[tok]
	return op, ok
}

func (c *checker) assignValue(s *scope, st *ast.AssignStmt, t Type) {
	x := c.expr(s, st.Rhs)
	if st.Tok == token.ASSIGN {
		c.assignable(&x, t, "assignment")
		return
	}
	op, ok := opAssign[st.Tok]
	if !ok {
		c.errorf(st.TokPos, "unexpected %s", st.Tok)
		return
	}
	lhs := operand{mode: ModeValue, typ: t, expr: st.Lhs}
	res := c.binaryOp(st.Lhs, op, st.TokPos, lhs, x)
	if res.mode != ModeInvalid && !Identical(res.typ, t) {
		c.errorf(st.TokPos, "%s %s %s has type %s, not %s", exprString(st.Lhs), op, exprString(st.Rhs), res.typ, t)
	}
}

func (c *checker) forStmt(s *scope, st *ast.ForStmt) {
	inner := newScope(s)
	call, ok := ast.Unparen(st.Iter).(*ast.CallExpr)
	var kind Builtin
	if ok {
		if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok {
			if obj := s.lookup(id.Name); obj != nil && obj.Kind == ObjBuiltin && (obj.Builtin == BuiltinRange || obj.Builtin == BuiltinUnroll) {
				kind = obj.Builtin
				c.info.Uses[id] = obj
				c.info.Calls[call] = kind
			}
		}
	}
	var xs []operand
	if kind == BuiltinNone {
		c.errorf(st.Iter.Pos(), "for iterates over range(...) or unroll(...)")
		if st.Iter != nil {
			c.expr(s, st.Iter)
		}
	} else {
		args := call.Args
		if len(args) < 1 || len(args) > 3 {
			c.errorf(call.Lparen, "%s takes 1 to 3 arguments (hi, lo, hi or lo, hi, step), got %d", kind.Name(), len(args))
		}
		for i, a := range args {
			if i >= 3 {
				break
			}
			x := c.expr(s, a)
			c.indexValue(&x)
			xs = append(xs, x)
		}
		if len(xs) == 3 && xs[2].mode != ModeInvalid {
			if xs[2].mode != ModeConstant {
				c.errorf(args[2].Pos(), "%s step must be a constant", kind.Name())
			} else if constant.Sign(xs[2].val) <= 0 {
				c.errorf(args[2].Pos(), "%s step must be positive", kind.Name())
			}
		}
		if kind == BuiltinUnroll {
			allConst := true
			for i, x := range xs {
				if x.mode == ModeInvalid {
					allConst = false
				} else if x.mode != ModeConstant {
					c.errorf(args[i].Pos(), "unroll bounds must be constants")
					allConst = false
				}
			}
			if allConst && len(xs) >= 1 {
				lo, hi, step := int64(0), int64(0), int64(1)
				vals := make([]int64, len(xs))
				for i, x := range xs {
					vals[i], _ = constant.Int64Val(x.val)
				}
				switch len(vals) {
				case 1:
					hi = vals[0]
				case 2:
					lo, hi = vals[0], vals[1]
				default:
					lo, hi, step = vals[0], vals[1], vals[2]
				}
				if step > 0 && hi > lo && (hi-lo+step-1)/step > MaxUnroll {
					c.errorf(st.Iter.Pos(), "unroll trip count %d exceeds %d", (hi-lo+step-1)/step, MaxUnroll)
				}
			}
		}
	}
	// A loop that every thread of the block runs alike (an unroll loop, or a range loop whose
	// bounds are the same in every thread) directly inside such code may hold barrier().
	synced := c.inDevice && c.level == c.synced && kind != BuiltinNone
	if synced && kind == BuiltinRange {
		for _, x := range xs {
			if x.mode == ModeInvalid || !x.uniform {
				synced = false
			}
		}
	}
	if st.Key != nil {
		obj := c.newLocal(st.Key, Typ[Index], false, VarLoop)
		obj.Mutable = false
		// The variable of a block-uniform loop is the same in every thread.
		obj.Uniform = synced
		// An unroll loop's variable becomes a constant in each copy of the body.
		obj.Pure = kind == BuiltinUnroll
		c.declare(inner, st.Key, obj)
		c.info.LoopVar[st] = obj
	}
	if synced {
		c.synced++
		defer func() { c.synced-- }()
	}
	c.block(inner, st.Body)
}

// pure reports whether e is computed from parameters, constants, ids and other pure variables
// only (no loads, no mutable variables): such a value may be recomputed after a barrier.
func (c *checker) pure(e ast.Expr) bool {
	switch e := e.(type) {
	case nil:
		return true
	case *ast.Ident:
		obj := c.info.Uses[e]
		if obj == nil || obj.Kind != ObjVar {
			return true
		}
		return obj.VarKind == VarParam || (!obj.Mutable && obj.Pure)
	case *ast.BasicLit:
		return true
	case *ast.ParenExpr:
		return c.pure(e.X)
	case *ast.UnaryExpr:
		return c.pure(e.X)
	case *ast.BinaryExpr:
		return c.pure(e.X) && c.pure(e.Y)
	case *ast.SelectorExpr:
		return true
	case *ast.CallExpr:
		if c.info.Calls[e] == BuiltinView || c.info.Calls[e] == BuiltinShared {
			return true
		}
		for _, a := range e.Args {
			if !c.pure(a) {
				return false
			}
		}
		return true
	case *ast.VecType, *ast.ArrayType, *ast.BufferType:
		return true
	}
	return false
}

// indexValue requires an integer value usable as an index: index itself or an untyped constant.
func (c *checker) indexValue(x *operand) {
	if x.mode == ModeInvalid {
		return
	}
	if x.mode != ModeConstant && x.mode != ModeValue {
		c.errorf(x.expr.Pos(), "%s is not a value", exprString(x.expr))
		x.mode = ModeInvalid
		return
	}
	b, ok := x.typ.(*Basic)
	if !ok || !(b.Kind() == Index || b.Kind() == UntypedInt || (b.Kind() == UntypedFloat && x.mode == ModeConstant && isIntegral(x.val))) {
		c.errorf(x.expr.Pos(), "index %s must have type index, not %s (convert with index(...))", exprString(x.expr), x.typ)
		x.mode = ModeInvalid
		return
	}
	c.convertUntyped(x, Typ[Index])
}
