package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// output is a file a command writes after its run (--plot, --keda,
// --hpa): made before the run, so a path that cannot be written is bad
// input at once, not after minutes of simulation whose result it loses.
type output struct {
	flag, name string
	// created: the file was not there before; one the run leaves
	// unwritten is removed again.
	created, written bool
}

// prepareOutput checks that name can be written, creating it empty when
// it is not there (an existing file keeps its content until written).
// nil for "": no output.
func prepareOutput(flag, name string) (*output, error) {
	if name == "" {
		return nil, nil
	}
	_, statErr := os.Stat(name)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, badInput("%s", pathError(flag, name, err))
	}
	if err := f.Close(); err != nil {
		return nil, badInput("%s", pathError(flag, name, err))
	}
	return &output{flag: flag, name: name, created: errors.Is(statErr, fs.ErrNotExist)}, nil
}

// write replaces the file's content with data.
func (o *output) write(data []byte) error {
	if err := os.WriteFile(o.name, data, 0o644); err != nil {
		return badInput("%s", pathError(o.flag, o.name, err))
	}
	o.written = true
	return nil
}

// discard removes a file prepareOutput created and nothing wrote (the
// run failed or was interrupted).
func (o *output) discard() {
	if o != nil && o.created && !o.written {
		os.Remove(o.name)
	}
}

// pathError is err on a file a flag names, with the path: "--hpa
// /nonexistent/h.yaml: no such file or directory".
func pathError(flag, name string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Sprintf("%s %s: %v", flag, name, err)
}
