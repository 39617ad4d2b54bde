"""Loom's pinned toolchains, for //:WORKSPACE after loom_repositories() (docs/bazel.md,
"Pinned toolchains"):

  - the Go SDK: Go 1.26.8 as the go command's GOTOOLCHAIN mechanism fetches it, the module
    golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64 from the Go module proxy, its h1: sum
    pinned in //third_party:go.sum (never in a go.mod), wrapped for rules_go as @go_sdk;
  - the C/C++ toolchain: zig's `zig cc` from the PyPI wheel ziglang, pinned by sha256
    (//third_party:zig_toolchain.bzl), registered for x86-64 Linux.

`--repo_env=LOOM_GO_SDK=host` (.bazelrc: --config=hostgo) puts a copy of the machine's Go
($GOROOT, else `go env GOROOT` of the go on PATH) in place of the pinned one, for local
experiments with another Go.
"""

load("@bazel_tools//tools/build_defs/repo:utils.bzl", "maybe")
load("@io_bazel_rules_go//go:deps.bzl", "go_wrap_sdk")
load(":go_module.bzl", "go_toolchain_module")
load(":zig_toolchain.bzl", "zig_toolchain")

def _host_goroot(ctx):
    goroot = ctx.os.environ.get("GOROOT", "")
    if goroot:
        return goroot
    go = ctx.which("go")
    if not go:
        fail("loom_go_sdk_root %s: LOOM_GO_SDK=host, but GOROOT is unset and no go is on PATH" % ctx.name)
    result = ctx.execute([go, "env", "GOROOT"], environment = {"GOTOOLCHAIN": "local"})
    if result.return_code != 0 or not result.stdout.strip():
        fail("loom_go_sdk_root %s: go env GOROOT failed: %s" % (ctx.name, result.stderr))
    return result.stdout.strip()

def _run(ctx, args, what):
    result = ctx.execute(args, quiet = True)
    if result.return_code != 0:
        fail("loom_go_sdk_root %s: %s failed (exit %d): %s%s" %
             (ctx.name, what, result.return_code, result.stdout, result.stderr))

def _loom_go_sdk_root_impl(ctx):
    mode = ctx.os.environ.get("LOOM_GO_SDK", "pinned")
    if mode == "pinned":
        # @loom_go: the toolchain module, fetched and verified by go_toolchain_module.
        source = str(ctx.path(ctx.attr.pinned).dirname)
    elif mode == "host":
        source = _host_goroot(ctx)
    else:
        fail("loom_go_sdk_root %s: LOOM_GO_SDK=%r: want pinned (the default) or host" % (ctx.name, mode))

    # A copy, not links: actions then read nothing outside the output base (the module cache
    # and /usr/local stay out of the sandbox).
    _run(ctx, ["cp", "-R", source + "/.", "goroot"], "copying the Go SDK")
    _run(ctx, ["chmod", "-R", "u+w", "goroot"], "chmod")
    if mode == "pinned":
        # Module zips keep no file modes; the go command sets these on a toolchain it fetches.
        _run(ctx, ["find", "goroot/bin", "goroot/pkg/tool", "-type", "f", "-exec", "chmod", "+x", "{}", "+"], "chmod +x")
    version = ctx.execute(["goroot/bin/go", "version"], environment = {"GOTOOLCHAIN": "local", "GOROOT": str(ctx.path("goroot"))})
    if version.return_code != 0:
        fail("loom_go_sdk_root %s: goroot/bin/go version failed: %s" % (ctx.name, version.stderr))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name, executable = False)
    ctx.file("BUILD.bazel", "# The GOROOT of @go_sdk (%s: %s).\nexports_files([\"goroot/VERSION\"])\n" %
                            (mode, version.stdout.strip()), executable = False)

loom_go_sdk_root = repository_rule(
    implementation = _loom_go_sdk_root_impl,
    attrs = {
        "pinned": attr.label(default = Label("@loom_go//:goroot/VERSION"), doc = "A file at the root of the pinned GOROOT."),
    },
    environ = ["LOOM_GO_SDK", "GOROOT"],
    doc = "A Go SDK's GOROOT (under goroot/): the pinned toolchain module, or the host's Go.",
)

def loom_toolchains():
    """Declares and registers Loom's pinned toolchains: @go_sdk (Go 1.26.8) and @loom_zig (zig cc).

    Call it after loom_repositories() and go_rules_dependencies(). The C/C++ toolchain is
    chosen by toolchain resolution, which Bazel 4 uses for C++ only with
    --incompatible_enable_cc_toolchain_resolution (Loom's .bazelrc sets it).
    """
    maybe(go_toolchain_module, name = "loom_go")  # declared by loom_rules() already
    loom_go_sdk_root(name = "loom_go_sdk_root")
    go_wrap_sdk(name = "go_sdk", root_file = "@loom_go_sdk_root//:goroot/VERSION")
    zig_toolchain(name = "loom_zig")
    native.register_toolchains("@loom_zig//:cc_toolchain")
