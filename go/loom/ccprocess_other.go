//go:build !unix

package loom

import "os/exec"

// ownProcessGroup leaves cmd as it is: process groups are a Unix notion (cancellation kills the
// driver only).
func ownProcessGroup(*exec.Cmd) {}
