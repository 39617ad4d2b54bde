// Package all links every shipped kernel package (kernels/aot/gen/...) into a binary.
package all
