// Package native is Loom's cgo layer over the shim's flat C ABI.
package native
