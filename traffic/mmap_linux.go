package traffic

import (
	"os"
	"syscall"
)

// mapFile maps a file read-only; the pages come from the page cache as
// they are touched, read ahead sequentially.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	if int64(int(size)) != size {
		return nil, nil, syscall.EFBIG
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	return data, func() { _ = syscall.Munmap(data) }, nil
}
