package graph

// OpTraits are the properties of an operator that the optimizer, the memory planner, the
// interpreter and the compiled run plans act on. They are written once, here, beside the
// operator schemas; every path asks Traits rather than keeping a table of its own.
type OpTraits struct {
	// Nondeterministic: a run may draw new values (the random generators; Dropout in training
	// mode), so the node is never folded, merged with another or frozen into a plan.
	Nondeterministic bool
	// View: the first output is the first input's elements in another shape, so it may alias the
	// input's memory (Reshape, Squeeze, Unsqueeze, Flatten, Identity).
	View bool
	// ControlFlow: the node runs subgraphs (If, Loop, Scan, SequenceMap).
	ControlFlow bool
	// InPlace: element-wise, so the output (of the first input's size) may overwrite an input
	// that dies at this node.
	InPlace bool
	// TakesValues: inputs may be sequences or optionals; every other operator computes on
	// tensors only.
	TakesValues bool
}

const (
	traitNondeterministic = 1 << iota
	traitView
	traitControlFlow
	traitInPlace
	traitTakesValues
)

// onnxTraits holds the ai.onnx operators' traits; loomTraits those of the ai.loom operators the
// optimizer writes (go/graph/loomops.go). Operators of other domains have none.
var (
	onnxTraits = map[string]uint8{
		"RandomNormal": traitNondeterministic, "RandomNormalLike": traitNondeterministic,
		"RandomUniform": traitNondeterministic, "RandomUniformLike": traitNondeterministic,
		"Multinomial": traitNondeterministic, "Bernoulli": traitNondeterministic,
		"Dropout": traitNondeterministic,

		"Reshape": traitView, "Squeeze": traitView, "Unsqueeze": traitView, "Flatten": traitView,
		"Identity": traitView | traitTakesValues,

		"If": traitControlFlow | traitTakesValues, "Loop": traitControlFlow | traitTakesValues,
		"Scan": traitControlFlow, "SequenceMap": traitControlFlow | traitTakesValues,

		"SequenceInsert": traitTakesValues, "SequenceAt": traitTakesValues, "SequenceErase": traitTakesValues,
		"SequenceLength": traitTakesValues, "ConcatFromSequence": traitTakesValues, "Optional": traitTakesValues,
		"OptionalHasElement": traitTakesValues, "OptionalGetElement": traitTakesValues,

		"Relu": traitInPlace, "Sigmoid": traitInPlace, "Tanh": traitInPlace, "Exp": traitInPlace,
		"Neg": traitInPlace, "Abs": traitInPlace, "Sqrt": traitInPlace, "Erf": traitInPlace,
		"Gelu": traitInPlace, "Clip": traitInPlace, "LeakyRelu": traitInPlace, "HardSigmoid": traitInPlace,
		"HardSwish": traitInPlace, "Add": traitInPlace, "Sub": traitInPlace, "Mul": traitInPlace,
		"Div": traitInPlace, "Reciprocal": traitInPlace, "Floor": traitInPlace, "Ceil": traitInPlace,
		"Elu": traitInPlace, "Softplus": traitInPlace, "Sign": traitInPlace, "Not": traitInPlace,
	}
	loomTraits = map[string]uint8{"Gelu": traitInPlace, "HardSwish": traitInPlace}
)

// Traits returns the traits of operator op of domain ("" and "ai.onnx" are the default domain).
func Traits(domain, op string) OpTraits {
	var bits uint8
	switch domain {
	case "", "ai.onnx":
		bits = onnxTraits[op]
	case LoomDomain:
		bits = loomTraits[op]
	}
	return OpTraits{
		Nondeterministic: bits&traitNondeterministic != 0,
		View:             bits&traitView != 0,
		ControlFlow:      bits&traitControlFlow != 0,
		InPlace:          bits&traitInPlace != 0,
		TakesValues:      bits&traitTakesValues != 0,
	}
}

// Traits returns the node's operator traits.
func (n *Node) Traits() OpTraits { return Traits(n.Domain, n.OpType) }
