"""Local stand-ins for the repositories Bazel 4.2.3 would download.

The machines that build Loom reach Debian, the Go module proxy and npm only,
so rules_cc, rules_java, rules_proto and bazel_skylib come from Debian's
bazel-* packages (under /usr/share/bazel), and remote_coverage_tools is a
stub: `bazel coverage` is not supported.
"""

DEBIAN_BAZEL = "/usr/share/bazel"

# Debian's rules_cc (0.0.4) is newer than Bazel 4.2.3's @bazel_tools, which
# lacks use_cpp_toolchain; these rules find the C++ toolchain through their
# _cc_toolchain attribute, which is all Bazel 4 needs.
_USE_CPP_TOOLCHAIN_FILES = [
    "cc/private/rules_impl/cc_flags_supplier.bzl",
    "cc/private/rules_impl/compiler_flag.bzl",
]

def _missing_package(ctx, path, package):
    if not ctx.path(path).exists:
        fail("%s not found: install Debian's %s (apt-get install -y %s)" % (path, package, package))

def _debian_rules_cc_impl(ctx):
    source = ctx.attr.path
    _missing_package(ctx, source, "bazel-rules-cc")
    result = ctx.execute(["cp", "-R", source + "/.", "."])
    if result.return_code != 0:
        fail("copying %s: %s" % (source, result.stderr))
    ctx.execute(["chmod", "-R", "u+w", "."])
    for name in _USE_CPP_TOOLCHAIN_FILES:
        text = ctx.read(name)
        if "use_cpp_toolchain" not in text:
            continue
        text = text.replace(', "use_cpp_toolchain")', ")")
        lines = [
            line
            for line in text.split("\n")
            if "toolchains = use_cpp_toolchain()" not in line
        ]
        text = "\n".join(lines)
        if "use_cpp_toolchain" in text:
            fail("debian_rules_cc: cannot remove use_cpp_toolchain from %s" % name)
        ctx.file(name, text, executable = False)

    # Its WORKSPACE declares downloads; the repository needs only a name.
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name, executable = False)

debian_rules_cc = repository_rule(
    implementation = _debian_rules_cc_impl,
    attrs = {"path": attr.string(default = DEBIAN_BAZEL + "/rules/cc")},
    doc = "Debian's rules_cc, adapted to Bazel 4.2.3.",
)

def _coverage_tools_stub_impl(ctx):
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name, executable = False)
    ctx.file(
        "coverage_unsupported.sh",
        "#!/bin/sh\necho 'bazel coverage is not supported in this workspace (no remote_coverage_tools)' >&2\nexit 1\n",
        executable = True,
    )
    ctx.file("BUILD.bazel", """\
# Stand-in for the coverage tools Bazel downloads: test rules need the labels,
# and `bazel coverage` fails with a clear message.
package(default_visibility = ["//visibility:public"])

filegroup(
    name = "coverage_report_generator",
    srcs = ["coverage_unsupported.sh"],
)

filegroup(
    name = "lcov_merger",
    srcs = ["coverage_unsupported.sh"],
)
""", executable = False)

coverage_tools_stub = repository_rule(
    implementation = _coverage_tools_stub_impl,
    doc = "remote_coverage_tools without the download: coverage is unsupported.",
)
