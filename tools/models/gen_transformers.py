#!/usr/bin/env python3
"""gen_transformers.py: transformer benchmark models with random weights, in the form torch.onnx.export
(opset 17, TorchScript exporter) gives Hugging Face GPT-2 and BERT: the same ops, names and decompositions
(LayerNormalization, tanh-GELU and erf-GELU spelled out, Constant nodes for scalars), so that Loom's graph
optimizer and kernels see what a user's exported model holds. Only onnx and numpy are needed.

  gen_transformers.py {gpt2,decoder,bert} OUT.onnx [--layers N] [--d N] [--heads N] [--vocab N] [--ffn N]
                      [--max-pos N] [--seed S] [--inputs DIR [--past N] [--seq N] [--masked N] [--input-seed S]]

  gpt2     GPT-2 small decode step (12 layers, d 768, 12 heads, vocab 50257): one new token after a KV cache
           of symbolic length past_len. Inputs input_ids, position_ids [1,1] int64 and past_key_i /
           past_value_i [1,heads,past_len,head_dim]; outputs logits [1,1,vocab] and present_key_i /
           present_value_i [1,heads,past_len+1,head_dim].
  decoder  the same decode step at 6 layers, d 512, 8 heads, vocab 8192.
  bert     BERT-base encoder (12 layers, d 768, 12 heads, FFN 3072, vocab 30522): input_ids and
           attention_mask [1,seq] int64; output last_hidden_state [1,seq,d].

--ffn defaults to 4 * d. Weights are normal * 0.02 (LayerNorm: gamma 1 + noise, beta small noise) from --seed.
OUT.onnx "-" writes no model. --inputs DIR writes sample inputs as DIR/NAME.npy: for gpt2/decoder a random
token at position --past (default 7) after a random [-1,1) cache of that length; for bert --seq (default 12)
random tokens whose attention_mask is 0 over the last --masked (default 0) positions.
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8

PRESETS = {
    "gpt2": dict(layers=12, d=768, heads=12, vocab=50257, max_pos=1024),
    "decoder": dict(layers=6, d=512, heads=8, vocab=8192, max_pos=1024),
    "bert": dict(layers=12, d=768, heads=12, vocab=30522, max_pos=512),
}


class Graph:
    """Collects nodes, initializers and Constant nodes, naming them as the TorchScript exporter does:
    node /scope/Op_k, its output /scope/Op_k_output_0."""

    def __init__(self, seed):
        self.nodes, self.inits = [], []
        self.counts = {}
        self.rng = np.random.default_rng(seed)

    def _name(self, scope, op):
        key = (scope, op)
        k = self.counts.get(key, 0)
        self.counts[key] = k + 1
        return f"{scope}/{op}" + (f"_{k}" if k else "")

    def op(self, scope, op, inputs, n_out=1, out=None, **attrs):
        """Adds a node; out names its (single) output, as the exporter names a graph output."""
        name = self._name(scope, op)
        outs = [out] if out else [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, scope, value):
        return self.op(scope, "Constant", [], value=numpy_helper.from_array(np.asarray(value)))

    def f32(self, scope, v):
        return self.const(scope, np.array(v, dtype=np.float32))

    def i64(self, scope, v):
        return self.const(scope, np.array(v, dtype=np.int64))

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(self, name, shape):
        return self.init(name, (self.rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32))

    def layer_norm(self, scope, x, d, eps, out=None):
        g = self.init(f"{scope_to_param(scope)}.weight",
                      (1 + 0.05 * self.rng.standard_normal(d, dtype=np.float32)).astype(np.float32))
        b = self.init(f"{scope_to_param(scope)}.bias", (0.02 * self.rng.standard_normal(d, dtype=np.float32)).astype(np.float32))
        return self.op(scope, "LayerNormalization", [x, g, b], out=out, axis=-1, epsilon=eps)

    def linear(self, scope, x, n_in, n_out, w_name=None):
        """x @ W + b as torch exports nn.Linear / HF Conv1D on a 3-D input: MatMul with a [in,out]
        initializer, then Add of the bias."""
        p = scope_to_param(scope)
        w = self.weight(w_name or f"onnx::MatMul_{p}.weight", (n_in, n_out))
        b = self.init(f"{p}.bias", (0.02 * self.rng.standard_normal(n_out, dtype=np.float32)).astype(np.float32))
        y = self.op(scope, "MatMul", [x, w])
        return self.op(scope, "Add", [b, y])


def scope_to_param(scope):
    return scope.strip("/").replace("/", ".")


def gpt2(a):
    """HF GPT2LMHeadModel, one decode step with the KV cache (use_cache=True)."""
    L, d, H, V, F = a.layers, a.d, a.heads, a.vocab, a.ffn
    hd = d // H
    g = Graph(a.seed)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, 1])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, V])]
    wte_np = (g.rng.standard_normal((V, d), dtype=np.float32) * 0.02).astype(np.float32)
    wte = g.init("transformer.wte.weight", wte_np)
    wpe = g.weight("transformer.wpe.weight", (a.max_pos, d))
    tok = g.op("/transformer/wte", "Gather", [wte, "input_ids"])
    pos = g.op("/transformer/wpe", "Gather", [wpe, "position_ids"])
    h = g.op("/transformer", "Add", [tok, pos])
    for i in range(L):
        s = f"/transformer/h.{i}"
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_{kv}_{i}", TensorProto.FLOAT, [1, H, "past_len", hd]))
            outputs.append(helper.make_tensor_value_info(f"present_{kv}_{i}", TensorProto.FLOAT, [1, H, "past_len+1", hd]))
        x = g.layer_norm(f"{s}/ln_1", h, d, 1e-5)
        at = f"{s}/attn"
        qkv = g.linear(f"{at}/c_attn", x, d, 3 * d)
        q, k, v = g.op(at, "Split", [qkv, g.i64(at, [d, d, d])], n_out=3, axis=2)
        heads_shape = g.i64(at, [1, -1, H, hd])
        q = g.op(at, "Transpose", [g.op(at, "Reshape", [q, heads_shape])], perm=[0, 2, 1, 3])
        k = g.op(at, "Transpose", [g.op(at, "Reshape", [k, heads_shape])], perm=[0, 2, 1, 3])
        v = g.op(at, "Transpose", [g.op(at, "Reshape", [v, heads_shape])], perm=[0, 2, 1, 3])
        k = g.op(at, "Concat", [f"past_key_{i}", k], out=f"present_key_{i}", axis=-2)
        v = g.op(at, "Concat", [f"past_value_{i}", v], out=f"present_value_{i}", axis=-2)
        kt = g.op(at, "Transpose", [k], perm=[0, 1, 3, 2])
        w = g.op(at, "MatMul", [q, kt])
        w = g.op(at, "Div", [w, g.f32(at, math.sqrt(hd))])
        w = g.op(at, "Softmax", [w], axis=-1)
        o = g.op(at, "MatMul", [w, v])
        o = g.op(at, "Transpose", [o], perm=[0, 2, 1, 3])
        o = g.op(at, "Reshape", [o, g.i64(at, [1, -1, d])])
        o = g.linear(f"{at}/c_proj", o, d, d)
        h = g.op(s, "Add", [o, h])
        x = g.layer_norm(f"{s}/ln_2", h, d, 1e-5)
        m = f"{s}/mlp"
        x = g.linear(f"{m}/c_fc", x, d, F)
        # NewGELUActivation: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), as exported.
        act = f"{m}/act"
        half = g.op(act, "Mul", [g.f32(act, 0.5), x])
        cube = g.op(act, "Pow", [x, g.f32(act, 3.0)])
        t = g.op(act, "Mul", [g.f32(act, 0.044715), cube])
        t = g.op(act, "Add", [x, t])
        t = g.op(act, "Mul", [g.f32(act, math.sqrt(2.0 / math.pi)), t])
        t = g.op(act, "Tanh", [t])
        t = g.op(act, "Add", [g.f32(act, 1.0), t])
        x = g.op(act, "Mul", [half, t])
        x = g.linear(f"{m}/c_proj", x, F, d)
        h = g.op(s, "Add", [h, x])
    h = g.layer_norm("/transformer/ln_f", h, d, 1e-5)
    lm = g.init("onnx::MatMul_lm_head.weight", np.ascontiguousarray(wte_np.T))
    g.op("/lm_head", "MatMul", [h, lm], out="logits")
    return g, inputs, outputs


def bert(a):
    """HF BertModel (last_hidden_state), eager attention, as exported with dynamic seq."""
    L, d, H, V, F = a.layers, a.d, a.heads, a.vocab, a.ffn
    hd = d // H
    g = Graph(a.seed)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "seq"])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, "seq", d])]

    # Extended attention mask: (1 - mask[:, None, None, :].float()) * finfo(float32).min.
    s = ""
    m = g.op(s, "Unsqueeze", ["attention_mask", g.i64(s, [1])])
    m = g.op(s, "Unsqueeze", [m, g.i64(s, [2])])
    m = g.op(s, "Cast", [m], to=TensorProto.FLOAT)
    m = g.op(s, "Sub", [g.f32(s, 1.0), m])
    mask = g.op(s, "Mul", [m, g.f32(s, np.finfo(np.float32).min)])

    e = "/embeddings"
    word = g.weight("embeddings.word_embeddings.weight", (V, d))
    posw = g.weight("embeddings.position_embeddings.weight", (a.max_pos, d))
    typew = g.weight("embeddings.token_type_embeddings.weight", (2, d))
    # position_ids = self.position_ids[:, 0:seq], a registered buffer sliced by the input's length.
    pos_buf = g.init("embeddings.position_ids", np.arange(a.max_pos, dtype=np.int64)[None, :])
    seq = g.op(e, "Gather", [g.op(e, "Shape", ["input_ids"]), g.i64(e, 1)], axis=0)
    seq = g.op(e, "Unsqueeze", [seq, g.i64(e, [0])])
    pos_ids = g.op(e, "Slice", [pos_buf, g.i64(e, [0]), seq, g.i64(e, [1]), g.i64(e, [1])])
    x = g.op(f"{e}/word_embeddings", "Gather", [word, "input_ids"])
    t = g.op(f"{e}/token_type_embeddings", "Gather", [typew, g.i64(e, 0)], axis=0)  # token type 0 everywhere
    x = g.op(e, "Add", [x, t])
    x = g.op(e, "Add", [x, g.op(f"{e}/position_embeddings", "Gather", [posw, pos_ids])])
    h = g.layer_norm(f"{e}/LayerNorm", x, d, 1e-12)

    for i in range(L):
        s = f"/encoder/layer.{i}"
        at = f"{s}/attention/self"
        heads_shape = g.i64(at, [1, -1, H, hd])
        q = g.linear(f"{at}/query", h, d, d)
        k = g.linear(f"{at}/key", h, d, d)
        v = g.linear(f"{at}/value", h, d, d)
        q = g.op(at, "Transpose", [g.op(at, "Reshape", [q, heads_shape])], perm=[0, 2, 1, 3])
        kt = g.op(at, "Transpose", [g.op(at, "Reshape", [k, heads_shape])], perm=[0, 2, 3, 1])
        v = g.op(at, "Transpose", [g.op(at, "Reshape", [v, heads_shape])], perm=[0, 2, 1, 3])
        sc = g.op(at, "MatMul", [q, kt])
        sc = g.op(at, "Div", [sc, g.f32(at, math.sqrt(hd))])
        sc = g.op(at, "Add", [sc, mask])
        p = g.op(at, "Softmax", [sc], axis=-1)
        o = g.op(at, "MatMul", [p, v])
        o = g.op(at, "Transpose", [o], perm=[0, 2, 1, 3])
        o = g.op(at, "Reshape", [o, g.i64(at, [1, -1, d])])
        ao = f"{s}/attention/output"
        o = g.linear(f"{ao}/dense", o, d, d)
        h = g.layer_norm(f"{ao}/LayerNorm", g.op(ao, "Add", [o, h]), d, 1e-12)
        it = f"{s}/intermediate"
        x = g.linear(f"{it}/dense", h, d, F)
        # GELUActivation (erf): x * 0.5 * (1 + erf(x / sqrt(2))), as exported.
        act = f"{it}/intermediate_act_fn"
        y = g.op(act, "Div", [x, g.f32(act, math.sqrt(2.0))])
        y = g.op(act, "Erf", [y])
        y = g.op(act, "Add", [y, g.f32(act, 1.0)])
        y = g.op(act, "Mul", [x, y])
        x = g.op(act, "Mul", [y, g.f32(act, 0.5)])
        ou = f"{s}/output"
        x = g.linear(f"{ou}/dense", x, F, d)
        h = g.layer_norm(f"{ou}/LayerNorm", g.op(ou, "Add", [x, h]), d, 1e-12,
                         out="last_hidden_state" if i == L - 1 else None)
    return g, inputs, outputs


def write_inputs(kind, a):
    rng = np.random.default_rng(a.input_seed)
    os.makedirs(a.inputs, exist_ok=True)
    arrays = {}
    if kind == "bert":
        arrays["input_ids"] = rng.integers(0, a.vocab, (1, a.seq), dtype=np.int64)
        mask = np.ones((1, a.seq), np.int64)
        if a.masked:
            mask[:, a.seq - a.masked:] = 0
        arrays["attention_mask"] = mask
    else:
        hd = a.d // a.heads
        arrays["input_ids"] = rng.integers(0, a.vocab, (1, 1), dtype=np.int64)
        arrays["position_ids"] = np.array([[a.past]], np.int64)
        for i in range(a.layers):
            for kv in ("key", "value"):
                arrays[f"past_{kv}_{i}"] = rng.uniform(-1, 1, (1, a.heads, a.past, hd)).astype(np.float32)
    for name, arr in arrays.items():
        np.save(os.path.join(a.inputs, name + ".npy"), arr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=sorted(PRESETS))
    p.add_argument("out", help='model file to write ("-": none)')
    for f in ("layers", "d", "heads", "vocab", "ffn", "max_pos"):
        p.add_argument("--" + f.replace("_", "-"), type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inputs", help="directory to write sample inputs to, as NAME.npy")
    p.add_argument("--past", type=int, default=7, help="gpt2/decoder inputs: KV cache length")
    p.add_argument("--seq", type=int, default=12, help="bert inputs: tokens")
    p.add_argument("--masked", type=int, default=0, help="bert inputs: trailing positions masked out")
    p.add_argument("--input-seed", type=int, default=1)
    a = p.parse_args()
    for f, v in PRESETS[a.kind].items():
        if getattr(a, f) is None:
            setattr(a, f, v)
    if a.ffn is None:
        a.ffn = 4 * a.d
    if a.d % a.heads:
        p.error(f"--d {a.d} is not a multiple of --heads {a.heads}")
    if a.kind != "bert" and a.past + 1 > a.max_pos:
        p.error(f"--past {a.past} needs --max-pos above it")
    if a.kind == "bert" and not (0 <= a.masked < a.seq <= a.max_pos):
        p.error("bert inputs need 0 <= --masked < --seq <= --max-pos")

    if a.out != "-":
        g, inputs, outputs = (bert if a.kind == "bert" else gpt2)(a)
        graph = helper.make_graph(g.nodes, f"{a.kind}_{a.layers}x{a.d}", inputs, outputs, g.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="pytorch", producer_version="2.5.0")
        model.ir_version = IR_VERSION
        model.doc_string = (f"tools/models/gen_transformers.py {a.kind} --layers {a.layers} --d {a.d} --heads {a.heads} "
                            f"--vocab {a.vocab} --ffn {a.ffn} --max-pos {a.max_pos} --seed {a.seed}")
        onnx.checker.check_model(model)
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        onnx.save(model, a.out)
        params = sum(int(np.prod(t.dims)) for t in g.inits)
        print(f"wrote {a.out}: {len(g.nodes)} nodes, {params / 1e6:.2f}M parameters", file=sys.stderr)
    if a.inputs:
        write_inputs(a.kind, a)


if __name__ == "__main__":
    main()
