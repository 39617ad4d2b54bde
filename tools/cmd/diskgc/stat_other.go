//go:build !linux

package main

import (
	"io/fs"
	"time"
)

// accessTime is the file's modification time: access times are read on Linux only.
func accessTime(info fs.FileInfo) time.Time { return info.ModTime() }

// freeSpace is not known off Linux.
func freeSpace(string) (int64, bool) { return 0, false }

// sameFS is not known off Linux.
func sameFS(a, b string) bool { return false }
