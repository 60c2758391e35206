package memory

import (
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// ServedModel is the model as vLLM serves it with set's flags that change
// what it reads of the checkpoint: --hf-overrides and --rope-scaling set
// keys on its config.json, --disable-sliding-window makes every sliding
// layer keep the whole context and caps the context at the window, and
// --dtype, --mamba-cache-dtype and --mamba-ssm-cache-dtype set the
// linear-attention states' element size. Every front end (plan, the
// webhook, doctor) plans what this returns.
func ServedModel(s model.Spec, set vllm.Settings) (model.Spec, error) {
	s, err := s.WithOverrides(set.ModelOverrides())
	if err != nil {
		return s, err
	}
	if set.DisableSlidingWindow() {
		s = s.WithoutSlidingWindow()
	}
	conv, ssm, err := set.StateDtypeBytes(s.Dtype)
	if err != nil {
		return s, err
	}
	return s.WithStateDtypes(int64(conv), int64(ssm)), nil
}
