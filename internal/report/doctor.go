package report

import (
	"context"
	"errors"
	"fmt"
	"io"

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
		v, err := vllm.ParseVersion(req.Version)
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

func readInput(ctx context.Context, ev *doctor.Evidence, in Input) error {
	r, err := in.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	return ev.Read(ctx, in.Name, r)
}
