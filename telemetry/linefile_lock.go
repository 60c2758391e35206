//go:build unix && !aix

package telemetry

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes the advisory lock every LineFile appender takes around
// its writes and around the check of the file's last byte (flock(2): it
// holds between open files of one process and between processes, and goes
// with the process if it dies).
//
// A file system without flock (some NFS mounts answer ENOLCK) is appended
// to unlocked, as where flock(2) is missing, rather than not at all.
func lockFile(f *os.File) (unlock func(), err error) {
	if err := flock(f, unix.LOCK_EX); err != nil {
		if errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) {
			return func() {}, nil
		}
		return nil, err
	}
	return func() { flock(f, unix.LOCK_UN) }, nil
}

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = unix.Flock(int(fd), how); !errors.Is(ferr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
