"""debian_archive: a Debian package's files as a repository (Bazel 4.2.3's http_archive cannot
extract a .deb).

The rule downloads the .deb from the Debian archive (URL and sha256 pinned), unpacks its
data.tar.* with `ar` (binutils) and Bazel's own extractor, and writes the BUILD file given.
Only the repository rule touches the network; actions read the extracted files as inputs.
"""

def _debian_archive_impl(ctx):
    ctx.download(url = ctx.attr.urls, output = "package.deb", sha256 = ctx.attr.sha256)
    result = ctx.execute(["ar", "x", "package.deb"])
    if result.return_code != 0:
        fail("debian_archive %s: ar x: %s (binutils' ar is needed)" % (ctx.name, result.stderr))
    data = None
    for name in ["data.tar.xz", "data.tar.gz", "data.tar.zst", "data.tar"]:
        if ctx.path(name).exists:
            data = name
            break
    if data == None:
        fail("debian_archive %s: the package has no data.tar.*" % ctx.name)
    ctx.extract(data, stripPrefix = ctx.attr.strip_prefix)
    ctx.execute(["rm", "-f", "package.deb", "control.tar.xz", "control.tar.gz", "debian-binary", data])
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name, executable = False)
    ctx.file("BUILD.bazel", ctx.read(ctx.attr.build_file), executable = False)

debian_archive = repository_rule(
    implementation = _debian_archive_impl,
    attrs = {
        "urls": attr.string_list(mandatory = True),
        "sha256": attr.string(mandatory = True),
        "strip_prefix": attr.string(),
        "build_file": attr.label(mandatory = True, allow_single_file = True),
    },
    doc = "A Debian package's data files, downloaded by URL and verified by sha256.",
)
