package graph

import "strings"

// Opsets 18 to 23 of ai.onnx and 4 to 5 of ai.onnx.ml, which the generated table (from ONNX
// 1.12) lacks, written from the ONNX changelog. A bump copies the newest earlier version of an
// operator and applies the listed changes; new operators are given in full.

type schemaBump struct {
	op          string
	since       int64
	addAttrs    map[string]AttrSpec
	removeAttrs []string
	inputs      []FormalParam // replaces the inputs when set
	outputs     []FormalParam // replaces the outputs when set
	deprecated  bool
}

func attrs(spec string) map[string]AttrSpec {
	// spec: "name:TYPE name:TYPE! ..." where ! marks a required attribute.
	m := map[string]AttrSpec{}
	for _, f := range strings.Fields(spec) {
		name, t, _ := strings.Cut(f, ":")
		req := strings.HasSuffix(t, "!")
		m[name] = AttrSpec{Type: attrTypeByName[strings.TrimSuffix(t, "!")], Required: req}
	}
	return m
}

func fparams(spec string) []FormalParam {
	// spec: "name:Type:opt ..." with opt s, o or v.
	var out []FormalParam
	for _, f := range strings.Fields(spec) {
		p := strings.SplitN(f, ":", 3)
		out = append(out, FormalParam{Name: p[0], TypeStr: p[1], Option: ParamOption(p[2][0])})
	}
	return out
}

var reduceOps = []string{"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
	"ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare"}

// typeOnlyBumps lists operators whose new versions only widened the allowed element types.
var typeOnlyBumps = map[int64][]string{
	18: {"ScatterElements", "ScatterND", "OptionalGetElement"},
	19: {"Constant", "Identity", "If", "Loop", "Scan", "Reshape", "Shape", "Size", "Equal", "Pad", "Resize", "DequantizeLinear"},
	20: {"ConstantOfShape", "GridSample", "IsInf", "IsNaN", "ReduceMax", "ReduceMin"},
	21: {"Cast", "CastLike", "Constant", "ConstantOfShape", "Flatten", "Identity", "If", "Loop", "Pad",
		"QLinearMatMul", "Reshape", "Scan", "Shape", "Size", "Squeeze", "Transpose", "Unsqueeze"},
	22: {"Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "AveragePool", "Bernoulli", "Conv", "ConvTranspose",
		"Cos", "Cosh", "DeformConv", "Det", "Dropout", "Elu", "EyeLike", "GRU", "GlobalAveragePool", "GlobalLpPool",
		"GlobalMaxPool", "HardSigmoid", "HardSwish", "InstanceNormalization", "LSTM", "LpNormalization", "LpPool",
		"MaxPool", "MaxRoiPool", "MaxUnpool", "Mish", "Multinomial", "NegativeLogLikelihoodLoss", "RNN",
		"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "RoiAlign", "Round", "Selu",
		"Sin", "Sinh", "Softplus", "Softsign", "Tan", "ThresholdedRelu"},
	23: {"Cast", "CastLike", "Constant", "ConstantOfShape", "Flatten", "Identity", "If", "Loop", "Pad",
		"Reshape", "Scan", "Shape", "Size", "Squeeze", "Transpose", "Unsqueeze"},
}

var schemaBumps = func() []schemaBump {
	b := []schemaBump{
		{op: "Pad", since: 18, inputs: fparams("data:T:s pads:tensor(int64):s constant_value:T:o axes:Tind:o")},
		{op: "Resize", since: 18, addAttrs: attrs("antialias:INT axes:INTS keep_aspect_ratio_policy:STRING")},
		{op: "Split", since: 18, addAttrs: attrs("num_outputs:INT")},
		{op: "LpPool", since: 18, addAttrs: attrs("ceil_mode:INT")},
		{op: "OptionalHasElement", since: 18, inputs: fparams("input:O:o")},
		{op: "AveragePool", since: 19, addAttrs: attrs("dilations:INTS")},
		{op: "Cast", since: 19, addAttrs: attrs("saturate:INT")},
		{op: "CastLike", since: 19, addAttrs: attrs("saturate:INT")},
		{op: "QuantizeLinear", since: 19, addAttrs: attrs("saturate:INT")},
		{op: "DFT", since: 20, removeAttrs: []string{"axis"}, inputs: fparams("input:T1:s dft_length:T2:o axis:tensor(int64):o")},
		{op: "DequantizeLinear", since: 21, addAttrs: attrs("block_size:INT")},
		{op: "QuantizeLinear", since: 21, addAttrs: attrs("block_size:INT output_dtype:INT")},
		{op: "DequantizeLinear", since: 23, addAttrs: attrs("output_dtype:INT")},
		{op: "QuantizeLinear", since: 23, addAttrs: attrs("precision:INT")},
	}
	for _, op := range reduceOps {
		b = append(b, schemaBump{op: op, since: 18, removeAttrs: []string{"axes"},
			addAttrs: attrs("noop_with_empty_axes:INT"),
			inputs:   fparams("data:T:s axes:tensor(int64):o")})
	}
	for v, ops := range typeOnlyBumps {
		for _, op := range ops {
			b = append(b, schemaBump{op: op, since: v})
		}
	}
	return b
}()

// newSchemas are the operators introduced after opset 17 (ai.onnx) and 3 (ai.onnx.ml).
var newSchemas = []*OpSchema{
	newOp("", "BitwiseAnd", 18, "A:T:s B:T:s", "C:T:s", ""),
	newOp("", "BitwiseOr", 18, "A:T:s B:T:s", "C:T:s", ""),
	newOp("", "BitwiseXor", 18, "A:T:s B:T:s", "C:T:s", ""),
	newOp("", "BitwiseNot", 18, "X:T:s", "Y:T:s", ""),
	newOp("", "CenterCropPad", 18, "input_data:T:s shape:Tind:s", "output_data:T:s", "axes:INTS"),
	newOp("", "Col2Im", 18, "input:T:s image_shape:tensor(int64):s block_shape:tensor(int64):s", "output:T:s", "dilations:INTS pads:INTS strides:INTS"),
	newOp("", "GroupNormalization", 18, "X:T:s scale:T:s bias:T:s", "Y:T:s", "epsilon:FLOAT num_groups:INT!"),
	newOp("", "GroupNormalization", 21, "X:T:s scale:T:s bias:T:s", "Y:T:s", "epsilon:FLOAT num_groups:INT! stash_type:INT"),
	newOp("", "Mish", 18, "X:T:s", "Y:T:s", ""),
	newOp("", "DeformConv", 19, "X:T:s W:T:s offset:T:s B:T:o mask:T:o", "Y:T:s", "dilations:INTS group:INT kernel_shape:INTS offset_group:INT pads:INTS strides:INTS"),
	newOp("", "AffineGrid", 20, "theta:T1:s size:T2:s", "grid:T1:s", "align_corners:INT"),
	newOp("", "Gelu", 20, "X:T:s", "Y:T:s", "approximate:STRING"),
	newOp("", "ImageDecoder", 20, "encoded_stream:T1:s", "image:T2:s", "pixel_format:STRING"),
	newOp("", "RegexFullMatch", 20, "X:T1:s", "Y:T2:s", "pattern:STRING"),
	newOp("", "StringConcat", 20, "X:T:s Y:T:s", "Z:T:s", ""),
	newOp("", "StringSplit", 20, "X:T1:s", "Y:T2:s Z:T3:s", "delimiter:STRING maxsplit:INT"),
	newOp("", "Attention", 23, "Q:T1:s K:T1:s V:T2:s attn_mask:U:o past_key:T1:o past_value:T2:o",
		"Y:T1:s present_key:T1:o present_value:T2:o qk_matmul_output:T1:o",
		"is_causal:INT kv_num_heads:INT q_num_heads:INT qk_matmul_output_mode:INT scale:FLOAT softcap:FLOAT softmax_precision:INT"),
	newOp("", "RMSNormalization", 23, "X:T:s scale:V:s", "Y:V:s", "axis:INT epsilon:FLOAT stash_type:INT"),
	newOp("", "RotaryEmbedding", 23, "X:T:s cos_cache:T:s sin_cache:T:s position_ids:M:o", "Y:T:s", "interleaved:INT num_heads:INT rotary_embedding_dim:INT"),
	newOp("ai.onnx.ml", "TreeEnsemble", 5, "X:T:s", "Y:T:s",
		"aggregate_function:INT leaf_targetids:INTS! leaf_weights:TENSOR! membership_values:TENSOR n_targets:INT "+
			"nodes_falseleafs:INTS! nodes_falsenodeids:INTS! nodes_featureids:INTS! nodes_modes:TENSOR! nodes_splits:TENSOR! "+
			"nodes_trueleafs:INTS! nodes_truenodeids:INTS! post_transform:INT tree_roots:INTS!"),
}

func newOp(domain, op string, since int64, in, out, attrSpec string) *OpSchema {
	s := &OpSchema{Domain: domain, Op: op, Since: since, Inputs: fparams(in), Outputs: fparams(out), Attrs: attrs(attrSpec)}
	s.MinInputs, s.MaxInputs = arity(s.Inputs)
	s.MinOutputs, s.MaxOutputs = arity(s.Outputs)
	return s
}

func arity(ps []FormalParam) (min, max int) {
	for i, p := range ps {
		switch p.Option {
		case ParamSingle:
			min = i + 1
			max = i + 1
		case ParamOptional:
			max = i + 1
		case ParamVariadic, ParamHeterogeneous:
			min = i + 1
			max = 1 << 30
		}
	}
	return min, max
}

// newerTypes are the element types later opsets added to existing type constraints.
var newerTypes = []string{"tensor(bfloat16)", "tensor(float8e4m3fn)", "tensor(float8e4m3fnuz)",
	"tensor(float8e5m2)", "tensor(float8e5m2fnuz)", "tensor(uint4)", "tensor(int4)", "tensor(float4e2m1)"}

func addRecentSchemas(table map[schemaKey][]*OpSchema) {
	// Apply bumps in opset order so that a later bump copies an earlier one.
	for v := int64(18); v <= 23; v++ {
		for _, b := range schemaBumps {
			if b.since != v {
				continue
			}
			vs := table[schemaKey{"", b.op}]
			if len(vs) == 0 {
				continue
			}
			prev := vs[len(vs)-1]
			for _, s := range vs {
				if s.Since < v && s.Since > prev.Since {
					prev = s
				}
			}
			if prev.Since == v {
				// Two bumps at the same version (one with changes): merge into it.
				applyBump(prev, b)
				continue
			}
			s := *prev
			s.Since = v
			s.Attrs = map[string]AttrSpec{}
			for k, a := range prev.Attrs {
				s.Attrs[k] = a
			}
			s.TypeConstraints = map[string][]string{}
			for k, ts := range prev.TypeConstraints {
				s.TypeConstraints[k] = widenTypes(ts)
			}
			applyBump(&s, b)
			table[schemaKey{"", b.op}] = append(table[schemaKey{"", b.op}], &s)
			sortSchemas(table[schemaKey{"", b.op}])
		}
	}
	for _, s := range newSchemas {
		k := schemaKey{s.Domain, s.Op}
		table[k] = append(table[k], s)
	}
	// ai.onnx.ml 4: LabelEncoder takes its keys and values as tensors.
	if vs := table[schemaKey{"ai.onnx.ml", "LabelEncoder"}]; len(vs) > 0 {
		s := *vs[len(vs)-1]
		s.Since = 4
		s.Attrs = map[string]AttrSpec{}
		for k, a := range vs[len(vs)-1].Attrs {
			s.Attrs[k] = a
		}
		for k, a := range attrs("default_tensor:TENSOR keys_tensor:TENSOR values_tensor:TENSOR") {
			s.Attrs[k] = a
		}
		s.TypeConstraints = nil
		table[schemaKey{"ai.onnx.ml", "LabelEncoder"}] = append(vs, &s)
	}
}

func applyBump(s *OpSchema, b schemaBump) {
	for _, r := range b.removeAttrs {
		delete(s.Attrs, r)
	}
	for k, a := range b.addAttrs {
		s.Attrs[k] = a
	}
	if b.inputs != nil {
		s.Inputs = b.inputs
		s.MinInputs, s.MaxInputs = arity(s.Inputs)
		for _, p := range s.Inputs {
			if _, ok := s.TypeConstraints[p.TypeStr]; !ok && !strings.Contains(p.TypeStr, "(") {
				s.TypeConstraints[p.TypeStr] = nil // new type parameter: not checked
			}
		}
	}
	if b.outputs != nil {
		s.Outputs = b.outputs
		s.MinOutputs, s.MaxOutputs = arity(s.Outputs)
	}
	s.Deprecated = b.deprecated
}

func widenTypes(ts []string) []string {
	out := append([]string{}, ts...)
	have := map[string]bool{}
	for _, t := range ts {
		have[t] = true
	}
	for _, t := range newerTypes {
		if !have[t] {
			out = append(out, t)
		}
	}
	return out
}

func sortSchemas(vs []*OpSchema) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j].Since < vs[j-1].Since; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}
