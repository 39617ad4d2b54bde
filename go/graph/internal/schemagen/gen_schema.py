#!/usr/bin/env python3
"""Dumps the ONNX operator schemas known to the installed onnx package as compact JSON for
go/graph's op table (schema_onnx.json): every version of every operator of ai.onnx, ai.onnx.ml
and the preview domains (ai.onnx.preview, ai.onnx.preview.training), and the newest opset of
each of those domains. The checked-in table comes from onnx 1.22.0 (PyPI; ai.onnx opsets 1-27,
ai.onnx.ml 1-5). Run it from a virtual environment holding that package:

    python3 -m venv /tmp/onnx122 && /tmp/onnx122/bin/pip install onnx==1.22.0
    /tmp/onnx122/bin/python gen_schema.py > ../../schema_onnx.json

It also runs under older packages (Debian's python3-onnx 1.12 spells some attributes in
camelCase), which give older tables.
"""
import json
import sys

import onnx
import onnx.defs

DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training")

OPT = {
    onnx.defs.OpSchema.FormalParameterOption.Single: "s",
    onnx.defs.OpSchema.FormalParameterOption.Optional: "o",
    onnx.defs.OpSchema.FormalParameterOption.Variadic: "v",
}


def attr(obj, *names):
    # onnx 1.12 has typeStr and isHomogeneous; newer releases type_str and is_homogeneous.
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise AttributeError(f"{type(obj).__name__} has none of {names}")


def params(ps):
    # Variadic parameters whose elements may differ in type are marked "h".
    out = []
    for p in ps:
        opt = OPT[p.option]
        if opt == "v" and not attr(p, "is_homogeneous", "isHomogeneous"):
            opt = "h"
        out.append([p.name, attr(p, "type_str", "typeStr"), opt])
    return out


def main():
    out = []
    for s in sorted(onnx.defs.get_all_schemas_with_history(),
                    key=lambda s: (s.domain, s.name, s.since_version)):
        if s.domain not in DOMAINS:
            continue
        attrs = [[a.name, a.type.name, bool(a.required)] for a in
                 sorted(s.attributes.values(), key=lambda a: a.name)]
        tc = {c.type_param_str: sorted(c.allowed_type_strs) for c in s.type_constraints}
        out.append({
            "d": s.domain or "ai.onnx", "op": s.name, "v": s.since_version,
            "dep": bool(s.deprecated),
            "in": params(s.inputs), "out": params(s.outputs),
            "min_in": s.min_input, "max_in": min(s.max_input, 1 << 30),
            "min_out": s.min_output, "max_out": min(s.max_output, 1 << 30),
            "attrs": attrs, "tc": tc,
        })
    have = {s["d"] for s in out}
    opsets = {(d or "ai.onnx"): hi for d, (_, hi) in onnx.defs.C.schema_version_map().items()
              if d in DOMAINS and (d or "ai.onnx") in have}
    json.dump({"onnx_version": onnx.__version__, "opsets": opsets, "schemas": out}, sys.stdout,
              separators=(",", ":"), sort_keys=True)


if __name__ == "__main__":
    main()
