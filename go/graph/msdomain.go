package graph

// MSDomain is the operator domain of ONNX Runtime's contrib operators ("com.microsoft"): the
// ops its transformer tools and GenAI exports emit (SkipLayerNormalization,
// GroupQueryAttention, MatMulNBits, ...). Loom has no schema table for it (KnownDomain is
// false): Check accepts its nodes, go/graph/infer holds the shape rules of those Loom runs,
// and the session registers them under "com.microsoft:<op>".
const MSDomain = "com.microsoft"

// ortONNXDomainOps are the operators ONNX Runtime defines in the ai.onnx domain although ONNX
// has none of that name (its exports emit them with domain ""): Check accepts them at any
// opset, like an operator of a domain without a schema table.
var ortONNXDomainOps = map[string]bool{"SimplifiedLayerNormalization": true}
