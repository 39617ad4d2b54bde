#!/usr/bin/env python3
"""Dumps the ONNX operator schemas known to the installed onnx package (Debian python3-onnx
1.12: opsets 1-17) as compact JSON for go/graph's op table. Opsets 18+ are added by hand in
schema_recent.go. Run: /usr/bin/python3 gen_schema.py > ../../schema_onnx.json
"""
import json
import sys

import onnx
import onnx.defs

OPT = {
    onnx.defs.OpSchema.FormalParameterOption.Single: "s",
    onnx.defs.OpSchema.FormalParameterOption.Optional: "o",
    onnx.defs.OpSchema.FormalParameterOption.Variadic: "v",
}


def params(ps):
    # Variadic parameters whose elements may differ in type are marked "h".
    return [[p.name, p.typeStr,
             "h" if OPT[p.option] == "v" and not p.isHomogeneous else OPT[p.option]]
            for p in ps]


def main():
    out = []
    for s in sorted(onnx.defs.get_all_schemas_with_history(),
                    key=lambda s: (s.domain, s.name, s.since_version)):
        if s.domain not in ("", "ai.onnx", "ai.onnx.ml"):
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
    json.dump({"onnx_version": onnx.__version__, "schemas": out}, sys.stdout,
              separators=(",", ":"), sort_keys=True)


if __name__ == "__main__":
    main()
