//go:build unix

package platform

import (
	"os"

	"golang.org/x/sys/unix"
)

// MmapCodeFile maps length bytes of f at offset read-only and executable
// (MAP_PRIVATE: a later change to the file is not seen). mapping is what
// MunmapCodeSegment releases; code is the requested range inside it, which
// need not be page-aligned in the file.
func MmapCodeFile(f *os.File, offset int64, length int) (mapping, code []byte, err error) {
	page := int64(os.Getpagesize())
	base := offset &^ (page - 1)
	skip := int(offset - base)
	mapping, err = unix.Mmap(int(f.Fd()), base, skip+length, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	return mapping, mapping[skip : skip+length : skip+length], nil
}
