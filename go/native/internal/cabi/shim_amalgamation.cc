// shim_amalgamation.cc: compiles the whole shim into package cabi for plain `go build` and
// `go test` (cgo compiles every .cc file of a package directory). This is the one list of the
// shim's sources on the Go side; keep it in step with shim/src.
//
// Bazel must not see this file: //go/native/internal/cabi leaves it out of srcs and links the
// shim through cdeps = ["//shim"] instead, so the shim is never compiled twice.
//
// The shim's sources are written to compile together as one translation unit (backend.h).
#include "../../../../shim/src/common.cc"
#include "../../../../shim/src/api.cc"
#include "../../../../shim/src/registry.cc"
#include "../../../../shim/src/host_backend.cc"
#include "../../../../shim/src/cuda_backend.cc"
