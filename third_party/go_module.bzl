"""go_module: an external repository made from a Go module.

The module comes from the Go module proxy through `go mod download`, run by
the pinned Go toolchain (@loom_go, go_toolchain_module below, itself fetched
from the proxy and verified by sha256 and by its own go command), which also
checks it against the Go checksum database; its h1: sum must then equal the
one pinned in //third_party:go.sum. No go command of the machine's is run.
BUILD files come from this repository (see third_party/README.md), so nothing
downloaded is trusted to describe its own build, unless keep_build_files is
set (rules_go).
"""

_GO_SUM = "//third_party:go.sum"

# Names that a module may carry but that would change the meaning of the
# repository in Bazel: they are deleted unless keep_build_files is set.
_BUILD_FILE_NAMES = ("BUILD", "BUILD.bazel", "WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel")

# The Go toolchain that fetches every module, and that //third_party:toolchains.bzl builds with:
# the module golang.org/toolchain at this version, as the go command's GOTOOLCHAIN mechanism
# fetches it. Its h1: sum is pinned in //third_party:go.sum like every other module's; the
# sha256 of its zip pins the download itself (and keys it in Bazel's repository cache).
GO_TOOLCHAIN_MODULE = "golang.org/toolchain"

GO_TOOLCHAIN_VERSION = "v0.0.1-go1.26.8.linux-amd64"

GO_TOOLCHAIN_ZIP_SHA256 = "30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7"

# The go command of @loom_go (go_toolchain_module, declared first by loom_rules()): every
# module is downloaded and verified by the pinned Go, never by the machine's.
_GO = Label("@loom_go//:goroot/bin/go")

def _go_environment(go):
    """The environment of a `go mod download` run by go (a path): the pinned GOROOT, modules
    mode outside any workspace, no toolchain switch."""
    return {
        "GOROOT": str(go.dirname.dirname),
        "GOFLAGS": "-mod=mod",
        "GOWORK": "off",
        "GOTOOLCHAIN": "local",
    }

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
    go = ctx.path(_GO)
    want = pinned_sum(ctx, ctx.path(Label(_GO_SUM)), importpath, version)
    return _go_mod_download(ctx, go, importpath, version, want, _go_environment(go))["Dir"]

def _go_mod_download(ctx, go, importpath, version, want, environment):
    """Runs go (a path) `mod download -json importpath@version` with environment, checks the
    module's h1: sum against want, and returns the go command's JSON as a dict."""
    module = "%s@%s" % (importpath, version)
    result = ctx.execute(
        [go, "mod", "download", "-json", module],
        environment = environment,
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
    return info

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
    ctx.path(_GO)

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
    environ = ["GOPROXY", "GONOSUMDB", "GOPRIVATE", "GOMODCACHE"],
    doc = "An external repository holding one Go module, verified against //third_party:go.sum.",
)

def _proxy_url(ctx):
    """The first HTTP(S) proxy of $GOPROXY (the go command's default: proxy.golang.org)."""
    for entry in ctx.os.environ.get("GOPROXY", "").replace("|", ",").split(","):
        entry = entry.strip()
        if entry.startswith("https://") or entry.startswith("http://"):
            return entry.rstrip("/")
    return "https://proxy.golang.org"

def _go_toolchain_module_impl(ctx):
    sum_file = ctx.path(Label(_GO_SUM))
    module, version = ctx.attr.module, ctx.attr.version
    want = pinned_sum(ctx, sum_file, module, version)

    # 1. The module's zip from the proxy, as the go command downloads it, checked by sha256.
    zip_name = "%s.zip" % version
    proxy_dir = "proxy/%s/@v" % module
    ctx.report_progress("Downloading %s@%s from the Go module proxy" % (module, version))
    ctx.download(
        url = ["%s/%s/@v/%s" % (_proxy_url(ctx), module, zip_name)],
        output = proxy_dir + "/" + zip_name,
        sha256 = ctx.attr.sha256,
    )
    ctx.file(proxy_dir + "/%s.mod" % version, "module %s\n" % module, executable = False)
    ctx.file(proxy_dir + "/%s.info" % version, json.encode({"Version": version}) + "\n", executable = False)

    # 2. Its go command, unpacked on the side, fetches it once more from that directory into a
    #    module cache of its own: the go command itself unpacks it and computes its h1: sum,
    #    which must be the one pinned in //third_party:go.sum. No machine Go takes part.
    ctx.extract(proxy_dir + "/" + zip_name, output = "bootstrap", stripPrefix = "%s@%s" % (module, version))
    _run(ctx, ["chmod", "-R", "u+x", "bootstrap/bin", "bootstrap/pkg/tool"], "chmod +x")
    boot = ctx.path("bootstrap/bin/go")
    environment = _go_environment(boot)
    environment.update({
        "GOPROXY": "file://%s" % ctx.path("proxy"),
        "GOSUMDB": "off",
        "GOMODCACHE": str(ctx.path("modcache")),
    })
    info = _go_mod_download(ctx, boot, module, version, want, environment)

    # 3. What the go command unpacked is the GOROOT; module zips keep no file modes, so bin/ and
    #    pkg/tool/ are made executable, as the go command does for a toolchain it fetches.
    _run(ctx, ["chmod", "-R", "u+w", "modcache"], "chmod")
    _run(ctx, ["mv", info["Dir"], "goroot"], "moving the module")
    _run(ctx, ["find", "goroot/bin", "goroot/pkg/tool", "-type", "f", "-exec", "chmod", "+x", "{}", "+"], "chmod +x")
    _run(ctx, ["rm", "-rf", "bootstrap", "modcache", "proxy"], "cleaning up")
    result = ctx.execute(["goroot/bin/go", "version"], environment = {"GOTOOLCHAIN": "local", "GOROOT": str(ctx.path("goroot"))})
    release = version.split("-")[1]  # go1.26.8.linux
    want_version = "go version %s " % release[:release.rfind(".")]
    if result.return_code != 0 or not result.stdout.startswith(want_version):
        fail("go_toolchain_module %s: goroot/bin/go version printed %r (exit %d), want %r...: %s" %
             (ctx.name, result.stdout, result.return_code, want_version, result.stderr))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name, executable = False)
    ctx.file("BUILD.bazel", "# The pinned Go toolchain (%s): %s@%s, h1: %s.\nexports_files([\"goroot/VERSION\", \"goroot/bin/go\"])\n" %
                            (result.stdout.strip(), module, version, want), executable = False)

go_toolchain_module = repository_rule(
    implementation = _go_toolchain_module_impl,
    attrs = {
        "module": attr.string(default = GO_TOOLCHAIN_MODULE),
        "version": attr.string(default = GO_TOOLCHAIN_VERSION),
        "sha256": attr.string(default = GO_TOOLCHAIN_ZIP_SHA256, doc = "The sha256 of the module's zip."),
    },
    environ = ["GOPROXY"],
    doc = "The Go toolchain module (GOROOT under goroot/), fetched from the Go module proxy " +
          "and verified by sha256 and by its own go command against //third_party:go.sum.",
)
