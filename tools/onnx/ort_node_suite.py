#!/usr/bin/env python3
"""tools/onnx/ort_node_suite.py: ONNX Runtime (Python, CPU) over an ONNX node-test suite.

Runs every test directory under NODE_DIR (each holding model.onnx and test_data_set_*/) through
onnxruntime's CPU provider (graph optimizations all, one thread) and compares each output with
the expected one as Loom's runner does (go/session/conformance: |got - want| <= atol + rtol*|want|,
rtol 1e-3, atol 1e-7; NaN matches NaN; shapes and element types must match; sequences and
optionals element by element). Writes one JSON object per test to stdout, in name order:

    {"name": "test_abs", "status": "pass" | "fail", "message": "..."}

the same fields as `loom conformance --json`, so the two lists join on name
(tools/onnx/ort_vs_loom.sh). tools/onnx/ort_node_suite.sh runs it with pinned packages.

Usage: ort_node_suite.py NODE_DIR [--filter REGEX]
"""
import json
import os
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

RTOL, ATOL = 1e-3, 1e-7


def read_value(path, type_proto):
    """The value of a .pb file as ONNX Runtime takes it: an ndarray, a list (sequence) or None /
    the inner value (optional)."""
    data = open(path, "rb").read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return numpy_helper.to_list(seq)
    if kind == "optional_type":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return numpy_helper.to_optional(opt)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def as_ort_value(v, type_proto):
    """v, or for a bfloat16 tensor an OrtValue of that type: numpy has no bfloat16, and
    onnxruntime's Python API refuses ml_dtypes' arrays unless told their ONNX type."""
    if (isinstance(v, np.ndarray) and type_proto.WhichOneof("value") == "tensor_type"
            and type_proto.tensor_type.elem_type == onnx.TensorProto.BFLOAT16):
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(v.view(np.uint16), onnx.TensorProto.BFLOAT16)
    return v


def run(sess, outputs, feeds):
    """sess's outputs as numpy values; bfloat16 tensors (which onnxruntime cannot hand to numpy)
    read from their OrtValues' memory as ml_dtypes' bfloat16."""
    names = [o.name for o in outputs]
    if not any(o.type.WhichOneof("value") == "tensor_type"
               and o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 for o in outputs):
        return sess.run(names, feeds)
    import ctypes
    import ml_dtypes
    out = []
    feeds = {k: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}
    for v in sess.run_with_ort_values(names, feeds):
        if v.data_type() == "tensor(bfloat16)":
            shape = v.shape()
            n = int(np.prod(shape)) if shape else 1
            raw = (ctypes.c_uint16 * n).from_address(v.data_ptr()) if n else []
            out.append(np.array(raw, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(shape))
        else:
            out.append(v.numpy())
    return out


def compare(got, want, what):
    """"" when got matches want, else why not."""
    if isinstance(want, list) or want is None:
        if want is None:
            return "" if got is None else f"{what}: want an empty optional"
        if not isinstance(got, list) or len(got) != len(want):
            return f"{what}: want a sequence of {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            msg = compare(g, w, f"{what}[{i}]")
            if msg:
                return msg
        return ""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"{what}: shape {list(got.shape)}, want {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"{what}: element type {got.dtype}, want {want.dtype}"
    if want.dtype.kind in "fc" or "float" in want.dtype.name:  # ml_dtypes' bfloat16 is kind V
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        bad = ~both_nan & ~(np.abs(g - w) <= ATOL + RTOL * np.abs(w))
        # Equal infinities compare equal (inf - inf is NaN above).
        bad &= ~((g == w) & np.isinf(w))
    else:
        bad = got != want
    n = int(np.count_nonzero(bad))
    if n:
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        return f"{what}: {n} of {want.size} elements differ; element {i} is {got.reshape(-1)[i]}, want {want.reshape(-1)[i]}"
    return ""


def run_one(d):
    model_path = os.path.join(d, "model.onnx")
    model = onnx.load(model_path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 4
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    outputs = list(model.graph.output)
    sets = sorted(s for s in os.listdir(d) if s.startswith("test_data_set_"))
    if not sets:
        return "fail", "no test_data_set_*"
    for s in sets:
        sd = os.path.join(d, s)
        feeds = {}
        for k, vi in enumerate(inputs):
            p = os.path.join(sd, f"input_{k}.pb")
            if os.path.exists(p):
                feeds[vi.name] = as_ort_value(read_value(p, vi.type), vi.type)
        got = run(sess, outputs, feeds)
        for k, vi in enumerate(outputs):
            p = os.path.join(sd, f"output_{k}.pb")
            if not os.path.exists(p):
                continue
            msg = compare(got[k], read_value(p, vi.type), f"{s} output {vi.name}")
            if msg:
                return "fail", msg
    return "pass", ""


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    pattern = re.compile(sys.argv[sys.argv.index("--filter") + 1]) if "--filter" in sys.argv else None
    names = sorted(n for n in os.listdir(root) if os.path.exists(os.path.join(root, n, "model.onnx")))
    for name in names:
        if pattern and not pattern.search(name):
            continue
        try:
            status, message = run_one(os.path.join(root, name))
        except Exception as e:  # a load or run error is the test's failure, named
            status, message = "fail", f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        print(json.dumps({"name": name, "status": status, "message": message}), flush=True)


if __name__ == "__main__":
    main()
