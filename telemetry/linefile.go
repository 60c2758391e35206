package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// LineFile appends lines to a file so that no reader ever sees a torn
// line: each line goes out in one write(2) on a file opened O_APPEND, which
// the kernel places whole at the end even with other appenders. A process
// killed mid-run leaves whole lines; if the file was cut some other way
// (disk full, power loss) and does not end in '\n', opening it adds one,
// so the damaged line stays alone on its line.
//
// That check needs a lock: while another appender's write(2) is copying a
// line, the file's size can already stand inside it, and a '\n' added then
// lands after the line as an empty one (or the header goes in twice). So
// every appender holds an advisory lock (flock(2)) around each write and
// around the check, which then sees only whole lines of other appenders
// and a torn end only where a writer is gone.
//
// With MaxBytes set the file is rotated before a line would take it past
// the limit: path.1 is the newest old file, path.Keep the oldest. Rotation
// assumes a single writer; concurrent appenders are safe without it.
type LineFile struct {
	path     string
	f        *os.File
	size     int64
	maxBytes int64
	keep     int
	header   []byte
	regular  bool // a regular file: locked, read back and rotated
}

// LineFileOptions configure OpenLineFile.
type LineFileOptions struct {
	// MaxBytes rotates the file before it grows past this size; 0 never rotates.
	MaxBytes int64
	// Keep is how many rotated files to keep (path.1 ... path.Keep); 0
	// drops the old data at rotation.
	Keep int
	// Header is written first into every new or empty file (a CSV header).
	Header []byte
}

// OpenLineFile opens path for appending, creating it if needed.
func OpenLineFile(path string, opt LineFileOptions) (*LineFile, error) {
	if opt.MaxBytes < 0 || opt.Keep < 0 {
		return nil, fmt.Errorf("line file %s: size limit and kept files must not be negative", path)
	}
	if len(opt.Header) > 0 && opt.Header[len(opt.Header)-1] != '\n' {
		opt.Header = append(append([]byte{}, opt.Header...), '\n')
	}
	l := &LineFile{path: path, maxBytes: opt.MaxBytes, keep: opt.Keep, header: opt.Header}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *LineFile) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot append to %s: %v", l.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("cannot append to %s: %v", l.path, err)
	}
	if !st.Mode().IsRegular() {
		// A pipe or /dev/stdout: append, but never read back or rotate.
		l.f, l.size, l.maxBytes, l.regular = f, 0, 0, false
		return nil
	}
	l.f, l.regular = f, true
	unlock, err := lockFile(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("cannot lock %s: %v", l.path, err)
	}
	defer unlock()
	// The size under the lock: another appender may have written since Stat.
	if st, err = f.Stat(); err != nil {
		f.Close()
		return fmt.Errorf("cannot append to %s: %v", l.path, err)
	}
	l.size = st.Size()
	if l.size == 0 {
		if len(l.header) > 0 {
			return l.write(l.header)
		}
		return nil
	}
	last, err := lastByte(l.path, l.size)
	if err != nil {
		return err
	}
	if last != '\n' {
		return l.write([]byte{'\n'})
	}
	return nil
}

func lastByte(path string, size int64) (byte, error) {
	r, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("cannot read %s: %v", path, err)
	}
	defer r.Close()
	var b [1]byte
	if _, err := r.ReadAt(b[:], size-1); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("cannot read %s: %v", path, err)
	}
	return b[0], nil
}

// write appends b in one write(2); on a regular file the caller holds the
// lock.
func (l *LineFile) write(b []byte) error {
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("writing %s: %v", l.path, err)
	}
	return nil
}

// WriteLine appends one line. line must hold no '\n' except an optional
// last one, which is added when missing.
func (l *LineFile) WriteLine(line []byte) error {
	body := bytes.TrimSuffix(line, []byte{'\n'})
	if bytes.IndexByte(body, '\n') >= 0 {
		return fmt.Errorf("writing %s: a record spans several lines", l.path)
	}
	out := make([]byte, 0, len(body)+1)
	out = append(append(out, body...), '\n')
	if l.maxBytes > 0 && l.size > int64(len(l.header)) && l.size+int64(len(out)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	if !l.regular {
		return l.write(out)
	}
	unlock, err := lockFile(l.f)
	if err != nil {
		return fmt.Errorf("cannot lock %s: %v", l.path, err)
	}
	defer unlock()
	return l.write(out)
}

// rotate shifts path.i to path.i+1, path to path.1, and starts path anew.
func (l *LineFile) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %v", l.path, err)
	}
	name := func(i int) string { return l.path + "." + strconv.Itoa(i) }
	if l.keep == 0 {
		if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotating %s: %v", l.path, err)
		}
	} else {
		if err := os.Remove(name(l.keep)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotating %s: %v", l.path, err)
		}
		for i := l.keep - 1; i >= 1; i-- {
			if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("rotating %s: %v", l.path, err)
			}
		}
		if err := os.Rename(l.path, name(1)); err != nil {
			return fmt.Errorf("rotating %s: %v", l.path, err)
		}
	}
	return l.open()
}

// Close closes the file.
func (l *LineFile) Close() error { return l.f.Close() }

// AppendJSON appends v as one JSON line to path, creating it and its
// directory: a record of a file that several runs append to (the probe's
// calibration records, loadtest's step calibrations), whole even when they
// run at the same time.
func AppendJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	lf, err := OpenLineFile(path, LineFileOptions{})
	if err != nil {
		return err
	}
	if err := lf.WriteLine(b); err != nil {
		lf.Close()
		return err
	}
	return lf.Close()
}
