module github.com/loomrt/loom/kernels

go 1.26.0
