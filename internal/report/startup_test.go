package report

import (
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/startup"
)

// Capacity's start-up is the one model's: Llama-3.1-70B at TP 4 on
// H100-80GB, its 141,107,412,992-byte checkpoint read from local storage
// at 1 GB/s (141 s; a rank's 35.3 GB copied at 3 GB/s in 12 s overlaps
// it): 30 + 141 + 60 = 231 s; from a network volume at 125 MiB/s
// 1,076.6 s -> 1,077 s: 1,167 s. Before, capacity assumed 30 s + the GPUs'
// weights at 1 GB/s + 60 s on a formula of its own, while check asked
// probes for 40 minutes and probe allowed 46 for the same weights.
func TestCapacityStartupIsTheModel(t *testing.T) {
	e, err := NewEngine(context.Background(), offlineEnv(), NoFiles, EngineRequest{
		Plan: Request{GPU: "H100-80GB", Command: strings.Fields("vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192"), Offline: true}})
	if err != nil {
		t.Fatal(err)
	}
	for st, want := range map[startup.Storage]float64{"": 231, startup.Network: 1167} {
		s, source := StartupEstimate(e, st)
		if s != want || !strings.Contains(source, "docs/startup.md") || !strings.Contains(source, "--storage") {
			t.Errorf("storage %q: %v s (%s), want %v s", st, s, source, want)
		}
	}
}
