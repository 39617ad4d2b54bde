#!/usr/bin/env python3
"""Small models of ONNX Runtime's transformer contrib ops (com.microsoft SkipLayerNormalization,
SkipSimplifiedLayerNormalization, FastGelu, BiasGelu, RotaryEmbedding, MultiHeadAttention,
GroupQueryAttention; SimplifiedLayerNormalization, which ONNX Runtime defines in the ai.onnx
domain) and a model calling model-local functions, with ONNX Runtime's outputs on random
inputs, for go/session's TestMSOpsAgainstORT (issue 16).

Made with onnx 1.22.0, onnxruntime 1.30.0 and numpy (pip install onnx==1.22.0
onnxruntime==1.30.0 numpy); the script refuses other versions of onnx and onnxruntime:

    python3 tools/onnx/msops_models.py go/session/testdata/msops

Each case is a directory holding model.onnx, one NAME.npy per model input and ref/NAME.npy per
output (ONNX Runtime's CPU provider). The inputs are drawn from a generator seeded per case,
so a rerun writes the same files.
"""
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
ONNX_VERSION, ORT_VERSION = "1.22.0", "1.30.0"

NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32}


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def save(root, name, node_or_nodes, inputs, outputs, inits=None, functions=None, skip_refs=(), opsets=None):
    """Writes case name: a model of the nodes over inputs (dict name -> array) and initializers
    (dict), with outputs (names), and ONNX Runtime's outputs as references (except skip_refs)."""
    nodes = node_or_nodes if isinstance(node_or_nodes, list) else [node_or_nodes]
    vis = [helper.make_tensor_value_info(k, NP2ONNX[v.dtype], list(v.shape)) for k, v in inputs.items()]
    inits = inits or {}
    init_protos = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    g = helper.make_graph(nodes, name, vis, outs, initializer=init_protos)
    ops = opsets or [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]
    m = helper.make_model(g, opset_imports=ops, ir_version=10, producer_name="tools/onnx/msops_models.py",
                          functions=functions or [])
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    res = s.run(None, inputs)
    d = os.path.join(root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "ref"))
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, v in inputs.items():
        np.save(os.path.join(d, k + ".npy"), v)
    for o, v in zip(outputs, res):
        if o not in skip_refs:
            np.save(os.path.join(d, "ref", o + ".npy"), np.ascontiguousarray(v.astype(np.float32)))
    print(name, {o: v.shape for o, v in zip(outputs, res)})


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def cases(root):
    # --- normalizations -------------------------------------------------------------------
    n = "skip_layer_norm"
    r = rng_for(n)
    save(root, n, helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y", "mean", "inv_std_var", "sum"], domain=MS, epsilon=1e-5),
         dict(x=f32(r, 2, 5, 16), skip=f32(r, 2, 5, 16), gamma=f32(r, 16), beta=f32(r, 16), bias=f32(r, 16)), ["y", "mean", "inv_std_var", "sum"])
    n = "skip_layer_norm_broadcast_skip"
    r = rng_for(n)
    save(root, n, helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma"], ["y", "", "", "sum"], domain=MS),
         dict(x=f32(r, 2, 5, 16), skip=f32(r, 5, 16), gamma=f32(r, 16)), ["y", "sum"])
    n = "skip_layer_norm_2d"
    r = rng_for(n)
    save(root, n, helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta"], ["y"], domain=MS, epsilon=1e-6),
         dict(x=f32(r, 7, 24), skip=f32(r, 7, 24), gamma=f32(r, 24), beta=f32(r, 24)), ["y"])
    n = "skip_simplified_layer_norm"
    r = rng_for(n)
    save(root, n, helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"], ["y", "", "inv_std_var", "sum"], domain=MS, epsilon=1e-6),
         dict(x=f32(r, 2, 5, 16), skip=f32(r, 2, 5, 16), gamma=f32(r, 16), bias=f32(r, 16)), ["y", "inv_std_var", "sum"])
    n = "simplified_layer_norm"
    r = rng_for(n)
    save(root, n, helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y", "inv_std_var"], epsilon=1e-6, axis=-1),
         dict(x=f32(r, 2, 5, 16), scale=f32(r, 16)), ["y", "inv_std_var"])
    # --- GELUs ------------------------------------------------------------------------------
    n = "fast_gelu"
    r = rng_for(n)
    save(root, n, helper.make_node("FastGelu", ["x", "bias"], ["y"], domain=MS), dict(x=f32(r, 2, 5, 16) * 2, bias=f32(r, 16)), ["y"])
    n = "fast_gelu_no_bias"
    r = rng_for(n)
    save(root, n, helper.make_node("FastGelu", ["x"], ["y"], domain=MS), dict(x=f32(r, 3, 33) * 3), ["y"])
    n = "bias_gelu"
    r = rng_for(n)
    save(root, n, helper.make_node("BiasGelu", ["x", "bias"], ["y"], domain=MS), dict(x=f32(r, 2, 5, 16) * 2, bias=f32(r, 16)), ["y"])
    # --- rotary -----------------------------------------------------------------------------
    def caches(r, positions, half):
        inv = 1.0 / (10000 ** (np.arange(half) / half))
        ang = np.arange(positions)[:, None] * inv[None, :]
        return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    for inter in (0, 1):
        n = f"rotary_3d_interleaved{inter}"
        r = rng_for(n)
        c, s = caches(r, 16, 4)
        pos = r.integers(0, 16, (2, 5)).astype(np.int64)
        save(root, n, helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, num_heads=4, interleaved=inter),
             dict(x=f32(r, 2, 5, 32), pos=pos, cos=c, sin=s), ["y"])
    n = "rotary_partial_offset"
    r = rng_for(n)
    c, s = caches(r, 16, 2)
    save(root, n, helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, num_heads=4, rotary_embedding_dim=4),
         dict(x=f32(r, 2, 5, 32), pos=np.array([3], np.int64), cos=c, sin=s), ["y"])
    n = "rotary_partial_interleaved"
    r = rng_for(n)
    c, s = caches(r, 16, 2)
    save(root, n, helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, num_heads=4, rotary_embedding_dim=4, interleaved=1),
         dict(x=f32(r, 2, 5, 32), pos=r.integers(0, 16, (2, 5)).astype(np.int64), cos=c, sin=s), ["y"])
    n = "rotary_4d"
    r = rng_for(n)
    c, s = caches(r, 16, 4)
    save(root, n, helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS),
         dict(x=f32(r, 2, 3, 5, 8), pos=r.integers(0, 16, (2, 5)).astype(np.int64), cos=c, sin=s), ["y"])
    # --- MultiHeadAttention -----------------------------------------------------------------
    n = "mha_cross_bias_masks"
    r = rng_for(n)
    kpm = np.ones((2, 6), np.int32)
    kpm[1, 4:] = 0
    save(root, n, helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias", "kpm", "attn_bias"], ["y"], domain=MS, num_heads=2),
         dict(q=f32(r, 2, 4, 16), k=f32(r, 2, 6, 16), v=f32(r, 2, 6, 16), bias=f32(r, 48), kpm=kpm, attn_bias=f32(r, 1, 2, 4, 6)), ["y"])
    n = "mha_past_causal"
    r = rng_for(n)
    save(root, n, helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "", "past_k", "past_v"], ["y", "present_k", "present_v"], domain=MS, num_heads=2, unidirectional=1, scale=0.3),
         dict(q=f32(r, 2, 3, 16), k=f32(r, 2, 3, 16), v=f32(r, 2, 3, 16), past_k=f32(r, 2, 2, 4, 8), past_v=f32(r, 2, 2, 4, 8)), ["y", "present_k", "present_v"])
    n = "mha_weight_bias_causal_attn_bias"
    r = rng_for(n)
    save(root, n, helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias", "", "attn_bias"], ["y"], domain=MS, num_heads=4, unidirectional=1),
         dict(q=f32(r, 2, 5, 32), k=f32(r, 2, 5, 32), v=f32(r, 2, 5, 32), attn_bias=f32(r, 2, 1, 5, 5)), ["y"], inits=dict(bias=f32(r, 96)))
    n = "mha_bnsh_kv"
    r = rng_for(n)
    save(root, n, helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=2),
         dict(q=f32(r, 2, 4, 16), k=f32(r, 2, 2, 6, 8), v=f32(r, 2, 2, 6, 8)), ["y"])
    # --- GroupQueryAttention ----------------------------------------------------------------
    def gqa(name, b, s, past, nh, kvh, hs, lens, total, packed=False, rotary=None, outs=("y", "present_k", "present_v"), skip_refs=(), **attrs):
        r = rng_for(name)
        ins = {}
        names = []
        if packed:
            ins["qkv"] = f32(r, b, s, (nh + 2 * kvh) * hs)
            names += ["qkv", "", ""]
        else:
            ins["q"], ins["k"], ins["v"] = f32(r, b, s, nh * hs), f32(r, b, s, kvh * hs), f32(r, b, s, kvh * hs)
            names += ["q", "k", "v"]
        if past is not None:
            ins["past_k"], ins["past_v"] = f32(r, b, kvh, past, hs), f32(r, b, kvh, past, hs)
            names += ["past_k", "past_v"]
        else:
            names += ["", ""]
        ins["seqlens_k"] = np.array(lens, np.int32)
        ins["total_seq"] = np.array(total, np.int32)
        names += ["seqlens_k", "total_seq"]
        if rotary is not None:
            c, sn = caches(r, 32, rotary // 2)
            ins["cos"], ins["sin"] = c, sn
            names += ["cos", "sin"]
            attrs["do_rotary"] = 1
        save(root, name, helper.make_node("GroupQueryAttention", names, list(outs), domain=MS, num_heads=nh, kv_num_heads=kvh, **attrs),
             ins, list(outs), skip_refs=skip_refs)
    # (ONNX Runtime's CPU GroupQueryAttention takes head sizes that are multiples of 16.)
    gqa("gqa_prompt_rotary", 2, 5, None, 4, 2, 16, [4, 4], 5, rotary=16)
    gqa("gqa_decode_past", 2, 1, 4, 4, 2, 16, [4, 4], 5, rotary=16)
    gqa("gqa_decode_two_tokens_interleaved", 1, 2, 3, 6, 2, 32, [4], 5, rotary=16, rotary_interleaved=1)
    gqa("gqa_packed_softcap_window", 1, 6, None, 4, 1, 16, [5], 6, packed=True, softcap=2.0, local_window_size=2, scale=0.5)
    gqa("gqa_smooth_softmax", 1, 3, 2, 2, 2, 16, [4], 5, smooth_softmax=1)
    # Ragged decode in a shared buffer: sequence 1 is shorter; the present tails past each
    # sequence's length are not compared.
    gqa("gqa_ragged_decode", 2, 1, 6, 4, 2, 16, [4, 2], 5, rotary=16, skip_refs=("present_k", "present_v"))
    # --- model-local functions --------------------------------------------------------------
    n = "function_scaled_add"
    r = rng_for(n)
    inner = helper.make_function("custom", "Shift", ["X"], ["Y"],
                                 [helper.make_node("Constant", [], ["one"], value_float=1.0), helper.make_node("Add", ["X", "one"], ["Y"])],
                                 [helper.make_opsetid("", 21)])
    leaky = helper.make_node("LeakyRelu", ["s"], ["Z"])
    leaky.attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    outer = helper.make_function("custom", "ScaledAdd", ["X", "Y"], ["Z", "T"],
                                 [helper.make_node("Mul", ["X", "Y"], ["T"]), helper.make_node("Shift", ["T"], ["t1"], domain="custom"),
                                  helper.make_node("Add", ["t1", "X"], ["s"]), leaky],
                                 [helper.make_opsetid("", 21), helper.make_opsetid("custom", 1)], attributes=[])
    outer.attribute_proto.append(helper.make_attribute("alpha", 0.5))
    save(root, n, [helper.make_node("ScaledAdd", ["x", "y"], ["z1", "u1"], domain="custom", alpha=0.25),
                   helper.make_node("ScaledAdd", ["z1", "x"], ["z2", "t2"], domain="custom")],
         dict(x=f32(r, 3, 4), y=f32(r, 3, 4)), ["z2", "t2"], functions=[outer, inner],
         opsets=[helper.make_opsetid("", 21), helper.make_opsetid("custom", 1)])


def main():
    if onnx.__version__ != ONNX_VERSION or ort.__version__ != ORT_VERSION:
        sys.exit(f"want onnx {ONNX_VERSION} and onnxruntime {ORT_VERSION}, have {onnx.__version__} and {ort.__version__}")
    if len(sys.argv) != 2:
        sys.exit("usage: msops_models.py OUTDIR")
    cases(sys.argv[1])


if __name__ == "__main__":
    main()
