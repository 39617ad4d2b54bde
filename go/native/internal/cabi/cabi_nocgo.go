//go:build !cgo

package cabi

// Loom's native layer is a C++ library reached through cgo. This file, built only without
// cgo, stops the build with a name that says what is missing, instead of the undefined names
// of the cgo code reported everywhere above it: build with CGO_ENABLED=1 and a C and C++
// compiler (gcc and g++) on the PATH.
const _ = Loom_needs_cgo__build_with_CGO_ENABLED_1_and_gcc_and_gxx
