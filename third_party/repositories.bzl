"""All external repositories of the Loom workspace, for //:WORKSPACE.

Nothing here downloads from a code host: Bazel's own dependencies come from
Debian's packages, rules_go and the Go modules from the Go module proxy,
checked against //third_party:go.sum, and NVRTC from its PyPI wheel, checked
against its sha256.
"""

load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")
load("@bazel_tools//tools/build_defs/repo:utils.bzl", "maybe")
load(":debian_archive.bzl", "debian_archive")
load(":go_module.bzl", "go_module", "go_toolchain_module")
load(":local_repositories.bzl", "DEBIAN_BAZEL", "coverage_tools_stub", "debian_rules_cc")

# Every label below is a Label(), so that it names a file of Loom's repository also when these
# macros run from another workspace's WORKSPACE (where a string label would name the caller's
# own files; docs/bazel.md, "Depending on Loom from another workspace"). Every repository is
# declared with maybe(): one the calling workspace declared first (its own rules_go, its own
# testify) is kept.

def loom_repositories():
    """Declares every external repository except the Go SDK: loom_rules(), then loom_dependencies()."""
    loom_rules()
    loom_dependencies()

def loom_rules():
    """Declares the pinned Go toolchain that fetches every Go module (@loom_go), and the rule
    sets: rules_cc, rules_java, rules_proto, bazel_skylib from Debian's
    bazel-* packages, a remote_coverage_tools stub, and rules_go v0.34.0 patched for Go 1.26.

    A workspace that owns these (its own rules_go, say) declares them before calling
    loom_repositories(), or calls loom_dependencies() alone.
    """
    # The pinned Go toolchain first: every go_module below is downloaded by its go command.
    maybe(go_toolchain_module, name = "loom_go")
    maybe(debian_rules_cc, name = "rules_cc")
    maybe(native.local_repository, name = "rules_java", path = DEBIAN_BAZEL + "/rules/java")
    maybe(native.local_repository, name = "rules_proto", path = DEBIAN_BAZEL + "/rules/proto")
    maybe(native.local_repository, name = "bazel_skylib", path = DEBIAN_BAZEL + "/tools/skylib")
    maybe(coverage_tools_stub, name = "remote_coverage_tools")

    # rules_go v0.34.0 is the newest release that Bazel 4.2.3 can load; the
    # patch adapts it to Go 1.26 (see third_party/README.md).
    maybe(
        go_module,
        name = "io_bazel_rules_go",
        importpath = "github.com/bazelbuild/rules_go",
        version = "v0.34.0",
        keep_build_files = True,
        patches = [Label("//third_party/rules_go:rules_go.patch")],
    )

def loom_dependencies():
    """Declares what Loom's targets depend on beyond the rule sets: the Go modules (verified
    against Loom's //third_party:go.sum), NVRTC and the ONNX node tests (the last two only
    fetched by the tests that use them). Each is skipped when the workspace declared it already."""

    # Go modules, with gazelle-style repository names; the versions match
    # the go.mod files of the Go modules in this repository.
    _module("com_github_stretchr_testify", "github.com/stretchr/testify", "v1.11.1")
    _module("com_github_davecgh_go_spew", "github.com/davecgh/go-spew", "v1.1.1")
    _module("com_github_pmezard_go_difflib", "github.com/pmezard/go-difflib", "v1.0.0")
    _module("in_gopkg_yaml_v3", "gopkg.in/yaml.v3", "v3.0.1")
    _module("org_golang_x_exp", "golang.org/x/exp", "v0.0.0-20261113113407-e3970619a1a4")
    _module("org_golang_x_sys", "golang.org/x/sys", "v0.50.0")
    _module("org_golang_google_protobuf", "google.golang.org/protobuf", "v1.36.12")

    # go/session's DFT and STFT: gonum's FFT (dsp/fourier and its fftpack only).
    _module("org_gonum_v1_gonum", "gonum.org/v1/gonum", "v0.17.0")

    # go/session's ImageDecoder: x/image's BMP, TIFF and WebP decoders (and what they import).
    # v0.46.0: the newest whose go.mod keeps x/text at the v0.42.0 pinned for go/serve.
    _module("org_golang_x_image", "golang.org/x/image", "v0.46.0")

    # The loom command's progress bar and its dependencies.
    _module("com_github_schollz_progressbar_v3", "github.com/schollz/progressbar/v3", "v3.19.1")
    _module("com_github_mitchellh_colorstring", "github.com/mitchellh/colorstring", "v0.0.0-20190213212951-d06e56a500db")
    _module("com_github_rivo_uniseg", "github.com/rivo/uniseg", "v0.4.7")
    _module("org_golang_x_term", "golang.org/x/term", "v0.44.0")

    # OpenTelemetry tracing of InferenceSession runs (go/session) and its
    # dependencies; the SDK and google/uuid only for go/session's tests.
    # v1.45.0: the newest release whose go.mod keeps testify at v1.11.1.
    _module("io_opentelemetry_go_otel", "go.opentelemetry.io/otel", "v1.45.0")
    _module("io_opentelemetry_go_otel_trace", "go.opentelemetry.io/otel/trace", "v1.45.0")
    _module("io_opentelemetry_go_otel_metric", "go.opentelemetry.io/otel/metric", "v1.45.0")
    _module("io_opentelemetry_go_otel_sdk", "go.opentelemetry.io/otel/sdk", "v1.45.0")
    _module("io_opentelemetry_go_auto_sdk", "go.opentelemetry.io/auto/sdk", "v1.2.1")
    _module("com_github_go_logr_logr", "github.com/go-logr/logr", "v1.4.4")
    _module("com_github_go_logr_stdr", "github.com/go-logr/stdr", "v1.2.2")
    _module("com_github_cespare_xxhash_v2", "github.com/cespare/xxhash/v2", "v2.3.0")
    _module("com_github_google_uuid", "github.com/google/uuid", "v1.6.0")

    # `loom serve` (go/serve): the Open Inference Protocol's gRPC service and Prometheus
    # metrics, and their dependencies; kylelemons/godebug only for client_golang's testutil.
    _module("org_golang_google_grpc", "google.golang.org/grpc", "v1.85.0")
    _module("org_golang_google_genproto_googleapis_rpc", "google.golang.org/genproto/googleapis/rpc", "v0.0.0-20260817212433-ac3dfec99bb1")
    _module("org_golang_x_net", "golang.org/x/net", "v0.60.0")
    _module("org_golang_x_text", "golang.org/x/text", "v0.42.0")
    _module("com_github_prometheus_client_golang", "github.com/prometheus/client_golang", "v1.24.0")
    _module("com_github_prometheus_client_model", "github.com/prometheus/client_model", "v0.6.2")
    _module("com_github_prometheus_common", "github.com/prometheus/common", "v0.70.0")
    _module("com_github_prometheus_procfs", "github.com/prometheus/procfs", "v0.21.1")
    _module("com_github_beorn7_perks", "github.com/beorn7/perks", "v1.0.1")
    _module("com_github_munnerz_goautoneg", "github.com/munnerz/goautoneg", "v0.0.0-20191010083416-a7dc8b61c822")
    _module("com_github_kylelemons_godebug", "github.com/kylelemons/godebug", "v1.1.0")

    # NVRTC for the tests that compile CUDA C (//shim:compile_test, go/native's, and the GPU
    # tests): a declared input (//third_party/nvrtc:BUILD.nvrtc.bazel). tools/cuda/fetch.sh
    # reads NVRTC_WHEEL_SHA256 from here, so the go.work build uses the same wheel. A wheel is a
    # zip.
    maybe(
        http_archive,
        name = "nvrtc",
        urls = [NVRTC_WHEEL_URL],
        sha256 = NVRTC_WHEEL_SHA256,
        type = "zip",
        build_file = Label("//third_party/nvrtc:BUILD.nvrtc.bazel"),
    )

    # The ONNX node tests (Debian's libonnx-testdata) for go/session's conformance tests: a
    # declared input (//third_party/onnx_node_tests:BUILD.onnx_node_tests.bazel).
    maybe(
        debian_archive,
        name = "onnx_node_tests",
        urls = ["http://deb.debian.org/debian/pool/main/o/onnx/libonnx-testdata_1.12.0-2_all.deb"],
        sha256 = "7dc0912e02f79ece102331411a751b091bc0e191c9fb1287f8cdfbe5530f6027",
        strip_prefix = "usr/share/libonnx-testdata/data",
        build_file = Label("//third_party/onnx_node_tests:BUILD.onnx_node_tests.bazel"),
    )

# nvidia-cuda-nvrtc-cu12 12.9.86, manylinux x86-64 (https://pypi.org/simple/nvidia-cuda-nvrtc-cu12/).
NVRTC_WHEEL_URL = "https://files.pythonhosted.org/packages/b8/85/e4af82cc9202023862090bfca4ea827d533329e925c758f0cde964cb54b7/nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl"
NVRTC_WHEEL_SHA256 = "210cf05005a447e29214e9ce50851e83fc5f4358df8b453155d5e1918094dcb4"

def _module(name, importpath, version):
    maybe(
        go_module,
        name = name,
        importpath = importpath,
        version = version,
        build_files = Label("//third_party/go_modules:%s/MANIFEST" % name),
    )
