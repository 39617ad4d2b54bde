// Package loom compiles Loom kernels: a small, Go-flavoured kernel language (see docs/loom.md)
// with a launch program that runs on the host and a device body that runs per thread.
//
// A Compiler turns a KernelSource (a .loom file, a kernel symbol and a specialization) into an
// Artifact for a Target: host C compiled to a shared object that exports
// loom_host_module_entries, or CUDA C for NVRTC. Artifacts carry what a runtime needs: the
// launch program (LaunchConfig evaluates it), the parameter and binding metadata (names, types,
// access modes), the scalar blob layout (PackScalars) and the code. Compiled artifacts are cached
// on disk, content-addressed by compiler version, source digest, symbol, target and
// specialization.
//
// The compiler's stages live in sub-packages in the manner of Go's own tooling: token, scanner,
// ast, parser, types (the checker), ir, passes and codegen.
package loom
