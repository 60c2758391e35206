//go:build !linux

package traffic

import (
	"errors"
	"os"
)

// mapFile is not used outside Linux: files are read through Read.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	return nil, nil, errors.New("no memory mapping on this platform")
}
