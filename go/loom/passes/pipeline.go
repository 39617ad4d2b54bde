package passes

import "github.com/loomrt/loom/go/loom/ir"

// Dump receives the IR after each stage of the pipeline (for --emit ir and debugging).
type Dump func(stage string, f *ir.Func)

// Optimize runs the device pipeline: specialize, fold, unroll, fold, scalarize (register
// blocking), fold, bounds-check elimination, fold.
func Optimize(f *ir.Func, dump Dump) (BCEStats, error) {
	step := func(stage string) {
		syncGeometry(f)
		if dump != nil {
			dump(stage, f)
		}
	}
	step("build")
	Specialize(f.Body)
	step("specialize")
	Fold(f.Body)
	step("fold")
	if err := Unroll(f); err != nil {
		return BCEStats{}, err
	}
	Fold(f.Body)
	step("unroll")
	Scalarize(f)
	Fold(f.Body)
	step("scalarize")
	st := EliminateBoundsChecks(f)
	Fold(f.Body)
	step("bce")
	return st, nil
}

// OptimizeLaunch specializes and folds a launch program.
func OptimizeLaunch(l *ir.Launch) {
	Specialize(l.Body)
	Fold(l.Body)
	for _, op := range l.Body.Ops {
		if op.Code == ir.OpGeometry {
			copy(l.GridDim[:], op.Args[0:3])
			copy(l.BlockDim[:], op.Args[3:6])
			l.Shared = op.Args[6]
		}
	}
}

// syncGeometry points the function's geometry values at the launch check's (folding may have
// replaced them).
func syncGeometry(f *ir.Func) {
	ir.Walk(f.Body, func(op *ir.Op) {
		if op.Code == ir.OpLaunchCheck {
			copy(f.GridDim[:], op.Args[0:3])
			copy(f.BlockDim[:], op.Args[3:6])
			f.Shared = op.Args[6]
		}
	})
}
