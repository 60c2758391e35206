package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"headroom.dev/headroom/doctor"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// Input is one piece of evidence for the doctor, opened when it is read.
type Input struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// Errors of Diagnose that the caller words for its own front end.
var (
	ErrNoEvidence        = errors.New("no evidence")
	ErrNothingRecognised = errors.New("nothing recognised")
)

// Diagnose reads the inputs, one after the other, and diagnoses them with
// the request's settings and GPU where it names them (they override what
// the evidence shows). Every error is bad input.
func Diagnose(ctx context.Context, env Env, req Request, policy string, inputs []Input) (doctor.Diagnosis, error) {
	opt := doctor.Options{Policy: policy}
	if len(req.Command) > 0 || req.Model != "" || len(req.Flags) > 0 {
		set, err := Settings(req)
		if err != nil {
			return doctor.Diagnosis{}, err
		}
		opt.Settings, opt.HasSettings = set, true
	}
	if req.Version != "" {
		v, err := vllm.ParseRelease(req.Version)
		if err != nil {
			return doctor.Diagnosis{}, err
		}
		opt.Version = v
	}
	if req.GPU != "" || req.GPUMemory != "" {
		sel, err := ResolveGPU(req.GPU, req.GPUMemory, req.GPUCount)
		if err != nil {
			return doctor.Diagnosis{}, err
		}
		opt.GPU, opt.HasGPU = sel, true
	} else if req.GPUCount < 0 {
		return doctor.Diagnosis{}, fmt.Errorf("--gpu-count must be positive")
	}
	opt.ResolveModel = func(ref string) (model.Spec, error) { return ResolveModel(ctx, env, ref, req.Offline) }
	if len(inputs) == 0 && !opt.HasSettings {
		return doctor.Diagnosis{}, ErrNoEvidence
	}
	ev, err := doctor.NewEvidence(traffic.Options{Window: traffic.DefaultWindow})
	if err != nil {
		return doctor.Diagnosis{}, err
	}
	for _, in := range inputs {
		if err := readInput(ctx, ev, in); err != nil {
			return doctor.Diagnosis{}, err
		}
	}
	if len(inputs) > 0 && ev.Empty() && !opt.HasSettings {
		return doctor.Diagnosis{}, ErrNothingRecognised
	}
	return doctor.Diagnose(ev, opt), nil
}

// maxInputFiles bounds the files read from directories.
const maxInputFiles = 10_000

// FileInputs is the evidence in files: a directory gives its files
// (sorted, hidden ones skipped, up to maxInputFiles), "-" reads stdin.
// A path that cannot be read is an error naming it.
func FileInputs(paths []string, stdin io.Reader) ([]Input, error) {
	var out []Input
	for _, a := range paths {
		if a == "-" {
			out = append(out, Input{Name: "stdin", Open: func() (io.ReadCloser, error) { return io.NopCloser(stdin), nil }})
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", a, FileError(err))
		}
		if !st.IsDir() {
			out = append(out, fileInput(a))
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case p != a && strings.HasPrefix(d.Name(), ".") && d.IsDir():
				return filepath.SkipDir
			case p != a && strings.HasPrefix(d.Name(), "."):
			case d.Type().IsRegular():
				if found = append(found, p); len(found) > maxInputFiles {
					return fmt.Errorf("more than %d files", maxInputFiles)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %v", a, FileError(err))
		}
		sort.Strings(found)
		for _, p := range found {
			out = append(out, fileInput(p))
		}
	}
	return out, nil
}

// fileInput opens p when the doctor reads it.
func fileInput(p string) Input {
	return Input{Name: p, Open: func() (io.ReadCloser, error) {
		fh, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p, FileError(err))
		}
		return fh, nil
	}}
}

func readInput(ctx context.Context, ev *doctor.Evidence, in Input) error {
	r, err := in.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	return ev.Read(ctx, in.Name, r)
}
