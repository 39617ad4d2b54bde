"""The one .bzl file that Loom's BUILD files load rules from.

Rules keep their standard names and attributes, so a BUILD file reads as
plain rules_cc / rules_go; routing every load through here lets the
workspace change where a rule comes from, or wrap it, in one place.
"""

load(
    "@rules_cc//cc:defs.bzl",
    _cc_binary = "cc_binary",
    _cc_library = "cc_library",
    _cc_test = "cc_test",
)
load("//kernels/aot:variants.bzl", "LOOM_AOT_VARIANTS")
load(
    "@io_bazel_rules_go//go:def.bzl",
    _go_binary = "go_binary",
    _go_library = "go_library",
    _go_test = "go_test",
)

cc_binary = _cc_binary
cc_library = _cc_library
cc_test = _cc_test

go_binary = _go_binary
go_library = _go_library
go_test = _go_test

# Loom-specific rules (loom_kernel, ...) go below.

# Flags for the host C of ahead-of-time kernels: the ones package loom builds JIT kernels with
# (loom.StaticCFlags; tools/cmd/loomc's test checks the two agree), so both paths produce the
# same machine code. -w: the generated C is not ours to lint under the toolchain's -Wall
# (-Wno-psabi silences the vector-ABI notes -w leaves).
_LOOM_HOST_COPTS = [
    "-O3",
    "-std=gnu11",
    "-fwrapv",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=fast",
]

# -march for each host target (the x86-64 psABI micro-architecture levels).
_LOOM_HOST_MARCH = {
    "host-x86_64-v1": "-march=x86-64",
    "host-x86_64-v2": "-march=x86-64-v2",
    "host-x86_64-v3": "-march=x86-64-v3",
    "host-x86_64-v4": "-march=x86-64-v4",
    "host-aarch64-v8": "-march=armv8-a",
}

# Further ISA flags of a host target (loom.StaticCFlags has them too): clang (zig cc) tunes
# x86-64-v4 for 256-bit vectors and would split the kernels' 16-lane vectors in halves.
_LOOM_HOST_ISA_FLAGS = {
    "host-x86_64-v4": ["-mprefer-vector-width=512"],
}

def _loom_kernel_source_impl(ctx):
    args = ctx.actions.args()
    args.add("--src", ctx.file.src)
    args.add("--symbol", ctx.attr.symbol)
    args.add("--target", ctx.attr.target)
    args.add("--module", ctx.attr.module)
    for key in sorted(ctx.attr.spec.keys()):
        args.add("--spec", key + "=" + ctx.attr.spec[key])
    if ctx.attr.target.startswith("sm_"):
        args.add("--out_cuda", ctx.outputs.out_code)
    else:
        args.add("--out_c", ctx.outputs.out_code)
    args.add("--out_meta", ctx.outputs.out_meta)
    ctx.actions.run(
        executable = ctx.executable._loomc,
        arguments = [args],
        inputs = [ctx.file.src],
        outputs = [ctx.outputs.out_code, ctx.outputs.out_meta],
        mnemonic = "LoomCompile",
        progress_message = "Compiling Loom kernel %s (%s) for %s" % (ctx.attr.symbol, ctx.file.src.short_path, ctx.attr.target),
    )
    return [DefaultInfo(files = depset([ctx.outputs.out_code, ctx.outputs.out_meta]))]

# Runs loomc on one kernel for one target: the code (host C or CUDA C) and its metadata JSON.
_loom_kernel_source = rule(
    implementation = _loom_kernel_source_impl,
    attrs = {
        "src": attr.label(allow_single_file = [".loom"], mandatory = True),
        "symbol": attr.string(mandatory = True),
        "target": attr.string(mandatory = True),
        "module": attr.string(mandatory = True),
        "spec": attr.string_dict(),
        "out_code": attr.output(mandatory = True),
        "out_meta": attr.output(mandatory = True),
        "_loomc": attr.label(
            default = Label("//tools/cmd/loomc"),
            executable = True,
            cfg = "exec",
        ),
    },
)

def loom_kernel(
        name,
        src,
        symbol,
        spec = {},
        targets = ["host-x86_64-v3"],
        module = None,
        visibility = None,
        testonly = False,
        tags = []):
    """Compiles a Loom kernel ahead of time into a cc_library.

    The library `name` holds the kernel's host C (compiled with the target's -march and linked
    with alwayslink, so its constructor registers the module with the shim before main) and, as
    data, `<name>.<target>.json` (loom.StaticMetadata: bindings, access modes, scalar blob,
    launch program) for every target and `<name>.<target>.cu` (CUDA C for NVRTC) for each sm_XX
    target. A binary that depends on it (and on //shim) loads the kernel with
    LOOM_MODULE_HOST_STATIC under the module name, without a C compiler at run time.

    The default target is host-x86_64-v3, the baseline of x86-64 machines of the last decade
    (AVX2, FMA): the binary runs on any x86-64-v3 or v4 CPU (the shim accepts code for a lower
    level than the device's). Name host-x86_64-v4 to use AVX-512, at the price of not running
    on v3 machines.

    Args:
      name: the cc_library.
      src: the .loom file.
      symbol: the kernel in src.
      spec: specialization constants, {"BLOCK": "128", "T": "f32"}.
      targets: at most one host target (one module per library) and any sm_XX targets.
      module: the module name; default "<package>/<name>" (kernels/fill).
      visibility: of the library.
      testonly: of every target made.
      tags: of every target made.
    """
    if module == None:
        module = native.package_name() + "/" + name
    host = [t for t in targets if t.startswith("host-")]
    cuda = [t for t in targets if t.startswith("sm_")]
    for t in targets:
        if t not in _LOOM_HOST_MARCH and t not in cuda:
            fail("loom_kernel %s: unknown target %r (want one of %s or sm_XX)" % (name, t, ", ".join(_LOOM_HOST_MARCH.keys())))
    if len(host) > 1:
        fail("loom_kernel %s: one host target per library (a module registers for one target), got %s" % (name, host))
    srcs = []
    data = []
    for t in targets:
        base = "%s.%s" % (name, t)
        code = base + (".cu" if t in cuda else ".c")
        _loom_kernel_source(
            name = base + "_gen",
            src = src,
            symbol = symbol,
            target = t,
            module = module,
            spec = spec,
            out_code = code,
            out_meta = base + ".json",
            testonly = testonly,
            tags = tags,
            visibility = ["//visibility:private"],
        )
        data.append(base + ".json")
        if t in cuda:
            data.append(code)
        else:
            srcs.append(code)
    _cc_library(
        name = name,
        srcs = srcs,
        copts = _LOOM_HOST_COPTS + ["-w", "-Wno-psabi"] + [_LOOM_HOST_MARCH[t] for t in host] +
                [f for t in host for f in _LOOM_HOST_ISA_FLAGS.get(t, [])],
        data = data,
        alwayslink = True,
        linkstatic = True,
        deps = [Label("//shim:loom_abi")],
        testonly = testonly,
        tags = tags,
        visibility = visibility,
    )

def loom_aot_kernels(name, package, variants = LOOM_AOT_VARIANTS, visibility = None):
    """Declares the op library's shipped kernels of one generated package through loom_kernel.

    variants defaults to LOOM_AOT_VARIANTS from //kernels/aot:variants.bzl (written by
    `go generate ./kernels/...` from kernels/aot/manifest.txt and corpus.txt); the ones whose
    package is `package` (a (file, target) pair, "elementwise_v3") become one loom_kernel each,
    under the variant's module name, and `name` is a cc_library of all of them, for the cgo
    go_library of kernels/aot/gen/<package> (its table.c calls their entries functions; the
    go.work build compiles the same code from the generated C there instead).

    Args:
      name: the cc_library.
      variants: the variant list (default LOOM_AOT_VARIANTS).
      package: the generated package whose variants to declare.
      visibility: of the library.
    """
    deps = []
    for v in variants:
        if v.package != package:
            continue
        loom_kernel(
            name = v.name,
            src = Label("//kernels:" + v.src),
            symbol = v.symbol,
            spec = v.config,
            targets = [v.target],
            module = v.module,
            visibility = ["//visibility:private"],
        )
        deps.append(":" + v.name)
    _cc_library(
        name = name,
        deps = deps,
        linkstatic = True,
        visibility = visibility,
    )

def filegroup(**kwargs):
    """Bazel's filegroup, re-exported so BUILD files load every rule from here."""
    native.filegroup(**kwargs)

# NVRTC as a declared input of a test (@nvrtc, third_party/repositories.bzl): add NVRTC_DATA to
# its data and NVRTC_ENV to its env, and the shim loads exactly that library.
NVRTC_DATA = ["@nvrtc//:libnvrtc"]

NVRTC_ENV = {"LOOM_NVRTC_LIBRARY": "$(rootpath @nvrtc//:libnvrtc)"}

# The pinned C and C++ compiler (zig cc, @loom_zig: third_party/zig_toolchain.bzl; its driver
# runs `zig c++` for C++ sources, .cc and the like) as the compiler of a test that compiles C or
# C++ at run time: add ZIG_CC_DATA to its data and ZIG_CC_ENV to its env, and Loom's compiler
# (Config.CC empty: $CC) and the tests' own compiles ($CC, $CXX) run the driver from the
# runfiles, so the test needs no C compiler on the machine. CC and CXX are relative to the
# workspace's runfiles directory; the test's main makes them absolute. Only a workspace that
# calls loom_toolchains() has @loom_zig.
ZIG_CC_DATA = ["@loom_zig//:zig-cc", "@loom_zig//:all_files"]

ZIG_CC_ENV = {
    "CC": "$(rootpath @loom_zig//:zig-cc)",
    "CXX": "$(rootpath @loom_zig//:zig-cc)",
}

# The ONNX node tests as a declared input (@onnx_node_tests, third_party/repositories.bzl): add
# NODE_TESTS_DATA to a test's data and NODE_TESTS_ENV to its env; LOOM_NODE_TESTS is relative
# to the workspace's runfiles directory.
NODE_TESTS_DATA = ["@onnx_node_tests//:node"]

NODE_TESTS_ENV = {"LOOM_NODE_TESTS": "external/onnx_node_tests/node"}

# Tests that need an NVIDIA GPU (docs/bazel.md). The "gpu" tag keeps them out of a plain
# `bazel test //...` (.bazelrc: --test_tag_filters=-gpu) and `--config=gpu` selects them;
# LOOM_GPU_EXEC_PROPERTIES route their test actions to a remote executor's GPU workers. An
# organization whose GPU workers advertise another platform property changes it here.
LOOM_GPU_TAGS = ["gpu"]

LOOM_GPU_EXEC_PROPERTIES = {"Pool": "gpu"}

def gpu_test(name, test, args = [], env = {}, size = "medium", tags = [], **kwargs):
    """A test that runs another test's binary on a GPU executor, strictly.

    The binary is built as `test` (a cc_test or go_test whose CUDA tests skip where there is
    no GPU) and run by //tools:gpu_test.sh, which fails on any skipped test, on "no tests to
    run" and on a nonzero exit, as the device check does. The wrapper's only action is the
    test itself, so its exec_properties (LOOM_GPU_EXEC_PROPERTIES; Bazel 4 applies a target's
    exec_properties to all of its actions) send only the run to a GPU worker: compiling and
    linking stay on CPU workers. NVRTC is a declared input (NVRTC_DATA, NVRTC_ENV); the NVIDIA
    driver (libcuda.so.1) is the executor's.

    Args:
      name: the target.
      test: the label of the test whose binary runs.
      args: the binary's arguments (a go_test: -test.run=... -test.v; without -test.v a
        skipped Go test would not show).
      size: the test size.
      env: more environment for the binary (NVRTC_ENV and LOOM_REQUIRE_NVRTC=1 are always set).
      tags: more tags (LOOM_GPU_TAGS are always added).
      **kwargs: other sh_test attributes (timeout, ...).
    """
    env = dict(env)
    env.update(NVRTC_ENV)
    env["LOOM_REQUIRE_NVRTC"] = "1"
    native.sh_test(
        name = name,
        srcs = ["//tools:gpu_test.sh"],
        args = ["$(rootpath %s)" % test] + args,
        data = [test] + NVRTC_DATA,
        env = env,
        size = size,
        tags = LOOM_GPU_TAGS + tags,
        exec_properties = LOOM_GPU_EXEC_PROPERTIES,
        **kwargs
    )
