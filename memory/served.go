package memory

import (
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// ServedModel is the model as vLLM serves it with set's flags that change
// what it reads of the checkpoint: --hf-overrides and --rope-scaling set
// keys on its config.json, and --disable-sliding-window makes every
// sliding layer keep the whole context and caps the context at the
// window. Every front end (plan, the webhook, doctor) plans what this
// returns.
func ServedModel(s model.Spec, set vllm.Settings) (model.Spec, error) {
	s, err := s.WithOverrides(set.ModelOverrides())
	if err != nil {
		return s, err
	}
	if set.DisableSlidingWindow() {
		s = s.WithoutSlidingWindow()
	}
	return s, nil
}
