package ir

import (
	"fmt"
	"go/constant"

	"github.com/loomrt/loom/go/loom/ast"
	"github.com/loomrt/loom/go/loom/scanner"
	"github.com/loomrt/loom/go/loom/token"
	"github.com/loomrt/loom/go/loom/types"
)

// Violation bits ORed into the per-launch violation word.
const (
	// ViolationBindingBits: bit b flags a skipped access to buffer binding b (bindings from 23
	// on share bit 23).
	ViolationBindingBits uint32 = 0x00ffffff
	ViolationShared      uint32 = 1 << 24 // a skipped access to the block's shared scratch
	ViolationLocal       uint32 = 1 << 25 // a skipped access to a local array
	ViolationView        uint32 = 1 << 28 // a view does not fit in its buffer: block aborted
	ViolationAssume      uint32 = 1 << 29 // an assume (or an index parameter's range) failed: block aborted
	ViolationLaunch      uint32 = 1 << 30 // geometry, bindings or scalar blob do not match: block aborted
)

// IndexParamLimit bounds index-typed scalar parameters (|p| <= 2^40), checked at block entry,
// so that bounds proofs can reason about index arithmetic without overflow.
const IndexParamLimit = int64(1) << 40

// ViolationBinding returns the bit of buffer binding b.
func ViolationBinding(b int) uint32 {
	if b > 23 {
		b = 23
	}
	return 1 << uint(b)
}

type builder struct {
	k        *types.Kernel
	info     *types.Info
	newValue func(t any, name string) *Value
	cur      *Block
	env      map[*types.Object]*Value
	gridDim  [3]*Value
	blockDim [3]*Value
	errs     scanner.ErrorList
	viewBits map[*Value]uint32 // violation bit of each view's binding
}

func (b *builder) errorf(pos token.Pos, format string, args ...any) {
	b.errs.Addf(token.Position{Filename: b.k.Filename, Pos: pos}, format, args...)
}

func (b *builder) emit(op *Op, result any, name string) *Value {
	if result != nil {
		op.Result = b.newValue(result, name)
		op.Result.Def = op
	}
	b.cur.Ops = append(b.cur.Ops, op)
	return op.Result
}

// Build lowers a checked kernel to its device function and launch program.
func Build(k *types.Kernel) (f *Func, l *Launch, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: internal error building IR: %v", k.Filename, r)
		}
	}()
	l, err = BuildLaunch(k)
	if err != nil {
		return nil, nil, err
	}
	f = &Func{Name: k.Name, Body: &Block{}, Filename: k.Filename}
	b := &builder{k: k, info: k.Info, newValue: f.NewValue, cur: f.Body, env: map[*types.Object]*Value{}}
	for _, p := range k.Params {
		v := f.NewValue(p.Type, p.Name)
		f.Params = append(f.Params, v)
		b.env[p] = v
	}
	// Interface checks of the block: index scalars in range, then the launch geometry.
	for _, p := range k.Params {
		if bt, ok := p.Type.(*types.Basic); ok && bt.Kind() == types.Index {
			v := b.env[p]
			lo := b.constInt(types.Typ[types.Index], -IndexParamLimit)
			hi := b.constInt(types.Typ[types.Index], IndexParamLimit)
			c1 := b.emit(&Op{Code: OpCmp, Sub: CmpGe, Args: []*Value{v, lo}}, types.Typ[types.I1], "")
			c2 := b.emit(&Op{Code: OpCmp, Sub: CmpLe, Args: []*Value{v, hi}}, types.Typ[types.I1], "")
			c := b.emit(&Op{Code: OpBinary, Sub: BinAnd, Args: []*Value{c1, c2}}, types.Typ[types.I1], "")
			b.emit(&Op{Code: OpAssume, Args: []*Value{c}, Bit: ViolationAssume, Str: "index parameter " + p.Name}, nil, "")
		}
	}
	wl := map[*types.Object]*Value{}
	for i, w := range k.Workload {
		if d := k.WorkloadDevice[i]; d >= 0 && d < len(f.Params) {
			wl[w] = f.Params[d]
		}
	}
	b.gridDim, b.blockDim, f.Shared = b.launchBody(wl)
	f.GridDim, f.BlockDim = b.gridDim, b.blockDim
	args := append(append(append([]*Value{}, b.gridDim[:]...), b.blockDim[:]...), f.Shared)
	b.emit(&Op{Code: OpLaunchCheck, Args: args, Bit: ViolationLaunch}, nil, "")
	if k.Device != nil && k.Device.Body != nil {
		b.stmts(k.Device.Body.List)
	}
	if err := b.errs.Err(); err != nil {
		return nil, nil, err
	}
	return f, l, nil
}

// BuildLaunch lowers the launch program alone.
func BuildLaunch(k *types.Kernel) (l *Launch, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: internal error building launch program: %v", k.Filename, r)
		}
	}()
	l = &Launch{Body: &Block{}}
	b := &builder{k: k, info: k.Info, newValue: l.NewValue, cur: l.Body, env: map[*types.Object]*Value{}}
	wl := map[*types.Object]*Value{}
	for _, w := range k.Workload {
		v := l.NewValue(w.Type, w.Name)
		l.Params = append(l.Params, v)
		wl[w] = v
	}
	l.GridDim, l.BlockDim, l.Shared = b.launchBody(wl)
	args := append(append(append([]*Value{}, l.GridDim[:]...), l.BlockDim[:]...), l.Shared)
	b.emit(&Op{Code: OpGeometry, Args: args}, nil, "")
	return l, b.errs.Err()
}

func (b *builder) launchBody(workload map[*types.Object]*Value) (grid, block [3]*Value, shared *Value) {
	for o, v := range workload {
		b.env[o] = v
	}
	if b.k.Launch != nil && b.k.Launch.Body != nil {
		for _, st := range b.k.Launch.Body.List {
			if as, ok := st.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
				if id, ok := as.Lhs.(*ast.Ident); ok {
					if obj := b.info.Defs[id]; obj != nil && obj.Kind == types.ObjVar {
						b.env[obj] = b.toType(b.expr(as.Rhs), obj.Type)
					}
				}
			}
		}
	}
	idx := types.Typ[types.Index]
	for d := 0; d < 3; d++ {
		grid[d] = b.indexOf(b.k.Grid[d])
		block[d] = b.indexOf(b.k.Block[d])
	}
	shared = b.indexOf(b.k.Shared)
	if shared == nil {
		shared = b.constInt(idx, 0)
	}
	return grid, block, shared
}

// indexOf lowers a launch expression and widens it to index (nil expression: 1).
func (b *builder) indexOf(e ast.Expr) *Value {
	if e == nil {
		return b.constInt(types.Typ[types.Index], 1)
	}
	return b.toType(b.expr(e), types.Typ[types.Index])
}

func (b *builder) toType(v *Value, t types.Type) *Value {
	if v == nil {
		return nil
	}
	if vt, ok := v.Type.(types.Type); ok && types.Identical(vt, t) {
		return v
	}
	return b.emit(&Op{Code: OpCast, Args: []*Value{v}, Type: t}, t, "")
}

func (b *builder) constInt(t types.Type, v int64) *Value {
	return b.emit(&Op{Code: OpConst, Int: v}, t, "")
}

func defaultOf(t types.Type) types.Type {
	if bt, ok := t.(*types.Basic); ok {
		switch bt.Kind() {
		case types.UntypedInt:
			return types.Typ[types.Index]
		case types.UntypedFloat:
			return types.Typ[types.F32]
		case types.UntypedBool:
			return types.Typ[types.I1]
		}
	}
	return t
}

// constant materializes a constant of type t (a vector type splats its element).
func (b *builder) constant(t types.Type, v constant.Value) *Value {
	t = defaultOf(t)
	if vt, ok := t.(*types.Vector); ok {
		s := b.constant(vt.Elem, v)
		return b.emit(&Op{Code: OpSplat, Args: []*Value{s}}, vt, "")
	}
	bt, ok := t.(*types.Basic)
	if !ok {
		panic(fmt.Sprintf("constant of type %s", t))
	}
	op := &Op{Code: OpConst}
	switch {
	case bt.IsBool():
		if constant.BoolVal(v) {
			op.Int = 1
		}
	case bt.IsInteger():
		iv := constant.ToInt(v)
		if n, ok := constant.Int64Val(iv); ok {
			op.Int = WrapInt(n, bt)
		} else if u, ok := constant.Uint64Val(iv); ok {
			op.Int = int64(u)
		}
	default:
		f, _ := constant.Float64Val(constant.ToFloat(v))
		op.Float = RoundFloat(f, bt)
	}
	return b.emit(op, bt, "")
}

// ---------------------------------------------------------------- statements

func (b *builder) stmts(list []ast.Stmt) {
	for _, s := range list {
		b.stmt(s)
	}
}

func (b *builder) inBlock(blk *Block, fn func()) {
	saved := b.cur
	b.cur = blk
	fn()
	b.cur = saved
}

func (b *builder) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.ConstStmt:
		// constants are folded where they are used
	case *ast.BlockStmt:
		b.stmts(s.List)
	case *ast.VarStmt:
		obj := b.info.Defs[s.Name]
		if obj == nil {
			return
		}
		slot := slotOf(obj.Type)
		ref := b.emit(&Op{Code: OpAlloc, Type: slot.Elem.(types.Type), Pos: s.Pos()}, slot, obj.Name)
		b.env[obj] = ref
		if s.Value != nil {
			v := b.expr(s.Value)
			b.emit(&Op{Code: OpStore, Args: []*Value{ref, b.toType(v, obj.Type)}, Pos: s.Pos()}, nil, "")
		}
	case *ast.AssignStmt:
		b.assign(s)
	case *ast.IfStmt:
		b.ifStmt(s)
	case *ast.ForStmt:
		b.forStmt(s)
	case *ast.AssumeStmt:
		c := b.expr(s.Cond)
		b.emit(&Op{Code: OpAssume, Args: []*Value{c}, Bit: ViolationAssume, Pos: s.Pos(), Str: types.ExprString(s.Cond)}, nil, "")
	case *ast.ExprStmt:
		if call, ok := ast.Unparen(s.X).(*ast.CallExpr); ok && b.info.Calls[call] == types.BuiltinBarrier {
			b.emit(&Op{Code: OpBarrier, Pos: s.Pos()}, nil, "")
			return
		}
		b.expr(s.X)
	default:
		b.errorf(s.Pos(), "unexpected statement in IR builder")
	}
}

func slotOf(t types.Type) *Slot {
	if a, ok := t.(*types.Array); ok {
		dims, elem := a.Dims()
		return &Slot{Elem: elem, Dims: dims}
	}
	return &Slot{Elem: t}
}

func (b *builder) assign(s *ast.AssignStmt) {
	if s.Tok == token.DEFINE {
		id := s.Lhs.(*ast.Ident)
		obj := b.info.Defs[id]
		v := b.expr(s.Rhs)
		if obj == nil {
			return
		}
		if v != nil && v.Name == "" {
			v.Name = obj.Name
		}
		if obj.Mutable {
			t := obj.Type
			ref := b.emit(&Op{Code: OpAlloc, Type: t, Pos: s.Pos()}, &Slot{Elem: t}, obj.Name)
			b.env[obj] = ref
			b.emit(&Op{Code: OpStore, Args: []*Value{ref, b.toType(v, t)}, Pos: s.Pos()}, nil, "")
			return
		}
		b.env[obj] = b.toType(v, obj.Type)
		return
	}
	// Evaluate the location's indices once, then load/compute/store.
	mem, idx, width, elemT, bit := b.location(s.Lhs)
	if mem == nil {
		return
	}
	var val *Value
	if s.Tok == token.ASSIGN {
		val = b.expr(s.Rhs)
	} else {
		op, _ := types.OpAssign(s.Tok)
		old := b.load(mem, idx, width, elemT, bit, s.Pos())
		rhs := b.expr(s.Rhs)
		val = b.arith(op, old, rhs, elemT, s.TokPos)
	}
	val = b.coerce(val, elemT)
	args := append([]*Value{mem, val}, idx...)
	b.emit(&Op{Code: OpStore, Args: args, Width: width, Checks: allChecks(len(idx)), Bit: bit, Pos: s.Pos()}, nil, "")
}

func allChecks(n int) []uint8 {
	c := make([]uint8, n)
	for i := range c {
		c[i] = CheckLower | CheckUpper
	}
	return c
}

// coerce converts v to t, splatting a scalar into a vector.
func (b *builder) coerce(v *Value, t types.Type) *Value {
	if vt, ok := t.(*types.Vector); ok {
		if _, isVec := v.Type.(*types.Vector); !isVec {
			return b.emit(&Op{Code: OpSplat, Args: []*Value{b.toType(v, vt.Elem)}}, vt, "")
		}
	}
	return b.toType(v, t)
}

// location resolves an assignable expression: a variable slot or an element of a buffer, view or
// array. It returns the memory value, the index values, the vector width, the element type and
// the violation bit.
func (b *builder) location(e ast.Expr) (mem *Value, idx []*Value, width int, elemT types.Type, bit uint32) {
	switch e := e.(type) {
	case *ast.Ident:
		obj := b.info.Uses[e]
		ref := b.env[obj]
		if ref == nil {
			b.errorf(e.Pos(), "no storage for %s", e.Name)
			return nil, nil, 0, nil, 0
		}
		return ref, nil, 0, obj.Type, 0
	case *ast.ParenExpr:
		return b.location(e.X)
	case *ast.IndexExpr:
		return b.element(e)
	}
	b.errorf(e.Pos(), "cannot assign to %s", types.ExprString(e))
	return nil, nil, 0, nil, 0
}

// element resolves X[i, ...] (and a chain a[i][j] of array indices).
func (b *builder) element(e *ast.IndexExpr) (mem *Value, idx []*Value, width int, elemT types.Type, bit uint32) {
	// Collect a chain of array indices.
	var chain [][]ast.Expr
	base := ast.Expr(e)
	for {
		ix, ok := base.(*ast.IndexExpr)
		if !ok {
			break
		}
		chain = append([][]ast.Expr{ix.Indices}, chain...)
		base = ast.Unparen(ix.X)
		if tv, ok := b.info.Types[base]; ok {
			if _, isArr := tv.Type.(*types.Array); !isArr {
				break
			}
		}
	}
	var indices []ast.Expr
	for _, c := range chain {
		indices = append(indices, c...)
	}
	tv := b.info.Types[base]
	switch t := tv.Type.(type) {
	case *types.Buffer:
		obj := b.info.Uses[base.(*ast.Ident)]
		mem = b.env[obj]
		elemT, bit = t.Elem, ViolationBinding(obj.Binding)
	case *types.View:
		mem = b.expr(base)
		elemT = t.Elem
		if t.Shared {
			bit = ViolationShared
		} else {
			bit = b.viewBits[mem]
		}
	case *types.Vector:
		// A lane of a vector value.
		mem = b.expr(base)
		elemT = t.Elem
		bit = ViolationLocal
	case *types.Array:
		id, ok := base.(*ast.Ident)
		if !ok {
			b.errorf(base.Pos(), "cannot index %s", types.ExprString(base))
			return nil, nil, 0, nil, 0
		}
		mem = b.env[b.info.Uses[id]]
		_, elemT = t.Dims()
		bit = ViolationLocal
	default:
		b.errorf(e.Pos(), "cannot index %s", types.ExprString(base))
		return nil, nil, 0, nil, 0
	}
	if mem == nil {
		b.errorf(e.Pos(), "no storage for %s", types.ExprString(base))
		return nil, nil, 0, nil, 0
	}
	for _, ix := range indices {
		if sl, ok := ix.(*ast.SliceExpr); ok {
			w, _ := constant.Int64Val(b.info.Types[ix].Value)
			width = int(w)
			idx = append(idx, b.toType(b.expr(sl.Lo), types.Typ[types.Index]))
			elemT = &types.Vector{Elem: types.Elem(elemT), Len: width}
			continue
		}
		idx = append(idx, b.toType(b.expr(ix), types.Typ[types.Index]))
	}
	return mem, idx, width, elemT, bit
}

func (b *builder) load(mem *Value, idx []*Value, width int, elemT types.Type, bit uint32, pos token.Pos) *Value {
	args := append([]*Value{mem}, idx...)
	var checks []uint8
	if len(idx) > 0 {
		checks = allChecks(len(idx))
	}
	return b.emit(&Op{Code: OpLoad, Args: args, Width: width, Checks: checks, Bit: bit, Pos: pos}, elemT, "")
}

func (b *builder) ifStmt(s *ast.IfStmt) {
	c := b.expr(s.Cond)
	op := &Op{Code: OpIf, Args: []*Value{c}, Regions: []*Block{{}, {}}, Pos: s.Pos()}
	b.emit(op, nil, "")
	b.inBlock(op.Regions[0], func() { b.stmts(s.Body.List) })
	if s.Else != nil {
		b.inBlock(op.Regions[1], func() { b.stmt(s.Else) })
	}
}

func (b *builder) forStmt(s *ast.ForStmt) {
	call := ast.Unparen(s.Iter).(*ast.CallExpr)
	idx := types.Typ[types.Index]
	var lo, hi, step *Value
	args := make([]*Value, len(call.Args))
	for i, a := range call.Args {
		args[i] = b.toType(b.expr(a), idx)
	}
	switch len(args) {
	case 1:
		lo, hi, step = b.constInt(idx, 0), args[0], b.constInt(idx, 1)
	case 2:
		lo, hi, step = args[0], args[1], b.constInt(idx, 1)
	default:
		lo, hi, step = args[0], args[1], args[2]
	}
	obj := b.info.LoopVar[s]
	name := "i"
	if obj != nil {
		name = obj.Name
	}
	iv := b.newValue(idx, name)
	body := &Block{Args: []*Value{iv}}
	op := &Op{Code: OpFor, Args: []*Value{lo, hi, step}, Regions: []*Block{body}, Unroll: b.info.Calls[call] == types.BuiltinUnroll, Pos: s.Pos()}
	b.emit(op, nil, "")
	if obj != nil {
		b.env[obj] = iv
	}
	b.inBlock(body, func() { b.stmts(s.Body.List) })
}

// ---------------------------------------------------------------- expressions

func (b *builder) typeOf(e ast.Expr) types.Type {
	return defaultOf(b.info.Types[e].Type)
}

func (b *builder) expr(e ast.Expr) *Value {
	tv, ok := b.info.Types[e]
	if ok && tv.Mode == types.ModeConstant {
		if id, isIdent := ast.Unparen(e).(*ast.Ident); isIdent {
			if obj := b.info.Uses[id]; obj != nil && obj.Spec {
				t := defaultOf(tv.Type)
				if bt, ok := t.(*types.Basic); ok {
					c := b.constant(bt, tv.Value)
					c.Def.Code = OpSpec
					c.Def.Str = obj.Name
					return c
				}
			}
		}
		return b.constant(tv.Type, tv.Value)
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return b.expr(e.X)
	case *ast.Ident:
		obj := b.info.Uses[e]
		v := b.env[obj]
		if v == nil {
			b.errorf(e.Pos(), "no value for %s", e.Name)
			return b.constInt(types.Typ[types.Index], 0)
		}
		if _, isSlot := v.Type.(*Slot); isSlot {
			return b.emit(&Op{Code: OpLoad, Args: []*Value{v}, Pos: e.Pos()}, obj.Type, "")
		}
		return v
	case *ast.UnaryExpr:
		x := b.expr(e.X)
		t := b.typeOf(e)
		switch e.Op {
		case token.ADD:
			return x
		case token.SUB:
			return b.emit(&Op{Code: OpUnary, Sub: UnNeg, Args: []*Value{b.coerce(x, t)}, Pos: e.Pos()}, t, "")
		default:
			return b.emit(&Op{Code: OpUnary, Sub: UnNot, Args: []*Value{b.coerce(x, t)}, Pos: e.Pos()}, t, "")
		}
	case *ast.BinaryExpr:
		return b.binary(e)
	case *ast.CallExpr:
		return b.call(e)
	case *ast.IndexExpr:
		mem, idx, width, elemT, bit := b.element(e)
		if mem == nil {
			return b.constInt(types.Typ[types.Index], 0)
		}
		return b.load(mem, idx, width, elemT, bit, e.Pos())
	case *ast.SelectorExpr:
		id := ast.Unparen(e.X).(*ast.Ident)
		obj := b.info.Uses[id]
		d := dimOf(e.Sel.Name)
		switch obj.Builtin {
		case types.BuiltinThreadID:
			return b.emit(&Op{Code: OpThreadID, Int: int64(d), Pos: e.Pos()}, types.Typ[types.Index], "tid_"+e.Sel.Name)
		case types.BuiltinBlockID:
			return b.emit(&Op{Code: OpBlockID, Int: int64(d), Pos: e.Pos()}, types.Typ[types.Index], "bid_"+e.Sel.Name)
		case types.BuiltinBlockDim:
			return b.blockDim[d]
		case types.BuiltinGridDim:
			return b.gridDim[d]
		}
	}
	b.errorf(e.Pos(), "cannot lower %s", types.ExprString(e))
	return b.constInt(types.Typ[types.Index], 0)
}

func dimOf(s string) int {
	switch s {
	case "y":
		return 1
	case "z":
		return 2
	}
	return 0
}

func hasLoad(e ast.Expr) bool {
	found := false
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		if found || e == nil {
			return
		}
		switch e := e.(type) {
		case *ast.IndexExpr:
			found = true
		case *ast.ParenExpr:
			walk(e.X)
		case *ast.UnaryExpr:
			walk(e.X)
		case *ast.BinaryExpr:
			walk(e.X)
			walk(e.Y)
		case *ast.CallExpr:
			for _, a := range e.Args {
				walk(a)
			}
		}
	}
	walk(e)
	return found
}

var binSubs = map[token.Token]int{
	token.ADD: BinAdd, token.SUB: BinSub, token.MUL: BinMul, token.QUO: BinDiv, token.REM: BinRem,
	token.AND: BinAnd, token.OR: BinOr, token.XOR: BinXor, token.SHL: BinShl, token.SHR: BinShr,
	token.LAND: BinAnd, token.LOR: BinOr,
}

var cmpSubs = map[token.Token]int{
	token.EQL: CmpEq, token.NEQ: CmpNe, token.LSS: CmpLt, token.LEQ: CmpLe, token.GTR: CmpGt, token.GEQ: CmpGe,
}

func (b *builder) binary(e *ast.BinaryExpr) *Value {
	i1 := types.Typ[types.I1]
	if (e.Op == token.LAND || e.Op == token.LOR) && hasLoad(e.Y) {
		// Short-circuit: the right side may load, and its bounds facts may depend on the left.
		x := b.expr(e.X)
		ref := b.emit(&Op{Code: OpAlloc, Type: i1}, &Slot{Elem: i1}, "sc")
		b.emit(&Op{Code: OpStore, Args: []*Value{ref, x}}, nil, "")
		cond := x
		if e.Op == token.LOR {
			cond = b.emit(&Op{Code: OpUnary, Sub: UnNot, Args: []*Value{x}}, i1, "")
		}
		op := &Op{Code: OpIf, Args: []*Value{cond}, Regions: []*Block{{}, {}}}
		b.emit(op, nil, "")
		b.inBlock(op.Regions[0], func() {
			y := b.expr(e.Y)
			b.emit(&Op{Code: OpStore, Args: []*Value{ref, y}}, nil, "")
		})
		return b.emit(&Op{Code: OpLoad, Args: []*Value{ref}}, i1, "")
	}
	x := b.expr(e.X)
	y := b.expr(e.Y)
	if sub, ok := cmpSubs[e.Op]; ok {
		// Operands share a type (untyped constants were converted by the checker).
		xt := b.typeOf(e.X)
		yt := b.typeOf(e.Y)
		if _, ok := xt.(*types.Basic); ok && types.Identical(xt, yt) {
			x, y = b.toType(x, xt), b.toType(y, yt)
		}
		return b.emit(&Op{Code: OpCmp, Sub: sub, Args: []*Value{x, y}, Pos: e.Pos()}, i1, "")
	}
	return b.arith(e.Op, x, y, b.typeOf(e), e.OpPos)
}

// arith emits x op y with result type t, splatting a scalar operand against a vector.
func (b *builder) arith(op token.Token, x, y *Value, t types.Type, pos token.Pos) *Value {
	sub := binSubs[op]
	if op == token.SHL || op == token.SHR {
		// The shift count takes the shifted operand's type (a vector count stays lane-wise).
		if _, isVec := y.Type.(*types.Vector); !isVec {
			y = b.coerce(b.toType(y, types.Elem(t)), t)
		}
		return b.emit(&Op{Code: OpBinary, Sub: sub, Args: []*Value{b.coerce(x, t), y}, Pos: pos}, t, "")
	}
	return b.emit(&Op{Code: OpBinary, Sub: sub, Args: []*Value{b.coerce(x, t), b.coerce(y, t)}, Pos: pos}, t, "")
}

var unarySubs = map[types.Builtin]int{
	types.BuiltinAbs: UnAbs, types.BuiltinSqrt: UnSqrt, types.BuiltinExp: UnExp, types.BuiltinLog: UnLog,
	types.BuiltinTanh: UnTanh, types.BuiltinSin: UnSin, types.BuiltinCos: UnCos, types.BuiltinFloor: UnFloor,
	types.BuiltinCeil: UnCeil,
}

func (b *builder) call(e *ast.CallExpr) *Value {
	t := b.typeOf(e)
	kind := b.info.Calls[e]
	switch kind {
	case types.BuiltinConversion:
		x := b.expr(e.Args[0])
		if vt, ok := t.(*types.Vector); ok {
			if _, isVec := x.Type.(*types.Vector); !isVec {
				return b.emit(&Op{Code: OpSplat, Args: []*Value{b.toType(x, vt.Elem)}, Pos: e.Pos()}, vt, "")
			}
		}
		return b.toType(x, t)
	case types.BuiltinCeilDiv, types.BuiltinMin, types.BuiltinMax:
		sub := map[types.Builtin]int{types.BuiltinCeilDiv: BinCeilDiv, types.BuiltinMin: BinMin, types.BuiltinMax: BinMax}[kind]
		x := b.coerce(b.expr(e.Args[0]), t)
		y := b.coerce(b.expr(e.Args[1]), t)
		return b.emit(&Op{Code: OpBinary, Sub: sub, Args: []*Value{x, y}, Pos: e.Pos()}, t, "")
	case types.BuiltinFma:
		var args []*Value
		for _, a := range e.Args {
			args = append(args, b.coerce(b.expr(a), t))
		}
		return b.emit(&Op{Code: OpFma, Args: args, Pos: e.Pos()}, t, "")
	case types.BuiltinSelect:
		c := b.expr(e.Args[0])
		x := b.coerce(b.expr(e.Args[1]), t)
		y := b.coerce(b.expr(e.Args[2]), t)
		return b.emit(&Op{Code: OpSelect, Args: []*Value{c, x, y}, Pos: e.Pos()}, t, "")
	case types.BuiltinInf:
		return b.emit(&Op{Code: OpInf, Type: t, Pos: e.Pos()}, t, "")
	case types.BuiltinLen:
		buf := b.expr(e.Args[0])
		return b.emit(&Op{Code: OpBufLen, Args: []*Value{buf}, Pos: e.Pos()}, types.Typ[types.Index], "len")
	case types.BuiltinReduceAdd, types.BuiltinReduceMax, types.BuiltinReduceMin:
		sub := map[types.Builtin]int{types.BuiltinReduceAdd: BinAdd, types.BuiltinReduceMax: BinMax, types.BuiltinReduceMin: BinMin}[kind]
		x := b.expr(e.Args[0])
		return b.emit(&Op{Code: OpReduce, Sub: sub, Args: []*Value{x}, Pos: e.Pos()}, t, "")
	case types.BuiltinView:
		return b.view(e)
	case types.BuiltinShared:
		return b.sharedView(e)
	}
	if sub, ok := unarySubs[kind]; ok {
		x := b.coerce(b.expr(e.Args[0]), t)
		return b.emit(&Op{Code: OpUnary, Sub: sub, Args: []*Value{x}, Pos: e.Pos()}, t, "")
	}
	b.errorf(e.Pos(), "cannot lower call %s", types.ExprString(e))
	return b.constInt(types.Typ[types.Index], 0)
}

func (b *builder) list(e ast.Expr) []*Value {
	l := ast.Unparen(e).(*ast.ListExpr)
	var out []*Value
	for _, el := range l.Elts {
		out = append(out, b.toType(b.expr(el), types.Typ[types.Index]))
	}
	return out
}

// rowMajor computes the strides of a contiguous row-major shape.
func (b *builder) rowMajor(shape []*Value) []*Value {
	idx := types.Typ[types.Index]
	strides := make([]*Value, len(shape))
	acc := b.constInt(idx, 1)
	for d := len(shape) - 1; d >= 0; d-- {
		strides[d] = acc
		if d > 0 {
			acc = b.emit(&Op{Code: OpBinary, Sub: BinMul, Args: []*Value{acc, shape[d]}}, idx, "")
		}
	}
	return strides
}

func (b *builder) view(e *ast.CallExpr) *Value {
	t := b.typeOf(e).(*types.View)
	buf := b.expr(e.Args[0])
	shape := b.list(e.Args[1])
	var strides []*Value
	if len(e.Args) >= 3 {
		strides = b.list(e.Args[2])
	} else {
		strides = b.rowMajor(shape)
	}
	off := b.constInt(types.Typ[types.Index], 0)
	if len(e.Args) == 4 {
		off = b.toType(b.expr(e.Args[3]), types.Typ[types.Index])
	}
	args := append(append(append([]*Value{buf}, shape...), strides...), off)
	v := b.emit(&Op{Code: OpViewMake, Args: args, Int: int64(len(shape)), Bit: ViolationView, Pos: e.Pos()}, t, "view")
	if b.viewBits == nil {
		b.viewBits = map[*Value]uint32{}
	}
	bit := uint32(1)
	if bt, ok := buf.Type.(*types.Buffer); ok {
		_ = bt
		for _, p := range b.k.Params {
			if b.env[p] == buf {
				bit = ViolationBinding(p.Binding)
			}
		}
	}
	b.viewBits[v] = bit
	return v
}

func (b *builder) sharedView(e *ast.CallExpr) *Value {
	t := b.typeOf(e).(*types.View)
	shape := b.list(e.Args[1])
	strides := b.rowMajor(shape)
	off := b.constInt(types.Typ[types.Index], 0)
	if len(e.Args) == 3 {
		off = b.toType(b.expr(e.Args[2]), types.Typ[types.Index])
	}
	args := append(append(append([]*Value{}, shape...), strides...), off)
	return b.emit(&Op{Code: OpSharedView, Args: args, Int: int64(len(shape)), Type: t.Elem, Bit: ViolationView, Pos: e.Pos()}, t, "shared")
}
