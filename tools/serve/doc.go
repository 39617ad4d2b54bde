// Package serve holds the end-to-end tests of `loom serve` with real clients. Each test builds
// the loom command (or takes LOOM_BINARY) and starts it on free loopback ports:
//
//   - TestTritonClient runs Triton's own Python client (tritonclient, HTTP and gRPC;
//     tritonclient_check.py, from the pinned venv venv.sh creates) against a model repository of
//     MNIST and the tiny encoder (with dynamic batching), and compares what the client receives
//     with go/session's own runs of the same random inputs;
//   - TestCurlExample runs the curl request of docs/serving.md and checks its documented answer;
//   - TestServeDemo checks that `loom serve` with no model arguments serves the embedded MNIST
//     demo (its sample digits, demodata/digit*.npy, against their reference outputs).
//
// Environment: LOOM_TRITONCLIENT_PYTHON names the venv's python (default
// ~/.cache/loom-tritonclient/bin/python); without it TestTritonClient skips, unless
// LOOM_REQUIRE_TRITONCLIENT=1, which makes it fail. LOOM_BINARY names a prebuilt loom command
// to use instead of building one. The package has no code outside its tests.
package serve
