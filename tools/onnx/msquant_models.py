#!/usr/bin/env python3
"""Small com.microsoft MatMulNBits / GatherBlockQuantized models and ONNX Runtime's outputs on
random inputs, for go/session's tests (issue 16).

Made with onnx 1.22.0, onnxruntime 1.30.0 and numpy (pip install onnx==1.22.0
onnxruntime==1.30.0 numpy):

    python3 tools/onnx/msquant_models.py go/session/testdata/msquant       # the committed cases
    python3 tools/onnx/msquant_models.py --big /tmp/gpt4bit                  # d 1024, 8 layers

Each case is a directory holding model.onnx, one NAME.npy per model input and ref/NAME.npy per
output (ONNX Runtime's CPU provider). The weights are random floats quantized here blockwise
along K (asymmetric, 4 or 8 bits, scales per block, zero points packed as ONNX Runtime reads
them), so the models are what ONNX Runtime's quantizer writes, node for node.
"""
import argparse
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"


def quantize_blockwise(w, bits, block, rng, zero_points=True):
    """w [K, N] float -> (B uint8 [N, kb, blob], scales f32 [N*kb], zp packed uint8 or None)."""
    k, n = w.shape
    kb = (k + block - 1) // block
    qmax = (1 << bits) - 1
    pad = np.zeros((kb * block, n), np.float32)
    pad[:k] = w
    blocks = pad.T.reshape(n, kb, block)
    q = np.zeros((n, kb, block), np.int64)
    if zero_points:
        lo = np.minimum(blocks.min(axis=2), 0)
        hi = np.maximum(blocks.max(axis=2), 0)
        scale = np.maximum((hi - lo) / qmax, 1e-6).astype(np.float32)
        zp = np.clip(np.round(-lo / scale), 0, qmax).astype(np.int64)
    else:
        amax = np.abs(blocks).max(axis=2)
        mid = 1 << (bits - 1)
        scale = np.maximum(amax / (mid - 1 if mid > 1 else 1), 1e-6).astype(np.float32)
        zp = np.full((n, kb), mid, np.int64)
    q = np.clip(np.round(blocks / scale[:, :, None]) + zp[:, :, None], 0, qmax).astype(np.uint8)
    # The padding of the last block quantizes to the zero point (dequantizes to 0).
    q[:, :, :][:, -1, (k - (kb - 1) * block):] = zp[:, -1:].astype(np.uint8)
    if bits == 4:
        b = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    else:
        b = q
    zpk = None
    if zero_points:
        if bits == 4:
            zz = np.full((n, kb + (kb & 1)), 0, np.uint8)
            zz[:, :kb] = zp
            zpk = (zz[:, 0::2] | (zz[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
        else:
            zpk = zp.astype(np.uint8).reshape(-1)
    return b, scale.reshape(-1), zpk


def matmul_nbits(name, a, w, bits, block, rng, zero_points=True, bias=None, inits=None, out=None):
    """A MatMulNBits node computing a @ w (+ bias), its initializers appended to inits."""
    k, n = w.shape
    b, s, zp = quantize_blockwise(w, bits, block, rng, zero_points)
    ins = [a, name + ".B", name + ".scales"]
    inits += [numpy_helper.from_array(b, name + ".B"), numpy_helper.from_array(s, name + ".scales")]
    if zp is not None:
        ins.append(name + ".zp")
        inits.append(numpy_helper.from_array(zp, name + ".zp"))
    if bias is not None:
        if zp is None:
            ins.append("")
        ins += ["", name + ".bias"]  # g_idx omitted
        inits.append(numpy_helper.from_array(bias.astype(np.float32), name + ".bias"))
    out = out or name + ".y"
    node = helper.make_node("MatMulNBits", ins, [out], name=name, domain=MS,
                            K=k, N=n, bits=bits, block_size=block, accuracy_level=0)
    return node, out


def gather_bq(name, table, idx, bits, block, rng, inits, zero_points=True, out=None):
    """A GatherBlockQuantized node over table [rows, cols] (uint8 data, quantized along cols)."""
    rows, cols = table.shape
    b, s, zp = quantize_blockwise(table.T.copy(), bits, block, rng, zero_points)
    # quantize_blockwise works along K = cols for each of N = rows.
    kb = (cols + block - 1) // block
    data = b.reshape(rows, -1)[:, : (cols * bits + 7) // 8]
    ins = [name + ".data", idx, name + ".scales"]
    inits += [numpy_helper.from_array(np.ascontiguousarray(data), name + ".data"),
              numpy_helper.from_array(s.reshape(rows, kb), name + ".scales")]
    if zero_points:
        if bits == 4:
            zfull = np.zeros((rows, kb + (kb & 1)), np.uint8)
            lo, hi = zp.reshape(rows, -1) & 15, zp.reshape(rows, -1) >> 4
            zfull[:, 0::2], zfull[:, 1::2] = lo, hi
            zfull = zfull[:, :kb]
            zpk = np.zeros((rows, (kb + 1) // 2), np.uint8)
            zz = np.zeros((rows, kb + (kb & 1)), np.uint8)
            zz[:, :kb] = zfull
            zpk = (zz[:, 0::2] | (zz[:, 1::2] << 4)).astype(np.uint8)
        else:
            zpk = zp.reshape(rows, kb)
        ins.append(name + ".zp")
        inits.append(numpy_helper.from_array(zpk, name + ".zp"))
    out = out or name + ".y"
    node = helper.make_node("GatherBlockQuantized", ins, [out], name=name, domain=MS,
                            gather_axis=0, quantize_axis=1, block_size=block, bits=bits)
    return node, out


def save(case_dir, graph, feeds, opset=17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                              producer_name="tools/onnx/msquant_models.py")
    model.ir_version = 9 if opset < 21 else 10
    onnx.checker.check_model(model)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(os.path.join(case_dir, "ref"))
    path = os.path.join(case_dir, "model.onnx")
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    for k, v in feeds.items():
        np.save(os.path.join(case_dir, k + ".npy"), v)
    for o, v in zip(sess.get_outputs(), outs):
        np.save(os.path.join(case_dir, "ref", o.name + ".npy"), v)
    print(case_dir, os.path.getsize(path), "bytes")


def matmul_cases(root, rng):
    # (name, M shape of A, K, N, bits, block, zero points, bias)
    cases = [
        ("mm_m1_k64_zp", [1, 64], 64, 48, 4, 32, True, False),
        ("mm_m1_k100_nozp_bias", [1, 100], 100, 40, 4, 16, False, True),
        ("mm_m5_k200_zp_bias", [5, 200], 200, 72, 4, 64, True, True),
        ("mm_b2x3_k96_zp", [2, 3, 96], 96, 33, 4, 32, True, False),
        ("mm_m17_k130_zp_b128", [17, 130], 130, 20, 4, 128, True, True),
        ("mm_m4_k80_8bit_zp", [4, 80], 80, 24, 8, 32, True, False),
        ("mm_m1_k48_8bit_nozp_bias", [1, 48], 48, 16, 8, 16, False, True),
    ]
    for name, ashape, k, n, bits, block, zp, bias in cases:
        w = rng.standard_normal((k, n)).astype(np.float32) * 0.5
        inits = []
        node, _ = matmul_nbits("mm", "a", w, bits, block, rng, zp,
                               rng.standard_normal(n).astype(np.float32) if bias else None, inits, out="y")
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("a", TensorProto.FLOAT, ashape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ashape[:-1] + [n])], inits)
        save(os.path.join(root, name), g, {"a": rng.standard_normal(ashape).astype(np.float32)})


def gather_cases(root, rng):
    cases = [
        ("gbq_4bit_zp", 40, 64, [3], 4, 32, True),
        ("gbq_4bit_nozp_cols50", 30, 50, [2, 4], 4, 16, False),
        ("gbq_8bit_zp", 20, 48, [5], 8, 16, True),
        ("gbq_8bit_nozp", 12, 64, [4], 8, 32, False),
    ]
    for name, rows, cols, ishape, bits, block, zp in cases:
        table = rng.standard_normal((rows, cols)).astype(np.float32)
        inits = []
        node, _ = gather_bq("g", table, "idx", bits, block, rng, inits, zp, out="y")
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("idx", TensorProto.INT64, ishape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ishape + [cols])], inits)
        idx = rng.integers(-rows, rows, size=ishape).astype(np.int64)
        save(os.path.join(root, name), g, {"idx": idx})


def narrow_cases(root, rng):
    """MatMulNBits with float zero points and with g_idx (act-order); GatherBlockQuantized over
    int4 and uint4 data (one code an element, any quantize_axis). Generated apart from the
    cases above (their own random stream), so that adding them changed none of those."""
    k, n, block = 96, 24, 32
    kb = (k + block - 1) // block
    for name, gidx, fzp, bias in [("mm_float_zp", False, True, False), ("mm_g_idx_float_zp", True, True, True),
                                  ("mm_g_idx_nozp", True, False, False)]:
        w = rng.standard_normal((k, n)).astype(np.float32) * 0.5
        b, s, zp = quantize_blockwise(w, 4, block, rng, zero_points=True)
        inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(s, "s")]
        ins = ["a", "B", "s", ""]
        if fzp:
            inits.append(numpy_helper.from_array((rng.random(n * kb) * 15).astype(np.float32), "zp"))
            ins[3] = "zp"
        if gidx:
            # Act-order: each column of K belongs to a block, the columns in a permuted order.
            inits.append(numpy_helper.from_array((np.arange(k) // block)[rng.permutation(k)].astype(np.int32), "g_idx"))
            ins.append("g_idx")
        if bias:
            if len(ins) == 4:
                ins.append("")
            inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias"))
            ins.append("bias")
        node = helper.make_node("MatMulNBits", ins, ["y"], name="mm", domain=MS, K=k, N=n, bits=4, block_size=block)
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, n])], inits)
        save(os.path.join(root, name), g, {"a": rng.standard_normal((3, k)).astype(np.float32)})
    # (name, data type, data shape, quantize_axis, gather_axis, indices shape, zero points)
    for name, dt, shape, qa, ga, ishape, zp in [
        ("gbq_int4_axis1_zp", TensorProto.INT4, [10, 48], 1, 0, [3], True),
        ("gbq_uint4_axis0_nozp", TensorProto.UINT4, [40, 8], 0, 0, [2, 2], False),
        ("gbq_uint4_rank3_gather1_zp", TensorProto.UINT4, [2, 9, 32], 2, 1, [4], True),
    ]:
        lo, hi = (-8, 8) if dt == TensorProto.INT4 else (0, 16)
        block = 16
        sshape = list(shape)
        sshape[qa] = (shape[qa] + block - 1) // block
        inits = [helper.make_tensor("data", dt, shape, rng.integers(lo, hi, shape).flatten().tolist()),
                 numpy_helper.from_array((rng.random(sshape) + 0.5).astype(np.float32), "s")]
        ins = ["data", "idx", "s"]
        if zp:
            inits.append(helper.make_tensor("zp", dt, sshape, rng.integers(lo, hi, sshape).flatten().tolist()))
            ins.append("zp")
        node = helper.make_node("GatherBlockQuantized", ins, ["y"], name="g", domain=MS,
                                gather_axis=ga, quantize_axis=qa, block_size=block)
        out = shape[:ga] + ishape + shape[ga + 1:]
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("idx", TensorProto.INT64, ishape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
        idx = rng.integers(-shape[ga], shape[ga], size=ishape).astype(np.int64)
        save(os.path.join(root, name), g, {"idx": idx}, opset=21)


def gpt(root, name, rng, d, layers, heads, vocab, ffn, past, seq, block=32, max_pos=64):
    """A GPT-style decoder step: embedding (GatherBlockQuantized) + learned positions, pre-norm
    blocks (LayerNormalization, MatMulNBits q/k/v/out with past/present KV, a causal additive mask
    fed as an input, MatMulNBits MLP with a tanh GELU), final norm and a MatMulNBits LM head."""
    dh = d // heads
    nodes, inits = [], []
    c = lambda nm, arr: inits.append(numpy_helper.from_array(np.asarray(arr), nm)) or nm
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, seq]),
              helper.make_tensor_value_info("attn_bias", TensorProto.FLOAT, [1, 1, seq, past + seq])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, seq, vocab])]
    feeds = {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64),
             "position_ids": np.arange(past, past + seq, dtype=np.int64).reshape(1, seq)}
    mask = np.zeros((1, 1, seq, past + seq), np.float32)
    for i in range(seq):
        mask[0, 0, i, past + i + 1:] = -1e4
    feeds["attn_bias"] = mask
    n, x = gather_bq("wte", rng.standard_normal((vocab, d)).astype(np.float32) * 0.5, "input_ids", 4, block, rng, inits)
    nodes.append(n)
    c("wpe", (rng.standard_normal((max_pos, d)) * 0.1).astype(np.float32))
    nodes.append(helper.make_node("Gather", ["wpe", "position_ids"], ["pos"], axis=0))
    nodes.append(helper.make_node("Add", [x, "pos"], ["h0"]))
    h = "h0"
    c("shape_heads", np.array([1, seq, heads, dh], np.int64))
    c("shape_flat", np.array([1, seq, d], np.int64))
    c("half", np.array(0.5, np.float32))
    c("one", np.array(1.0, np.float32))
    c("gk", np.array(0.7978845608, np.float32))
    c("gc", np.array(0.044715, np.float32))
    c("scale", np.array(1.0 / np.sqrt(dh), np.float32))
    wscale = 1.0 / np.sqrt(d)
    for L in range(layers):
        p = f"l{L}."
        ln = lambda src, dst, tag: (c(p + tag + ".g", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)),
                                    c(p + tag + ".b", (0.1 * rng.standard_normal(d)).astype(np.float32)),
                                    nodes.append(helper.make_node("LayerNormalization", [src, p + tag + ".g", p + tag + ".b"], [dst], axis=-1, epsilon=1e-5)))
        ln(h, p + "ln1", "ln1")
        heads_out = {}
        for t in "qkv":
            nd, y = matmul_nbits(p + t, p + "ln1", (rng.standard_normal((d, d)) * wscale).astype(np.float32), 4, block, rng,
                                 zero_points=(t != "k"), bias=(0.1 * rng.standard_normal(d)).astype(np.float32), inits=inits)
            nodes.append(nd)
            nodes.append(helper.make_node("Reshape", [y, "shape_heads"], [y + "4"]))
            nodes.append(helper.make_node("Transpose", [y + "4"], [y + "t"], perm=[0, 2, 1, 3]))
            heads_out[t] = y + "t"
        for t, io in (("k", "key"), ("v", "value")):
            inputs.append(helper.make_tensor_value_info(f"past_{io}_{L}", TensorProto.FLOAT, [1, heads, past, dh]))
            outputs.append(helper.make_tensor_value_info(f"present_{io}_{L}", TensorProto.FLOAT, [1, heads, past + seq, dh]))
            feeds[f"past_{io}_{L}"] = rng.standard_normal((1, heads, past, dh)).astype(np.float32)
            nodes.append(helper.make_node("Concat", [f"past_{io}_{L}", heads_out[t]], [f"present_{io}_{L}"], axis=2))
        nodes.append(helper.make_node("Transpose", [f"present_key_{L}"], [p + "kt"], perm=[0, 1, 3, 2]))
        nodes.append(helper.make_node("MatMul", [heads_out["q"], p + "kt"], [p + "s0"]))
        nodes.append(helper.make_node("Mul", [p + "s0", "scale"], [p + "s1"]))
        nodes.append(helper.make_node("Add", [p + "s1", "attn_bias"], [p + "s2"]))
        nodes.append(helper.make_node("Softmax", [p + "s2"], [p + "pr"], axis=-1))
        nodes.append(helper.make_node("MatMul", [p + "pr", f"present_value_{L}"], [p + "ctx"]))
        nodes.append(helper.make_node("Transpose", [p + "ctx"], [p + "ctxt"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [p + "ctxt", "shape_flat"], [p + "ctxf"]))
        nd, y = matmul_nbits(p + "o", p + "ctxf", (rng.standard_normal((d, d)) * wscale).astype(np.float32), 4, block, rng,
                             bias=(0.1 * rng.standard_normal(d)).astype(np.float32), inits=inits)
        nodes.append(nd)
        nodes.append(helper.make_node("Add", [h, y], [p + "h1"]))
        ln(p + "h1", p + "ln2", "ln2")
        nd, y = matmul_nbits(p + "fc1", p + "ln2", (rng.standard_normal((d, ffn)) * wscale).astype(np.float32), 4, block, rng,
                             bias=(0.1 * rng.standard_normal(ffn)).astype(np.float32), inits=inits)
        nodes.append(nd)
        # tanh GELU: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
        nodes += [helper.make_node("Mul", [y, y], [p + "g2"]), helper.make_node("Mul", [p + "g2", y], [p + "g3"]),
                  helper.make_node("Mul", [p + "g3", "gc"], [p + "g4"]), helper.make_node("Add", [y, p + "g4"], [p + "g5"]),
                  helper.make_node("Mul", [p + "g5", "gk"], [p + "g6"]), helper.make_node("Tanh", [p + "g6"], [p + "g7"]),
                  helper.make_node("Add", [p + "g7", "one"], [p + "g8"]), helper.make_node("Mul", [y, p + "g8"], [p + "g9"]),
                  helper.make_node("Mul", [p + "g9", "half"], [p + "gelu"])]
        nd, y = matmul_nbits(p + "fc2", p + "gelu", (rng.standard_normal((ffn, d)) / np.sqrt(ffn)).astype(np.float32), 4, block, rng,
                             bias=(0.1 * rng.standard_normal(d)).astype(np.float32), inits=inits)
        nodes.append(nd)
        nodes.append(helper.make_node("Add", [p + "h1", y], [p + "h2"]))
        h = p + "h2"
    c("lnf.g", np.ones(d, np.float32))
    c("lnf.b", np.zeros(d, np.float32))
    nodes.append(helper.make_node("LayerNormalization", [h, "lnf.g", "lnf.b"], ["hf"], axis=-1, epsilon=1e-5))
    nd, _ = matmul_nbits("lm_head", "hf", (rng.standard_normal((d, vocab)) * wscale).astype(np.float32), 4, block, rng,
                         inits=inits, out="logits")
    nodes.append(nd)
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    save(os.path.join(root, name), g, feeds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--big", action="store_true", help="only a d 1024, 8-layer decoder (for peak RSS)")
    ap.add_argument("--seed", type=int, default=16)
    args = ap.parse_args()
    assert onnx.__version__ == "1.22.0" and ort.__version__ == "1.30.0", (onnx.__version__, ort.__version__)
    rng = np.random.default_rng(args.seed)
    if args.big:
        gpt(args.out, "gpt_4bit_d1024_l8", rng, d=1024, layers=8, heads=16, vocab=8192, ffn=4096, past=31, seq=1)
        return
    matmul_cases(args.out, rng)
    gather_cases(args.out, rng)
    gpt(args.out, "gpt_4bit_step", rng, d=128, layers=2, heads=4, vocab=256, ffn=256, past=7, seq=1)
    gpt(args.out, "gpt_4bit_prefill", rng, d=64, layers=2, heads=2, vocab=128, ffn=128, past=3, seq=4, block=16)
    narrow_cases(args.out, np.random.default_rng(args.seed + 1))


if __name__ == "__main__":
    main()
