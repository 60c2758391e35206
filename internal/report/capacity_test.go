package report

import (
	"context"
	"errors"
	"testing"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/workload"
)

func capacityRequest(t *testing.T, gpus []string, spec workload.Spec, bounds string) CapacityRequest {
	t.Helper()
	b, err := slo.Parse(bounds)
	if err != nil {
		t.Fatal(err)
	}
	return CapacityRequest{Engine: EngineRequest{Plan: Request{Model: "meta-llama/Llama-3.1-8B-Instruct", Offline: true}},
		GPUs: gpus, Workload: spec, SLO: b}
}

// One replica's SLO capacity is what simulate says: at that rate the
// capacity probe meets every bound, at 1.1× it misses one.
func TestCapacityAgreesWithSimulate(t *testing.T) {
	spec := workload.Spec{Rate: 10, Duration: 1200, Prompt: workload.Uniform{Lo: 100, Hi: 3000}, Output: workload.Uniform{Lo: 20, Hi: 500}, Seed: 2}
	req := capacityRequest(t, []string{"H100-80GB"}, spec, "ttft_p99=1s,tpot_p99=40ms")
	req.WindowS = 600
	start := time.Now()
	rep, err := Capacity(context.Background(), offlineEnv(), nil, req)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Options[0]
	t.Logf("%s in %s: capacity %.3f req/s, windows %+v", o.GPU, time.Since(start), o.SLOCapacityPerS, o.Windows)
	for _, k := range []struct {
		rate float64
		met  bool
	}{{o.SLOCapacityPerS, true}, {1.1 * o.SLOCapacityPerS, false}} {
		sr, err := Simulate(context.Background(), offlineEnv(), nil, SimRequest{Engine: engineFor(req, "H100-80GB"), Workload: CapacityProbe(spec, k.rate), SLO: req.SLO})
		if err != nil {
			t.Fatal(err)
		}
		if sr.SLOMet == nil || *sr.SLOMet != k.met {
			t.Errorf("simulate at %.3f req/s: SLO %+v, want met %t", k.rate, sr.SLO, k.met)
		}
	}
	// Two windows of 10 req/s: more than one replica's capacity, so two.
	if len(o.Windows) != 2 || o.Windows[0].Replicas != 2 || !o.Met || rep.Best != "H100-80GB" {
		t.Errorf("windows %+v, met %t, best %q", o.Windows, o.Met, rep.Best)
	}
}

// Every default price names a catalog GPU.
func TestDefaultPrices(t *testing.T) {
	for name, p := range DefaultPrices() {
		sel, err := gpu.Resolve(name)
		if err != nil || sel.Device.Name != name {
			t.Errorf("%s: %v (%s)", name, err, sel.Device.Name)
		}
		if p.USDPerGPUHour <= 0 || p.Source == "" {
			t.Errorf("%s: %+v", name, p)
		}
	}
}

// An SLO no option meets is an UnreachableError naming the closest; a
// trace without requests is ErrNoRequests.
func TestCapacityBadInput(t *testing.T) {
	spec := workload.Spec{Rate: 5, Duration: 60, Prompt: workload.Fixed(2000), Output: workload.Fixed(100), Seed: 1}
	_, err := Capacity(context.Background(), offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB", "L40S"}, spec, "ttft_p99=5ms"))
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.Closest.GPU != "H100-80GB" || ue.Closest.Miss <= 1 {
		t.Fatalf("unreachable: %v", err)
	}
	t.Log(err)
	empty := workload.Spec{Rate: 0.001, Duration: 10, Prompt: workload.Fixed(10), Output: workload.Fixed(10), Seed: 1}
	if _, err := Capacity(context.Background(), offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB"}, empty, "ttft_p99=1s")); !errors.Is(err, ErrNoRequests) {
		t.Errorf("no requests: %v", err)
	}
}

func engineFor(req CapacityRequest, name string) EngineRequest {
	e := req.Engine
	e.Plan.GPU = name
	return e
}
