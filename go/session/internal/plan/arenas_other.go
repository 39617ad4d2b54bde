//go:build !linux

package plan

import "errors"

// remapSlab: without mremap(2) a slab is mapped anew (mapSlab).
func remapSlab([]byte, int) ([]byte, error) { return nil, errors.New("no mremap") }
