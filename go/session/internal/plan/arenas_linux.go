package plan

import "golang.org/x/sys/unix"

// remapSlab grows a slab with mremap(2): its pages move with it, resident as they were.
func remapSlab(old []byte, size int) ([]byte, error) {
	return unix.Mremap(old, size, unix.MREMAP_MAYMOVE)
}
