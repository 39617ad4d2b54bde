"""go_module: an external repository made from a Go module.

The module comes from the Go module proxy through `go mod download`, which
also checks it against the Go checksum database; its h1: sum must then equal
the one pinned in //third_party:go.sum. BUILD files come from this repository
(see third_party/README.md), so nothing downloaded is trusted to
describe its own build, unless keep_build_files is set (rules_go).
"""

_GO_SUM = "//third_party:go.sum"

# Names that a module may carry but that would change the meaning of the
# repository in Bazel: they are deleted unless keep_build_files is set.
_BUILD_FILE_NAMES = ("BUILD", "BUILD.bazel", "WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel")

def _go_binary(ctx):
    """Returns the go command: $GOROOT/bin/go, go on PATH, or /usr/local/go."""
    goroot = ctx.os.environ.get("GOROOT", "")
    if goroot:
        return ctx.path(goroot + "/bin/go")
    go = ctx.which("go")
    if go:
        return go
    fallback = ctx.path("/usr/local/go/bin/go")
    if fallback.exists:
        return fallback
    fail("go_module: no go command: set GOROOT or put go on PATH")

def pinned_sum(ctx, sum_file, importpath, version):
    """Returns the h1: sum pinned for importpath@version in sum_file."""
    for line in ctx.read(sum_file).splitlines():
        fields = [field for field in line.replace("\t", " ").split(" ") if field]
        if len(fields) == 3 and fields[0] == importpath and fields[1] == version:
            return fields[2]
    fail("go_module: %s has no sum for %s %s; add the line `go mod download -json` prints" %
         (sum_file, importpath, version))

def _run(ctx, args, what, **kwargs):
    result = ctx.execute(args, **kwargs)
    if result.return_code != 0:
        fail("go_module %s: %s failed (exit %d):\n%s%s" %
             (ctx.name, what, result.return_code, result.stdout, result.stderr))
    return result

def _download(ctx):
    return download_module(ctx, ctx.attr.importpath, ctx.attr.version)

def download_module(ctx, importpath, version):
    """Runs `go mod download` for importpath@version in a repository rule, checks the module's
    h1: sum against //third_party:go.sum, and returns the module's directory in the cache."""
    want = pinned_sum(ctx, ctx.path(Label(_GO_SUM)), importpath, version)
    module = "%s@%s" % (importpath, version)
    result = ctx.execute(
        [_go_binary(ctx), "mod", "download", "-json", module],
        environment = {
            "GOFLAGS": "-mod=mod",
            "GOWORK": "off",
            "GOTOOLCHAIN": "local",
        },
        timeout = 1200,
        quiet = True,
    )

    # On failure the go command still prints JSON, with the reason in Error.
    info = {}
    if result.stdout.strip().startswith("{"):
        info = json.decode(result.stdout)
    if result.return_code != 0 or info.get("Error"):
        fail("go_module %s: go mod download %s failed: %s%s" %
             (ctx.name, module, info.get("Error", ""), result.stderr))
    got = info.get("Sum", "")
    if got != want:
        fail("go_module %s: %s has sum %s, but //third_party:go.sum pins %s" %
             (ctx.name, module, got, want))
    return info["Dir"]

def _build_file_sources(ctx):
    """Returns {dest: path} for the BUILD.in files that build_files lists."""
    manifest = ctx.attr.build_files
    if not manifest:
        return {}
    manifest_dir = manifest.name.rpartition("/")[0]
    prefix = manifest_dir + "/" if manifest_dir else ""
    sources = {}
    for package in ctx.read(ctx.path(manifest)).splitlines():
        package = package.strip()
        if not package or package.startswith("#"):
            continue
        name = "BUILD.in" if package == "." else package + "/BUILD.in"
        dest = "BUILD.bazel" if package == "." else package + "/BUILD.bazel"

        # A label, not a path, so that editing the file refetches the module.
        sources[dest] = ctx.path(manifest.relative(":" + prefix + name))
    return sources

def _go_module_impl(ctx):
    # Resolve every label first: Bazel restarts a repository function each
    # time it resolves a label it has not seen, and a restart after the copy
    # below would repeat it, once per BUILD file.
    build_files = _build_file_sources(ctx)
    patches = [ctx.path(patch) for patch in ctx.attr.patches]
    ctx.path(Label(_GO_SUM))

    source_dir = _download(ctx)

    # The module cache is read-only: copy it, then make the copy writable so
    # that patches and BUILD files can be written.
    _run(ctx, ["cp", "-R", source_dir + "/.", "."], "copying the module")
    _run(ctx, ["chmod", "-R", "u+w", "."], "chmod")

    # Module zips do not keep file modes.
    _run(ctx, ["find", ".", "-name", "*.sh", "-exec", "chmod", "+x", "{}", "+"], "restoring +x on *.sh")

    if not ctx.attr.keep_build_files:
        args = ["find", ".", "-type", "f", "("]
        for i, name in enumerate(_BUILD_FILE_NAMES):
            if i:
                args.append("-o")
            args.extend(["-name", name])
        args.extend([")", "-delete"])
        _run(ctx, args, "deleting the module's own BUILD files")

    # GNU patch: Bazel 4's own patcher rejects some valid unified diffs.
    for patch in patches:
        _run(
            ctx,
            ["patch", "--batch", "--forward", "--silent"] + ctx.attr.patch_args + ["-i", patch],
            "patch %s" % patch.basename,
        )

    for dest, source in build_files.items():
        ctx.file(dest, ctx.read(source), executable = False)
    if not ctx.path("WORKSPACE").exists:
        ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name, executable = False)

go_module = repository_rule(
    implementation = _go_module_impl,
    attrs = {
        "importpath": attr.string(mandatory = True, doc = "The module path, e.g. github.com/stretchr/testify."),
        "version": attr.string(mandatory = True, doc = "The module version; its h1: sum must be in //third_party:go.sum."),
        "build_files": attr.label(
            allow_single_file = True,
            doc = "A MANIFEST listing the module's package directories ('.' for the root); " +
                  "each has a BUILD.in beside the manifest, written as that package's BUILD.bazel.",
        ),
        "keep_build_files": attr.bool(doc = "Keep the module's own BUILD and WORKSPACE files (a Bazel rule set)."),
        "patches": attr.label_list(allow_files = True, doc = "Patches applied with GNU patch after copying."),
        "patch_args": attr.string_list(default = ["-p1"]),
    },
    environ = ["GOROOT", "GOPROXY", "GONOSUMDB", "GOPRIVATE", "GOMODCACHE"],
    doc = "An external repository holding one Go module, verified against //third_party:go.sum.",
)
