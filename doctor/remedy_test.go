package doctor

import "testing"

// TestRemedyPaste: each action reads as what a user pastes where it goes:
// a shell line of flags, an export line, manifest fields.
func TestRemedyPaste(t *testing.T) {
	for _, c := range []struct {
		r    Remedy
		want string
	}{
		{Remedy{Action: ActionSetFlag, Args: []string{"--max-num-seqs", "64"}}, "--max-num-seqs 64"},
		{Remedy{Action: ActionSetFlag, Args: []string{"--compilation-config", `{"cudagraph_capture_sizes": [1, 2, 4]}`}},
			`--compilation-config '{"cudagraph_capture_sizes": [1, 2, 4]}'`},
		{Remedy{Action: ActionSetEnv, Args: []string{"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"}},
			"export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"},
		{Remedy{Action: ActionEditManifest, Args: []string{"startupProbe.httpGet.path", "/health", "startupProbe.periodSeconds", "10"}},
			"startupProbe.httpGet.path: /health, startupProbe.periodSeconds: 10"},
		{Remedy{Action: ActionEditManifest, Args: []string{"resources.limits.memory"}}, "resources.limits.memory"},
		{Remedy{Action: ActionHardware, Args: []string{"H100-80GB"}}, "H100-80GB"},
		{Remedy{Action: ActionFreeGPU}, ""},
	} {
		if got := c.r.Paste(); got != c.want {
			t.Errorf("%s %q: got %q, want %q", c.r.Action, c.r.Args, got, c.want)
		}
	}
}
