//go:build !unix

package platform

import (
	"errors"
	"os"
)

// MmapCodeFile is not supported here: callers copy the code instead.
func MmapCodeFile(*os.File, int64, int) (mapping, code []byte, err error) {
	return nil, nil, errors.New("mapping code from a file is not supported on this platform")
}
