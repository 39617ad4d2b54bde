// Package deploy holds the test of Loom's deployment files in tools/deploy: the Containerfile
// of the `loom serve` image and the KServe manifests under kserve/ (a ClusterServingRuntime and
// example InferenceServices). There is no container daemon or cluster in the test, so it checks
// the files themselves: the image's stages (a cgo build, then a distroless final stage with no
// compiler, run as a non-root user, exposing the ports loom serve listens on), the manifests
// against the fields and types KServe's CRDs require, and every flag they pass to `loom serve`
// against the flags the built command accepts. The package has no code outside its test.
package deploy
