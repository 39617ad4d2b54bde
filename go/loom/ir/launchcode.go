package ir

import (
	"fmt"

	"github.com/loomrt/loom/go/loom/types"
)

// Instr is one instruction of a flattened launch program.
type Instr struct {
	Op   string `json:"op"`             // const, param, binary, cmp, unary, cast, select
	Sub  int    `json:"sub,omitempty"`  // sub-operation of binary/cmp/unary
	Args []int  `json:"args,omitempty"` // indices of earlier instructions
	Imm  int64  `json:"imm,omitempty"`  // const value; param index
	Type string `json:"type"`           // result type
}

// LaunchCode is a launch program flattened for evaluation on the host (and for caching).
type LaunchCode struct {
	ParamTypes []string `json:"param_types"`
	Instrs     []Instr  `json:"instrs"`
	Grid       [3]int   `json:"grid"`
	Block      [3]int   `json:"block"`
	Shared     int      `json:"shared"`
}

// FlattenLaunch turns an optimized launch program into LaunchCode.
func FlattenLaunch(l *Launch) (*LaunchCode, error) {
	c := &LaunchCode{}
	index := map[*Value]int{}
	for i, p := range l.Params {
		b := p.Basic()
		if b == nil {
			return nil, fmt.Errorf("launch parameter %s is not a scalar", p.Name)
		}
		c.ParamTypes = append(c.ParamTypes, b.String())
		index[p] = len(c.Instrs)
		c.Instrs = append(c.Instrs, Instr{Op: "param", Imm: int64(i), Type: b.String()})
	}
	var geometry *Op
	for _, op := range l.Body.Ops {
		if op.Code == OpGeometry {
			geometry = op
			continue
		}
		if op.Result == nil {
			return nil, fmt.Errorf("unexpected %s in a launch program", op.Name())
		}
		b := op.Result.Basic()
		if b == nil || !(b.IsInteger() || b.IsBool()) {
			return nil, fmt.Errorf("launch programs compute integers, not %s", TypeString(op.Result.Type))
		}
		in := Instr{Sub: op.Sub, Type: b.String()}
		switch op.Code {
		case OpConst:
			in.Op, in.Imm = "const", op.Int
		case OpBinary:
			in.Op = "binary"
		case OpCmp:
			in.Op = "cmp"
			in.Type = op.Args[0].Basic().String()
		case OpUnary:
			in.Op = "unary"
		case OpCast:
			in.Op = "cast"
		case OpSelect:
			in.Op = "select"
		default:
			return nil, fmt.Errorf("unexpected %s in a launch program", op.Name())
		}
		for _, a := range op.Args {
			i, ok := index[a]
			if !ok {
				if a.Def != nil && a.Def.Code == OpConst {
					i = len(c.Instrs)
					c.Instrs = append(c.Instrs, Instr{Op: "const", Imm: a.Def.Int, Type: a.Basic().String()})
					index[a] = i
				} else {
					return nil, fmt.Errorf("launch program uses an undefined value")
				}
			}
			in.Args = append(in.Args, i)
		}
		index[op.Result] = len(c.Instrs)
		c.Instrs = append(c.Instrs, in)
	}
	if geometry == nil {
		return nil, fmt.Errorf("launch program has no geometry")
	}
	ref := func(v *Value) (int, error) {
		if i, ok := index[v]; ok {
			return i, nil
		}
		if v.Def != nil && v.Def.Code == OpConst {
			i := len(c.Instrs)
			c.Instrs = append(c.Instrs, Instr{Op: "const", Imm: v.Def.Int, Type: v.Basic().String()})
			index[v] = i
			return i, nil
		}
		return 0, fmt.Errorf("launch geometry uses an undefined value")
	}
	var err error
	for d := 0; d < 3; d++ {
		if c.Grid[d], err = ref(geometry.Args[d]); err != nil {
			return nil, err
		}
		if c.Block[d], err = ref(geometry.Args[3+d]); err != nil {
			return nil, err
		}
	}
	if c.Shared, err = ref(geometry.Args[6]); err != nil {
		return nil, err
	}
	return c, nil
}

// Eval runs the launch program on workload values (each given as the bits of its type, as
// the device parameter would hold them) with the same integer semantics as the device code.
func (c *LaunchCode) Eval(workload []uint64) (grid, block [3]int64, shared int64, err error) {
	if len(workload) != len(c.ParamTypes) {
		return grid, block, 0, fmt.Errorf("launch program takes %d workload values, got %d", len(c.ParamTypes), len(workload))
	}
	vals := make([]int64, len(c.Instrs))
	for i, in := range c.Instrs {
		t := types.LookupBasic(in.Type)
		if t == nil {
			return grid, block, 0, fmt.Errorf("launch instruction %d: unknown type %q", i, in.Type)
		}
		arg := func(k int) (int64, error) {
			if k >= len(in.Args) || in.Args[k] < 0 || in.Args[k] >= i {
				return 0, fmt.Errorf("launch instruction %d: bad operand", i)
			}
			return vals[in.Args[k]], nil
		}
		var v int64
		switch in.Op {
		case "param":
			if in.Imm < 0 || int(in.Imm) >= len(workload) {
				return grid, block, 0, fmt.Errorf("launch instruction %d: bad parameter", i)
			}
			v = WrapInt(int64(workload[in.Imm]), t)
		case "const":
			v = in.Imm
		case "binary", "cmp", "select", "unary", "cast":
			xs := make([]int64, len(in.Args))
			for k := range in.Args {
				if xs[k], err = arg(k); err != nil {
					return grid, block, 0, err
				}
			}
			switch in.Op {
			case "binary":
				if len(xs) != 2 {
					return grid, block, 0, fmt.Errorf("launch instruction %d: bad operands", i)
				}
				v = EvalInt(in.Sub, xs[0], xs[1], t)
			case "cmp":
				if len(xs) != 2 {
					return grid, block, 0, fmt.Errorf("launch instruction %d: bad operands", i)
				}
				if CmpInt(in.Sub, xs[0], xs[1], t.IsUnsigned()) {
					v = 1
				}
			case "select":
				if len(xs) != 3 {
					return grid, block, 0, fmt.Errorf("launch instruction %d: bad operands", i)
				}
				v = xs[2]
				if xs[0] != 0 {
					v = xs[1]
				}
			case "unary":
				if len(xs) != 1 {
					return grid, block, 0, fmt.Errorf("launch instruction %d: bad operands", i)
				}
				switch in.Sub {
				case UnNeg:
					v = WrapInt(-xs[0], t)
				case UnNot:
					if t.IsBool() {
						v = xs[0] ^ 1
					} else {
						v = WrapInt(^xs[0], t)
					}
				case UnAbs:
					v = xs[0]
					if v < 0 && !t.IsUnsigned() {
						v = WrapInt(-v, t)
					}
				default:
					return grid, block, 0, fmt.Errorf("launch instruction %d: unsupported unary op", i)
				}
			case "cast":
				if len(xs) != 1 {
					return grid, block, 0, fmt.Errorf("launch instruction %d: bad operands", i)
				}
				from := types.LookupBasic(c.Instrs[in.Args[0]].Type)
				if from == nil {
					return grid, block, 0, fmt.Errorf("launch instruction %d: bad cast", i)
				}
				v, _ = ConvertConst(xs[0], 0, from, t)
			}
		default:
			return grid, block, 0, fmt.Errorf("launch instruction %d: unknown op %q", i, in.Op)
		}
		vals[i] = v
	}
	get := func(k int) (int64, error) {
		if k < 0 || k >= len(vals) {
			return 0, fmt.Errorf("launch geometry refers to instruction %d of %d", k, len(vals))
		}
		return vals[k], nil
	}
	for d := 0; d < 3; d++ {
		if grid[d], err = get(c.Grid[d]); err != nil {
			return
		}
		if block[d], err = get(c.Block[d]); err != nil {
			return
		}
	}
	shared, err = get(c.Shared)
	return
}
