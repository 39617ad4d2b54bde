"""Runs Triton's own Python client (tritonclient) against a server that speaks the Open Inference
Protocol (KServe v2), over HTTP or gRPC: health, server and model metadata, model readiness,
the repository index (and over HTTP the model configuration), inference (sequential and
concurrent; over HTTP both as JSON tensors and with the binary tensor data extension), and requests the server must refuse (an unknown model or version, a wrong
datatype, a shape that does not match the data).

tools/serve's Go tests (serve_test.go) run it against `loom serve`. They write the inputs as .npy
files and a spec naming them; this script writes every output it receives as .npy files and a
result JSON; the tests compare both with go/session's own results. Usage:

  python tritonclient_check.py --protocol http|grpc --url HOST:PORT --spec SPEC.json \
      --result RESULT.json

SPEC.json:
  {"out_dir": DIR,
   "models": [{"name": N, "version": V,
               "requests": [{"inputs": [{"name": I, "file": I.npy}], "outputs": [O, ...]}]}]}

Outputs go to DIR/<protocol>-<variant>/<model>/<request index>/<output>.npy, where the variants
are json, binary and concurrent over HTTP, raw and concurrent over gRPC. RESULT.json holds what the
health and metadata calls returned and, for each refused request, the client's exception.
The exit status is 0 when every call that should succeed did, 1 otherwise (with the traceback).
"""

import argparse
import json
import os
import sys
import threading

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype


def make_inputs(mod, request, binary):
    """The request's inputs as tritonclient InferInputs, read from their .npy files."""
    inputs = []
    for spec in request["inputs"]:
        arr = np.load(spec["file"])
        inp = mod.InferInput(spec["name"], list(arr.shape), np_to_triton_dtype(arr.dtype))
        if mod is httpclient:
            inp.set_data_from_numpy(arr, binary_data=binary)
        else:
            inp.set_data_from_numpy(arr)
        inputs.append(inp)
    return inputs


def make_outputs(mod, request, binary):
    if mod is httpclient:
        return [httpclient.InferRequestedOutput(n, binary_data=binary) for n in request["outputs"]]
    return [grpcclient.InferRequestedOutput(n) for n in request["outputs"]]


def save_result(out_dir, variant, model, index, request, result):
    d = os.path.join(out_dir, variant, model["name"], str(index))
    os.makedirs(d, exist_ok=True)
    for name in request["outputs"]:
        arr = result.as_numpy(name)
        if arr is None:
            raise RuntimeError("%s: model %s request %d: no output %s in the response"
                               % (variant, model["name"], index, name))
        np.save(os.path.join(d, name + ".npy"), arr)


def run_sequential(client, mod, out_dir, variant, models, binary):
    for model in models:
        for i, request in enumerate(model["requests"]):
            result = client.infer(model["name"], make_inputs(mod, request, binary),
                                  model_version=model["version"],
                                  outputs=make_outputs(mod, request, binary),
                                  request_id="%s-%d" % (variant, i))
            resp = result.get_response()
            if not isinstance(resp, dict):
                resp = json.loads(grpc_json(resp))
            if resp.get("model_name") != model["name"]:
                raise RuntimeError("%s: response names model %r, want %r"
                                   % (variant, resp.get("model_name"), model["name"]))
            if resp.get("id", "%s-%d" % (variant, i)) != "%s-%d" % (variant, i):
                raise RuntimeError("%s: response id %r, want %r" % (variant, resp.get("id"), "%s-%d" % (variant, i)))
            save_result(out_dir, "%s" % variant, model, i, request, result)


def grpc_json(message):
    from google.protobuf import json_format
    return json_format.MessageToJson(message, preserving_proto_field_name=True)


def run_concurrent_http(url, out_dir, variant, models):
    """All of a model's requests at once, through a client with that many connections."""
    for model in models:
        n = len(model["requests"])
        client = httpclient.InferenceServerClient(url, concurrency=n)
        try:
            pending = [client.async_infer(model["name"], make_inputs(httpclient, r, True),
                                          model_version=model["version"],
                                          outputs=make_outputs(httpclient, r, True))
                       for r in model["requests"]]
            for i, (request, p) in enumerate(zip(model["requests"], pending)):
                save_result(out_dir, variant, model, i, request, p.get_result())
        finally:
            client.close()


def run_concurrent_grpc(client, out_dir, variant, models):
    for model in models:
        n = len(model["requests"])
        done = threading.Semaphore(0)
        results = [None] * n

        def callback(i, result, error):
            results[i] = (result, error)
            done.release()

        for i, request in enumerate(model["requests"]):
            client.async_infer(model["name"], make_inputs(grpcclient, request, True),
                               lambda result, error, i=i: callback(i, result, error),
                               model_version=model["version"],
                               outputs=make_outputs(grpcclient, request, True),
                               client_timeout=60)
        for _ in range(n):
            if not done.acquire(timeout=120):
                raise RuntimeError("%s: model %s: a concurrent request got no answer in 120 s"
                                   % (variant, model["name"]))
        for i, request in enumerate(model["requests"]):
            result, error = results[i]
            if error is not None:
                raise RuntimeError("%s: model %s request %d: %s" % (variant, model["name"], i, error))
            save_result(out_dir, variant, model, i, request, result)


def refused(fn):
    """Calls fn, which must raise InferenceServerException; returns what the client reported."""
    try:
        fn()
    except InferenceServerException as e:
        return {"raised": True, "status": str(e.status()), "message": str(e.message())}
    return {"raised": False, "status": "", "message": ""}


def refusals(client, mod, model):
    """Requests the server must refuse, built from the model's first request."""
    request = model["requests"][0]
    binary = mod is httpclient

    def infer(name=model["name"], version=model["version"], inputs=None):
        client.infer(name, inputs or make_inputs(mod, request, binary), model_version=version,
                     outputs=make_outputs(mod, request, binary))

    def wrong_datatype():
        inputs = make_inputs(mod, request, binary)
        spec = request["inputs"][0]
        arr = np.load(spec["file"]).astype(np.int32)
        bad = mod.InferInput(spec["name"], list(arr.shape), "INT32")
        if mod is httpclient:
            bad.set_data_from_numpy(arr, binary_data=binary)
        else:
            bad.set_data_from_numpy(arr)
        inputs[0] = bad
        infer(inputs=inputs)

    def shape_mismatch():
        inputs = make_inputs(mod, request, binary)
        shape = list(np.load(request["inputs"][0]["file"]).shape)
        shape[-1] += 1  # the data holds fewer elements than this shape
        inputs[0].set_shape(shape)
        infer(inputs=inputs)

    out = {
        "unknown_model": refused(lambda: infer(name="no_such_model")),
        "unknown_version": refused(lambda: infer(version="999")),
        "wrong_datatype": refused(wrong_datatype),
        "shape_mismatch": refused(shape_mismatch),
        "unknown_model_metadata": refused(lambda: client.get_model_metadata("no_such_model")),
    }
    # The server keeps serving after refusing them.
    infer()
    out["served_after"] = True
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", choices=["http", "grpc"], required=True)
    ap.add_argument("--url", required=True, help="HOST:PORT")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--result", required=True)
    args = ap.parse_args()
    with open(args.spec) as f:
        spec = json.load(f)
    models, out_dir = spec["models"], spec["out_dir"]

    result = {"protocol": args.protocol, "models": {}}
    if args.protocol == "http":
        mod = httpclient
        client = httpclient.InferenceServerClient(args.url)
    else:
        mod = grpcclient
        client = grpcclient.InferenceServerClient(args.url)
    try:
        result["server_live"] = client.is_server_live()
        result["server_ready"] = client.is_server_ready()
        if mod is httpclient:
            result["server_metadata"] = client.get_server_metadata()
        else:
            result["server_metadata"] = client.get_server_metadata(as_json=True)
        for model in models:
            entry = {"ready": client.is_model_ready(model["name"], model["version"])}
            if mod is httpclient:
                entry["metadata"] = client.get_model_metadata(model["name"], model["version"])
            else:
                entry["metadata"] = client.get_model_metadata(model["name"], model["version"], as_json=True)
            entry["unknown_version_ready"] = client.is_model_ready(model["name"], "999")
            # The model configuration (Triton's extension), which Triton's example clients and
            # perf_analyzer read for max_batch_size.
            if mod is httpclient:
                entry["config"] = client.get_model_config(model["name"], model["version"])
            else:
                entry["config"] = client.get_model_config(model["name"], model["version"], as_json=True)["config"]
            result["models"][model["name"]] = entry
        if mod is httpclient:
            result["repository_index"] = client.get_model_repository_index()
        else:
            result["repository_index"] = client.get_model_repository_index(as_json=True).get("models", [])

        if mod is httpclient:
            run_sequential(client, mod, out_dir, "http-json", models, binary=False)
            run_sequential(client, mod, out_dir, "http-binary", models, binary=True)
            run_concurrent_http(args.url, out_dir, "http-concurrent", models)
        else:
            run_sequential(client, mod, out_dir, "grpc-raw", models, binary=True)
            run_concurrent_grpc(client, out_dir, "grpc-concurrent", models)
        # The statistics extension, after the inferences above (protobuf's JSON writes 64-bit
        # integers as strings: read them back as numbers).
        if mod is httpclient:
            stats = client.get_inference_statistics()
        else:
            stats = client.get_inference_statistics(as_json=True)
        result["statistics"] = [
            {
                "name": e["name"],
                "version": e["version"],
                "inference_count": int(e.get("inference_count", 0)),
                "execution_count": int(e.get("execution_count", 0)),
                "success_count": int(e.get("inference_stats", {}).get("success", {}).get("count", 0)),
            }
            for e in stats.get("model_stats", [])
        ]
        result["refusals"] = {m["name"]: refusals(client, mod, m) for m in models}
    finally:
        client.close()
    with open(args.result, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
