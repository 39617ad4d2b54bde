// Package shimhash keeps go/native/internal/cabi in step with the shim's sources.
//
// cabi compiles the shim from source through #include of files outside its directory
// (shim_amalgamation.cc), and the go command's build cache does not see those files: after a
// change to shim/, `go build` and `go test` would link the old shim from the cache, silently.
// cabi therefore carries the SHA-256 of the shim's sources in a generated file
// (shim_sources.go), whose change makes the go command rebuild it. This package's test fails
// while that hash is stale, saying how to regenerate it:
//
//	go test ./go/native/internal/shimhash -update
package shimhash
