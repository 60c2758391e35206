package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"headroom.dev/headroom/workload"
)

// A traffic the engine refuses whole (prompts of ten million tokens, past
// any max-model-len) takes no step, so only the sends can see a signal:
// Run and RunFleet stop within a second of one, not after sending five
// million requests (before the sends checked, a capacity search that
// replayed such a window up to 100 replicas honoured a signal 52 s late).
func TestRefusedTrafficStopsOnSignal(t *testing.T) {
	cfg, fe := llama8B(t, "H100-80GB")
	spec := workload.Spec{Bursts: []workload.Burst{{Count: 5_000_000, Tokens: 10_000_000}}, Prompt: workload.Fixed(10), Output: workload.Fixed(10), Seed: 1}
	for _, fleet := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var stopped time.Time
		timer := time.AfterFunc(50*time.Millisecond, func() { stopped = time.Now(); cancel() })
		var err error
		if fleet {
			_, err = RunFleet(ctx, cfg, source(t, spec), FleetOptions{RunOptions: RunOptions{FrontEnd: fe}, Replicas: 3})
		} else {
			var e *Engine
			if e, err = New(cfg); err != nil {
				t.Fatal(err)
			}
			_, err = Run(ctx, e, source(t, spec), RunOptions{FrontEnd: fe})
		}
		timer.Stop()
		cancel()
		if stopped.IsZero() {
			t.Fatalf("fleet %t: the run ended before the signal (%v): the test needs a longer traffic", fleet, err)
		}
		if late := time.Since(stopped); !errors.Is(err, context.Canceled) || late > time.Second {
			t.Errorf("fleet %t: %v, %s after the signal", fleet, err, late)
		}
	}
}
