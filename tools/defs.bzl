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

def filegroup(**kwargs):
    """Bazel's filegroup, re-exported so BUILD files load every rule from here."""
    native.filegroup(**kwargs)
