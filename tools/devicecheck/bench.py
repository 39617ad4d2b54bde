#!/usr/bin/env python3
"""tools/devicecheck/bench.py: the device check's benchmarks (issue 13's "Performance").

Runs on the GPU machine (run.sh calls it after the tests) with the packed `loom` binary, the
real models carried in the device-check folder, and that machine's Python (numpy, onnx, torch,
onnxruntime). Prints one table; every figure is a median of timed runs after warm-up ones.

  microbenchmarks   models built here with onnx.helper, timed by `loom bench --ep cuda`. Each
                    is a chain of N identical nodes, run with N = 1 and N = 1 + K: the slope
                    (t[1+K] - t[1]) / K is one node's cost on the GPU with the run's fixed cost
                    taken out. The chains start from an initializer plus a one-float input and
                    end in a one-element Slice, so a run's transfers are a few bytes (with a
                    64 MB input and output they cost 75-90 ms a run, whose noise swamped K
                    nodes' milliseconds in the first measurements).
      gemm          MatMul 4096x4096 @ 4096x4096 f32 (a weight initializer), K = 16: GFLOP/s,
                    against cuBLAS SGEMM (torch.matmul, TF32 off) and HGEMM (f16, tensor cores)
      add           Add of two 64 MB f32 tensors (16 Mi elements, one an initializer), K = 64:
                    GB/s counting 2 reads and 1 write, against a 64 MB device-to-device copy
                    (torch) counting a read and a write
      transpose     Transpose of a 4096x4096 f32 matrix, K = 64: GB/s counting a read and a
                    write
      node          Add of 1,024 floats, K = 200: the per-node cost of a run plan
  models            `loom bench` on the cuda provider and on the host provider (every core),
                    and ONNX Runtime (CPU, every core; its CUDA provider where this onnxruntime
                    has one), on the same inputs.

Usage: bench.py LOOM MODELS_DIR [--testdata DIR] [--runs N] [--ep cuda|host] [--scale S]
(--testdata: go/session/testdata, by default MODELS_DIR/../session/testdata as the device-check
folder has it.)
(--ep host times the microbenchmarks on the host provider, and --scale S divides their tensors'
element counts by S: for trying the script without a GPU.)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def log(*a):
    print(*a, flush=True)


def save(model, path):
    model.ir_version = 8
    onnx.save(model, path)


def chain_model(kind, n, scale=1):
    """A graph of n nodes of kind in a chain; returns the model. The input X is one float and
    the output Y one element: the chain starts from an initializer S plus X (a broadcast Add)
    and ends with a Slice of its first element, so a run moves a few bytes between host and
    device and its time is the chain's kernels and the run's fixed cost. scale divides the
    tensors' element counts (for trying the script on a CPU)."""
    rng = np.random.default_rng(7)
    inits, nodes = [], []
    side = 4096 // int(np.sqrt(scale))
    if kind == "gemm":
        shape = [side, side]
        w = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(side)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "W"))
        op = lambda x, y: helper.make_node("MatMul", [x, "W"], [y])
    elif kind == "add":
        shape = [(16 << 20) // scale]
        inits.append(numpy_helper.from_array(rng.standard_normal(shape, dtype=np.float32), "B"))
        op = lambda x, y: helper.make_node("Add", [x, "B"], [y])
    elif kind == "transpose":
        shape = [side, side]
        op = lambda x, y: helper.make_node("Transpose", [x], [y], perm=[1, 0])
    elif kind == "node":
        shape = [1024]
        inits.append(numpy_helper.from_array(rng.standard_normal(shape, dtype=np.float32), "B"))
        op = lambda x, y: helper.make_node("Add", [x, "B"], [y])
    else:
        raise ValueError(kind)
    inits.append(numpy_helper.from_array(rng.standard_normal(shape, dtype=np.float32) / 4, "S"))
    rank = len(shape)
    inits.append(numpy_helper.from_array(np.zeros(rank, np.int64), "starts"))
    inits.append(numpy_helper.from_array(np.ones(rank, np.int64), "ends"))
    nodes.append(helper.make_node("Add", ["S", "X"], ["t_start"]))
    prev = "t_start"
    for i in range(n):
        nodes.append(op(prev, f"t{i}"))
        prev = f"t{i}"
    nodes.append(helper.make_node("Slice", [prev, "starts", "ends"], ["Y"]))
    g = helper.make_graph(nodes, f"{kind}_chain_{n}",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1] * rank)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def loom_bench(loom, model, ep, runs, args=(), threads=1, strict=False):
    """`loom bench --json`'s object, with "fallbacks": its line saying which nodes do not run on
    ep ("" when all do). strict: fail when one does not."""
    cmd = [loom, "bench", model, *args, "--ep", ep, "--runs", str(runs), "--warmup", "3", "--json",
           "--threads", str(threads)]
    if strict:
        cmd.append("--strict")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {(p.stderr or p.stdout)[-600:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["fallbacks"] = next((l for l in p.stderr.splitlines() if "do not run on" in l), "")
    return r


def decode_rows(loom, td, ep, runs):
    """Issue 14's decode step on ep and on the host: the small GPT (tiny_gpt_kv, one token after 32
    cached positions) with every input and output in a persistent binding, eager steps against
    replays of the captured device graph (`loom bench --decode N --capture`)."""
    model = os.path.join(td, "models", "tiny_gpt_kv.onnx")
    args = ["input_ids=shape:1x1"] + [f"past_{n}=shape:1x4x32x16" for n in ("k0", "v0", "k1", "v1")]
    rows = []
    for where in (ep, "host"):
        cmd = [loom, "bench", model, *args, "--ep", where, "--decode", str(max(runs, 100)), "--capture", "--json"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {(p.stderr or p.stdout)[-600:]}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        replay = (f"replay {r['replay_median_ms']:.4f} ms ({r['segments']} segment(s))" if r["captured"]
                  else f"not captured: {r.get('reason', '')[:120]}")
        rows.append((f"decode {where}", f"{r.get('replay_median_ms', r['eager_median_ms']):.4f} ms",
                     f"tiny_gpt_kv eager {r['eager_median_ms']:.4f} ms; {replay}"))
    return rows


def torch_refs(runs):
    """cuBLAS SGEMM/HGEMM 4096^3 and a 64 MB device-to-device copy, timed with CUDA events."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")

    def timed(fn, reps):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        return statistics.median(ts)

    out = {}
    for name, dt in (("sgemm", torch.float32), ("hgemm", torch.float16)):
        x = torch.randn(4096, 4096, device=dev, dtype=dt)
        y = torch.randn(4096, 4096, device=dev, dtype=dt)
        ms = timed(lambda: torch.matmul(x, y), runs)
        out[name] = 2 * 4096 ** 3 / (ms * 1e-3) / 1e9
    src = torch.randn(16 << 20, device=dev)
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), runs)
    out["copy"] = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9
    return out


def ort_time(model, feeds, providers, runs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    s = ort.InferenceSession(model, so, providers=providers)
    for _ in range(3):
        s.run(None, feeds)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, feeds)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), s.get_providers()[0]


def real_models(models, td):
    """(name, model path, {input: .npy path or value}) of the real models present under models
    (the published ones) and td (go/session/testdata)."""
    out = []
    cands = [
        ("mnist", os.path.join(models, "mnist", "model.onnx"), None),
        ("silero_vad_v5", os.path.join(models, "silero_vad_v5.onnx"),
         {"input": os.path.join(td, "realmodels", "silero_vad_v5", "input_0.npy"),
          "state": os.path.join(td, "realmodels", "silero_vad_v5", "state_0.npy"),
          "sr": np.array(16000, dtype=np.int64)}),
        ("ppocr_v4_rec", os.path.join(models, "ch_PP-OCRv4_rec_infer.onnx"),
         {"x": os.path.join(td, "realmodels", "ppocr_v4_rec", "x.npy")}),
        ("tiny_encoder", os.path.join(td, "models", "tiny_encoder.onnx"),
         {"x": os.path.join(td, "realmodels", "tiny_encoder", "x.npy")}),
        ("tiny_gpt2_step", os.path.join(td, "models", "tiny_gpt2_step.onnx"), None),
        ("tiny_bert", os.path.join(td, "models", "tiny_bert.onnx"), None),
    ]
    for name, path, inputs in cands:
        if os.path.exists(path):
            out.append((name, path, inputs))
    return out


def random_feeds(model_path, inputs, seed=1):
    """Feeds for ONNX Runtime (and the files given to loom): the .npy files or values given, else
    random values of each input's declared shape (symbolic dimensions as 1)."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds, files = {}, {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        if inputs and vi.name in inputs:
            given = inputs[vi.name]  # a .npy file, or the value itself
            if isinstance(given, str):
                feeds[vi.name] = np.load(given)
                files[vi.name] = given
            else:
                feeds[vi.name] = given
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.integer):
            v = rng.integers(0, 2, size=shape).astype(dt)
        else:
            v = rng.standard_normal(shape).astype(dt)
        feeds[vi.name] = v
    return feeds, files


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    loom, models = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 30
    ep = sys.argv[sys.argv.index("--ep") + 1] if "--ep" in sys.argv else "cuda"
    td = (sys.argv[sys.argv.index("--testdata") + 1] if "--testdata" in sys.argv
          else os.path.join(os.path.dirname(os.path.abspath(models)), "session", "testdata"))
    tmp = tempfile.mkdtemp(prefix="loom-bench-")
    failures = 0
    rows = []

    try:
        ref = torch_refs(runs)
        log(f"torch {__import__('torch').__version__}: cuBLAS SGEMM {ref['sgemm']:.0f} GFLOP/s, "
            f"HGEMM {ref['hgemm']:.0f} GFLOP/s, 64 MB copy {ref['copy']:.0f} GB/s")
    except Exception as e:  # no torch or no GPU for it: the Loom figures still stand
        ref = {}
        log(f"torch references unavailable: {e}")

    # K: the chain's extra nodes, K nodes taking milliseconds on an H200 (the runs' I/O is a
    # few bytes, so their noise is microseconds).
    scale = int(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 1
    side, flat = 4096 // int(np.sqrt(scale)), (16 << 20) // scale
    micro = {"gemm": (16, lambda s: 2 * side ** 3 / s / 1e9, "GFLOP/s", "sgemm"),
             "add": (64, lambda s: 3 * 4 * flat / s / 1e9, "GB/s", "copy"),
             "transpose": (64, lambda s: 2 * 4 * side * side / s / 1e9, "GB/s", "copy"),
             "node": (200, None, "us/node", None)}
    for kind, (k, rate, unit, against) in micro.items():
        try:
            t = {}
            for n in (1, 1 + k):
                path = os.path.join(tmp, f"{kind}_{n}.onnx")
                save(chain_model(kind, n, scale), path)
                r = loom_bench(loom, path, ep, runs, strict=True)
                t[n] = r["median_ms"]
                log(f"{kind} chain of {n}: median {r['median_ms']:.3f} ms, min {r['min_ms']:.3f} ms, p95 {r['p95_ms']:.3f} ms, load {r['load_ms']:.0f} ms")
            per = (t[1 + k] - t[1]) / k * 1e-3  # seconds per node
            if rate is None:
                rows.append((f"micro {kind}", f"{per * 1e6:.2f} {unit}", f"chain of {1 + k} {t[1 + k]:.3f} ms, of 1 {t[1]:.3f} ms"))
            else:
                v = rate(per) if per > 0 else float("nan")
                vs = f"{v / ref[against]:.2f} of {against} ({ref[against]:.0f})" if against in ref else ""
                rows.append((f"micro {kind}", f"{v:.0f} {unit}", f"{per * 1e3:.3f} ms/node {vs}"))
        except Exception as e:
            failures += 1
            rows.append((f"micro {kind}", "FAIL", str(e)[-300:]))

    try:
        import onnxruntime as ort
        ort_providers = ort.get_available_providers()
        log(f"onnxruntime {ort.__version__}: {ort_providers}")
    except Exception as e:
        ort_providers = []
        log(f"onnxruntime unavailable: {e}")
    cpus = os.cpu_count() or 1
    for name, path, inputs in real_models(models, td):
        try:
            feeds, files = random_feeds(path, inputs)
            args = []
            for k, v in feeds.items():
                f = files.get(k)
                if f is None:
                    f = os.path.join(tmp, f"{name}_{k}.npy")
                    np.save(f, v)
                args.append(f"{k}={f}")
            gpu = loom_bench(loom, path, ep, runs, args)
            host = loom_bench(loom, path, "host", runs, args, threads=cpus)
            line = f"loom {ep} {gpu['median_ms']:.3f} ms (load {gpu['load_ms']:.0f} ms); loom host {host['median_ms']:.3f} ms"
            if "CPUExecutionProvider" in ort_providers:
                ms, _ = ort_time(path, feeds, ["CPUExecutionProvider"], runs)
                line += f"; ORT cpu {ms:.3f} ms"
            if "CUDAExecutionProvider" in ort_providers:
                ms, got = ort_time(path, feeds, ["CUDAExecutionProvider"], runs)
                line += f"; ORT {got} {ms:.3f} ms"
            if gpu["fallbacks"]:
                line += "; " + gpu["fallbacks"].split(": ", 1)[-1][:160]
            rows.append((f"model {name}", f"{gpu['median_ms']:.3f} ms", line))
        except Exception as e:
            failures += 1
            rows.append((f"model {name}", "FAIL", str(e)[-300:]))

    try:
        rows.extend(decode_rows(loom, td, ep, runs))
    except Exception as e:
        failures += 1
        rows.append(("decode", "FAIL", str(e)[-300:]))

    log("")
    log(f"{'benchmark':<24} {'figure':<16} detail")
    for r in rows:
        log(f"{r[0]:<24} {r[1]:<16} {r[2]}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
