// Package opt rewrites loaded ONNX graphs with result-preserving optimization passes, grouped
// in levels as ONNX Runtime does: basic (constant folding, dead code and common subexpression
// elimination, Identity/Dropout removal, Constant nodes to initializers), extended (fusions:
// MatMul+Add, GELU into the matrix product's epilogue, Conv with BatchNormalization or
// per-channel Mul and Add, Conv+activation and a scalar scale and shift after it,
// LayerNormalization, GELU, hard swish) and all (attention). Fused operators that ONNX lacks live in graph.LoomDomain.
package opt

import (
	"fmt"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
)

// Level selects how aggressive optimization is.
type Level int

// The optimization levels; each includes the ones before it.
const (
	LevelDisabled Level = iota
	LevelBasic
	LevelExtended
	LevelAll
)

// String names the level as ParseLevel accepts it.
func (l Level) String() string {
	switch l {
	case LevelDisabled:
		return "disabled"
	case LevelBasic:
		return "basic"
	case LevelExtended:
		return "extended"
	case LevelAll:
		return "all"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel reads "disabled", "basic", "extended" or "all".
func ParseLevel(s string) (Level, error) {
	for l := LevelDisabled; l <= LevelAll; l++ {
		if strings.EqualFold(s, l.String()) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown optimization level %q (want disabled, basic, extended or all)", s)
}

// Pass is one rewrite. Apply reports whether it changed the model; it may leave producer
// links and node order stale, which Optimize repairs with Model.Resolve.
type Pass struct {
	Name  string
	Level Level
	Apply func(m *graph.Model) (changed bool, err error)
}

// Passes lists every pass in the order Optimize runs them.
func Passes() []Pass {
	return []Pass{
		// A lowering, at every level: FlexAttention (ai.onnx.preview) to ai.onnx operators.
		{"flex_attention_expansion", LevelDisabled, ExpandFlexAttention},
		{"constant_to_initializer", LevelBasic, ConstantsToInitializers},
		{"identity_elimination", LevelBasic, EliminateIdentity},
		{"constant_folding", LevelBasic, FoldConstants},
		{"common_subexpression_elimination", LevelBasic, EliminateCommonSubexpressions},
		{"dead_code_elimination", LevelBasic, EliminateDeadCode},
		// Conv, then scales and shifts (BatchNormalization, or its Mul and Add) in any order:
		// each pass folds one step into the weights and bias.
		{"conv_add_fusion", LevelExtended, FuseConvAdd},
		{"conv_batchnorm_fusion", LevelExtended, FuseConvBatchNorm},
		{"conv_mul_fusion", LevelExtended, FuseConvMul},
		{"conv_add_fusion", LevelExtended, FuseConvAdd},
		{"layernorm_fusion", LevelExtended, FuseLayerNorm},
		{"gelu_fusion", LevelExtended, FuseGelu},
		{"hardswish_fusion", LevelExtended, FuseHardSwish},
		{"matmul_add_fusion", LevelExtended, FuseMatMulAdd},
		{"matmul_activation_fusion", LevelExtended, FuseMatMulActivation},
		{"conv_activation_fusion", LevelExtended, FuseConvActivation},
		{"conv_output_affine_fusion", LevelExtended, FuseConvOutputAffine},
		{"attention_fusion", LevelAll, FuseAttention},
		{"dead_code_elimination", LevelBasic, EliminateDeadCode},
	}
}

// Optimize infers shapes, runs every pass up to level in order, and records each pass with the
// node counts before and after in m.Passes. The model is re-resolved and re-inferred after
// each pass that changed it, so an error names the pass that broke an invariant.
//
// Models older than IR version 4 had to list every initializer as a graph input too; for
// them those inputs are dropped first, as they are constants, not inputs a caller may feed.
func Optimize(m *graph.Model, level Level) error {
	if level > LevelDisabled && m.IRVersion < 4 {
		kept := m.Graph.Inputs[:0]
		for _, in := range m.Graph.Inputs {
			if _, isInit := m.Graph.Initializers[in.Name]; !isInit {
				kept = append(kept, in)
			}
		}
		m.Graph.Inputs = kept
		if err := m.Resolve(); err != nil {
			return err
		}
	}
	if err := infer.Shapes(m); err != nil {
		return err
	}
	for _, p := range Passes() {
		if p.Level > level {
			continue
		}
		if err := Run(m, p); err != nil {
			return err
		}
	}
	return nil
}

// Run applies one pass and records it.
func Run(m *graph.Model, p Pass) error {
	before := m.Graph.NodeCount()
	changed, err := p.Apply(m)
	if err != nil {
		return fmt.Errorf("pass %s: %w", p.Name, err)
	}
	if changed {
		if err := m.Resolve(); err != nil {
			return fmt.Errorf("pass %s left the graph invalid: %w", p.Name, err)
		}
		if err := infer.Shapes(m); err != nil {
			return fmt.Errorf("pass %s left the graph invalid: %w", p.Name, err)
		}
	}
	m.Passes = append(m.Passes, graph.PassResult{Name: p.Name, NodesBefore: before, NodesAfter: m.Graph.NodeCount(), Changed: changed})
	return nil
}
