package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

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
		// The option's replica: its max-num-seqs may be the one the
		// simulation chose.
		eng := engineFor(req, "H100-80GB")
		eng.Plan.Flags = append(eng.Plan.Flags, "--max-num-seqs", strconv.Itoa(o.Settings.MaxNumSeqs))
		sr, err := Simulate(context.Background(), offlineEnv(), nil, SimRequest{Engine: eng, Workload: CapacityProbe(spec, k.rate), SLO: req.SLO})
		if err != nil {
			t.Fatal(err)
		}
		if sr.SLOMet == nil || *sr.SLOMet != k.met {
			t.Errorf("simulate at %.3f req/s: SLO %+v, want met %t", k.rate, sr.SLO, k.met)
		}
		// and the capacity's confidence is simulate's at that rate
		if k.met && (o.Confidence == nil || sr.Confidence == nil || o.Confidence.Summary() != sr.Confidence.Summary()) {
			t.Errorf("capacity's confidence %+v, simulate's at its rate %+v", o.Confidence, sr.Confidence)
		}
	}
	// Two windows of 10 req/s: more than one replica's capacity, so two.
	if len(o.Windows) != 2 || o.Windows[0].Replicas != 2 || !o.Met || rep.Best != "H100-80GB" {
		t.Errorf("windows %+v, met %t, best %q", o.Windows, o.Met, rep.Best)
	}
}

// An SLO no option meets is an UnreachableError naming the closest; a
// trace without requests is ErrNoRequests.
func TestCapacityBadInput(t *testing.T) {
	spec := workload.Spec{Rate: 5, Duration: 60, Prompt: workload.Fixed(2000), Output: workload.Fixed(100), Seed: 1}
	_, err := Capacity(context.Background(), offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB", "L40S"}, spec, "ttft_p99=5ms"))
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.Closest.GPU != "H100-80GB" || ue.Closest.Miss <= 1 || !strings.Contains(err.Error(), "% over the tightest bound") {
		t.Fatalf("unreachable: %v", err)
	}
	t.Log(err)
	empty := workload.Spec{Rate: 0.001, Duration: 10, Prompt: workload.Fixed(10), Output: workload.Fixed(10), Seed: 1}
	if _, err := Capacity(context.Background(), offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB"}, empty, "ttft_p99=1s")); !errors.Is(err, ErrNoRequests) {
		t.Errorf("no requests: %v", err)
	}
}

// Traffic capacity cannot size is refused, or said in words: requests of
// no token (one-token requests went in their place, "carried" at any
// rate); prompts of ten million tokens, past max-model-len (one replica
// refuses every one, so no fleet of it meets the SLO: said, not sized up
// to 100 replicas); a model that fits no option, in no layout plan tries
// (Llama-3.1-405B's 756 GiB of weights on L4s: "does not fit", not
// "-100% over the tightest bound"); and a GPU named three ways is one
// option. A model that fits only in another layout is sized in the one
// plan gives: Llama-3.1-70B on L4s is plan's first alternative, 16 × L4
// (tensor parallel 8 in a node, pipeline parallel 2 across two).
func TestCapacityRefusesNonsense(t *testing.T) {
	ctx := context.Background()
	zero := workload.Spec{Rate: 5, Duration: 600, Prompt: workload.Fixed(0), Output: workload.Fixed(0), Seed: 1}
	if _, err := Capacity(ctx, offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB"}, zero, "ttft_p99=1s")); err == nil || !strings.Contains(err.Error(), "--output-tokens fixed:0: vLLM refuses max_tokens below 1") {
		t.Errorf("zero tokens: %v", err)
	}
	// A closed loop has no arrival rate: replayed as arrivals, its 2,000
	// requests were one burst at t=0, sized at 42 replicas where one
	// serves 32 clients within the SLO (the web API and the CLI alike).
	closed := workload.Spec{Concurrency: 32, NumRequests: 2000, Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: 1}
	if _, err := Capacity(ctx, offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB"}, closed, "ttft_p99=2s")); err == nil || !strings.Contains(err.Error(), "a closed loop of 32 clients") {
		t.Errorf("a closed loop: %v", err)
	}
	huge := workload.Spec{Bursts: []workload.Burst{{Count: 1_000_000, Tokens: 10_000_000}}, Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: 1}
	_, err := Capacity(ctx, offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB"}, huge, "ttft_p99=1s"))
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "one replica refuses 1000 of the first 1000 requests of the traffic (1000 prompt_too_long") ||
		ue.Closest.Refused == "" || len(ue.Closest.Windows) != 0 {
		t.Errorf("ten-million-token prompts: %v", err)
	}
	big := capacityRequest(t, []string{"L4", "l4", "NVIDIA-L4"}, workload.Spec{Rate: 1, Duration: 600, Prompt: workload.Fixed(100), Output: workload.Fixed(10), Seed: 1}, "ttft_p99=1s")
	big.Engine.Plan.Model = "meta-llama/Llama-3.1-405B-Instruct"
	rep, err := Capacity(ctx, offlineEnv(), nil, big)
	if !errors.As(err, &ue) || len(rep.Options) != 1 || !rep.Options[0].NoFit ||
		!strings.HasPrefix(err.Error(), "no GPU option meets the SLO: vLLM would not start on any of them (L4: ") || strings.Contains(err.Error(), "%") {
		t.Errorf("405B on an L4: %v", err)
	}
	big.Engine.Plan.Model = "meta-llama/Llama-3.1-70B-Instruct"
	rep, err = Capacity(ctx, offlineEnv(), nil, big)
	if err != nil || rep.Options[0].GPUsPerReplica != 16 || rep.Options[0].Settings.MaxModelLen == 0 ||
		!strings.Contains(strings.Join(rep.Options[0].Notes, "\n"), "L4: the given settings do not fit, so plan's first alternative: use 16 × L4") {
		t.Errorf("70B on an L4: %v; %+v", err, rep.Options[0])
	}
}

func engineFor(req CapacityRequest, name string) EngineRequest {
	e := req.Engine
	e.Plan.GPU = name
	return e
}

// A day of traffic rising from 2 to 40 req/s at noon and back (Poisson,
// 1024-token prompts, 128-token outputs) for Llama-3.1-8B on H100-80GB
// and L40S, the SLO judged per 10-minute window: the replicas follow the
// rate, and the autoscaler whose thresholds come from one replica's knee,
// replayed with its start-up delay and cool-down, meets the SLO in at
// least 99% of the windows on fewer GPU-hours than the static fleet sized
// for the peak, and never asks for more replicas than the busiest window
// needs (it is handed capped there). About 25 CPU seconds (docs/capacity.md
// has the run): skipped with -short, which CI does not give.
func TestCapacityDiurnalDay(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated day of a fleet: about two CPU minutes")
	}
	spec := workload.Spec{Rate: 2, PeakRate: 40, Duration: 24 * 3600, Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: 1}
	rep, err := Capacity(context.Background(), offlineEnv(), nil, capacityRequest(t, []string{"H100-80GB", "L40S"}, spec, "ttft_p99=2s,tpot_p99=100ms"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Options) != 2 {
		t.Fatalf("%d options", len(rep.Options))
	}
	// The README quotes this day's answer: the same GPU, fleet, GPU-hours
	// and cost as the table's headline and the JSON's
	// options[0].autoscaler.replay, and the static fleet's GPU-hours.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if best := rep.Options[0]; best.Autoscaler != nil && best.Static != nil {
		a := best.Autoscaler
		quote := fmt.Sprintf("%s first at AWS's on-demand prices, the autoscaler it hands over (%d to %d replicas, replayed over the day) meets the SLO in %d of %d windows on %.1f GPU-hours, $%.2f, against %.1f for a fleet sized for the peak",
			best.GPU, a.MinReplicas, a.MaxReplicas, a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours, a.Replay.CostUSD, best.Static.GPUHours)
		if !strings.Contains(string(readme), quote) {
			t.Errorf("the README's capacity row does not say what the run answers:\n%s", quote)
		}
	}
	for _, o := range rep.Options {
		a, st := o.Autoscaler, o.Static
		if !o.Met || a == nil || st == nil || len(o.Windows) != 144 {
			t.Fatalf("%s: met %t, %d windows", o.GPU, o.Met, len(o.Windows))
		}
		t.Logf("%s: capacity %.2f req/s; replicas peak %d mean %.2f, %.1f GPU-hours; autoscaler %d/%d windows, %.1f GPU-hours; static %d/%d, %.1f GPU-hours",
			o.GPU, o.SLOCapacityPerS, o.PeakReplicas, o.MeanReplicas, o.GPUHours, a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours,
			st.WindowsMet, st.Windows, st.GPUHours)
		// The replicas follow the rate: no window needs more replicas than
		// one whose rate is 10% higher (the 10-minute windows' Poisson
		// counts vary by about 1%, one replica's SLO capacity is a step);
		// midnight needs one, noon at least the peak less one, and the
		// rank correlation is high (three to seven levels of replicas tie
		// many windows: 0.937 on H100-80GB).
		for i, a := range o.Windows {
			for _, b := range o.Windows[i+1:] {
				lo, hi := a, b
				if b.RatePerS < a.RatePerS {
					lo, hi = b, a
				}
				if lo.RatePerS < hi.RatePerS/1.1 && lo.Replicas > hi.Replicas {
					t.Errorf("%s: %d replicas at %.2f req/s (%gs), %d at %.2f req/s (%gs)", o.GPU, lo.Replicas, lo.RatePerS, lo.StartS, hi.Replicas, hi.RatePerS, hi.StartS)
				}
			}
		}
		if rho := spearman(o.Windows); rho < 0.9 {
			t.Errorf("%s: replicas against the rate: Spearman %.3f, want >= 0.9", o.GPU, rho)
		}
		first, noon := o.Windows[0], o.Windows[72]
		if first.Replicas != 1 || noon.Replicas < o.PeakReplicas-1 || o.PeakReplicas < 3 {
			t.Errorf("%s: %d replicas at midnight, %d at noon (peak %d)", o.GPU, first.Replicas, noon.Replicas, o.PeakReplicas)
		}
		if a.Policy != PolicyCapped || a.MaxReplicas != o.PeakReplicas || a.Replay.PeakReplicas > o.PeakReplicas {
			t.Errorf("%s: the autoscaler handed over %s, up to %d, peaked at %d replicas; the busiest window needs %d", o.GPU, a.Policy, a.MaxReplicas, a.Replay.PeakReplicas, o.PeakReplicas)
		}
		if a.Replay.SLOAttainment < 0.99 || a.Replay.GPUHours >= st.GPUHours || st.SLOAttainment < 0.99 {
			t.Errorf("%s: autoscaler %.4f of windows on %.1f GPU-hours; static fleet %.4f on %.1f", o.GPU, a.Replay.SLOAttainment, a.Replay.GPUHours,
				st.SLOAttainment, st.GPUHours)
		}
	}
}

// spearman is the rank correlation of the windows' rates and replicas
// (ties take their mean rank).
func spearman(ws []CapacityWindow) float64 {
	rank := func(v []float64) []float64 {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
		r := make([]float64, len(v))
		for i := 0; i < len(idx); {
			j := i
			for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
				j++
			}
			for k := i; k <= j; k++ {
				r[idx[k]] = float64(i+j) / 2
			}
			i = j + 1
		}
		return r
	}
	var rate, reps []float64
	for _, w := range ws {
		rate, reps = append(rate, w.RatePerS), append(reps, float64(w.Replicas))
	}
	a, b := rank(rate), rank(reps)
	var ma, mb float64
	for i := range a {
		ma += a[i] / float64(len(a))
		mb += b[i] / float64(len(b))
	}
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

// The HPA selects vLLM's metrics by model_name only where the model id is
// a Kubernetes label value (no slash); the KEDA query always can.
func TestAutoscalerManifests(t *testing.T) {
	a := &Autoscaler{TargetRatePerS: 14.166, TargetWaiting: 2, TargetKV: 0.094, CoolDownS: 300, IntervalS: 15, MinReplicas: 1, MaxReplicas: 6,
		WaitingMetric: "vllm:num_requests_waiting", KVMetric: "vllm:kv_cache_usage_perc", RateMetric: "vllm:e2e_request_latency_seconds_count"}
	for _, c := range []struct {
		model string
		label bool
	}{{"meta-llama/Llama-3.1-8B-Instruct", false}, {"llama-8b", true}} {
		hpa := HPAObject(a, ScaleTarget{Name: "x", Namespace: "llm", Model: c.model})
		m := hpa["spec"].(map[string]any)["metrics"].([]any)
		ext := m[2].(map[string]any)["external"].(map[string]any)
		labels := ext["metric"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
		if _, ok := labels["model_name"]; ok != c.label || ext["target"].(map[string]any)["averageValue"] != "94m" {
			t.Errorf("%s: %v %v", c.model, labels, ext["target"])
		}
		if name := m[0].(map[string]any)["external"].(map[string]any)["metric"].(map[string]any)["name"]; name != "vllm_e2e_request_latency_seconds" {
			t.Errorf("rate metric %v", name)
		}
		keda := KEDAScaledObject(a, ScaleTarget{Name: "x", Namespace: "llm", Model: c.model, Prometheus: "http://p:9090"})
		trig := keda["spec"].(map[string]any)["triggers"].([]any)
		q := trig[0].(map[string]any)["metadata"].(map[string]any)["query"]
		want := `sum(rate(vllm:e2e_request_latency_seconds_count{namespace="llm",model_name="` + c.model + `"}[1m]))`
		if q != want || trig[0].(map[string]any)["metadata"].(map[string]any)["threshold"] != "14.166" {
			t.Errorf("KEDA query %v, want %s", q, want)
		}
	}
	// A replica of two data-parallel engines exports two KV series (vLLM's
	// engine label): the sum over a pod's is twice the engines' mean.
	dp := *a
	dp.EnginesPerReplica = 2
	keda := KEDAScaledObject(&dp, ScaleTarget{Name: "x", Namespace: "llm", Prometheus: "http://p:9090"})
	kv := keda["spec"].(map[string]any)["triggers"].([]any)[2].(map[string]any)["metadata"].(map[string]any)
	if kv["query"] != `sum(vllm:kv_cache_usage_perc{namespace="llm"}) / 2` || kv["threshold"] != "0.094" {
		t.Errorf("KEDA KV trigger of two engines a replica: %v", kv)
	}
	m := HPAObject(&dp, ScaleTarget{Name: "x", Namespace: "llm"})["spec"].(map[string]any)["metrics"].([]any)
	if v := m[2].(map[string]any)["external"].(map[string]any)["target"].(map[string]any)["averageValue"]; v != "188m" {
		t.Errorf("HPA KV target of two engines a replica: %v, want 188m", v)
	}
}

// A replica of --data-parallel-size 2 is one server of two engines behind
// one API server, on two GPUs: Llama-3.1-8B on H100s, the traffic of
// TestCapacityAgreesWithSimulate. It carries about twice one engine's SLO
// capacity: more than 1.5 times (the API server, shared, is not what
// bounds this traffic), and a little more than twice is no error (the API
// server sends each request to the engine its load balancer scores lowest,
// which smooths the Poisson arrivals one engine meets alone: 2.13× when
// written). One server then holds the 10 req/s, and simulate of that
// server agrees at its capacity and misses at 1.1 times it.
func TestCapacityDataParallel(t *testing.T) {
	spec := workload.Spec{Rate: 10, Duration: 1200, Prompt: workload.Uniform{Lo: 100, Hi: 3000}, Output: workload.Uniform{Lo: 20, Hi: 500}, Seed: 2}
	capOf := func(flags ...string) CapacityOption {
		t.Helper()
		req := capacityRequest(t, []string{"H100-80GB"}, spec, "ttft_p99=1s,tpot_p99=40ms")
		req.WindowS = 600
		req.Engine.Plan.Flags = flags
		rep, err := Capacity(context.Background(), offlineEnv(), nil, req)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Options[0]
	}
	one, two := capOf(), capOf("--data-parallel-size", "2")
	ratio := two.SLOCapacityPerS / one.SLOCapacityPerS
	t.Logf("one engine %.3f req/s, a server of two %.3f req/s (%.2f×); windows %+v", one.SLOCapacityPerS, two.SLOCapacityPerS, ratio, two.Windows)
	if two.GPUsPerReplica != 2 || ratio < 1.5 || ratio > 2.5 {
		t.Errorf("two engines: %d GPUs a replica, %.2f× one engine's capacity", two.GPUsPerReplica, ratio)
	}
	if len(two.Windows) != 2 || two.Windows[0].Replicas != 1 || two.PeakGPUs != 2 {
		t.Errorf("10 req/s on servers of two: windows %+v, peak %v GPUs", two.Windows, two.PeakGPUs)
	}
	req := capacityRequest(t, []string{"H100-80GB"}, spec, "ttft_p99=1s,tpot_p99=40ms")
	for _, k := range []struct {
		rate float64
		met  bool
	}{{two.SLOCapacityPerS, true}, {1.1 * two.SLOCapacityPerS, false}} {
		eng := engineFor(req, "H100-80GB")
		eng.Plan.Flags = []string{"--data-parallel-size", "2", "--max-num-seqs", strconv.Itoa(two.Settings.MaxNumSeqs)}
		sr, err := Simulate(context.Background(), offlineEnv(), nil, SimRequest{Engine: eng, Workload: CapacityProbe(spec, k.rate), SLO: req.SLO})
		if err != nil {
			t.Fatal(err)
		}
		if sr.SLOMet == nil || *sr.SLOMet != k.met {
			t.Errorf("simulate of the server at %.3f req/s: SLO %+v, want met %t", k.rate, sr.SLO, k.met)
		}
	}
}

// A replica is the plan, as docs/capacity.md promises: Llama-3.1-70B's
// 131 GiB of weights do not fit one H100-80GB, and plan's first
// alternative is 4 of them at tensor parallel 4, which is the replica
// sized (4 GPUs a replica, billed so); two L40S given for Llama-3.1-8B,
// of which plan uses one ("one of the 2 × L40S given holds the model"),
// are a replica of 1 GPU, not 2 GPUs billed and one planned.
func TestCapacityReplicaIsThePlan(t *testing.T) {
	ctx := context.Background()
	spec := workload.Spec{Rate: 1, Duration: 600, Prompt: workload.Fixed(100), Output: workload.Fixed(10), Seed: 1}
	req := capacityRequest(t, []string{"H100-80GB"}, spec, "ttft_p99=1s")
	req.Engine.Plan.Model = "meta-llama/Llama-3.1-70B-Instruct"
	rep, err := Capacity(ctx, offlineEnv(), nil, req)
	if err != nil || rep.Options[0].GPUsPerReplica != 4 ||
		!strings.Contains(strings.Join(rep.Options[0].Notes, "\n"), "plan's first alternative: use 4 × H100-80GB with --tensor-parallel-size 4") {
		t.Errorf("70B on H100-80GB: %v; %+v", err, rep.Options[0])
	}
	req = capacityRequest(t, []string{"L40S"}, spec, "ttft_p99=1s")
	req.Engine.Plan.GPUCount = 2
	rep, err = Capacity(ctx, offlineEnv(), nil, req)
	if err != nil || rep.Options[0].GPUsPerReplica != 1 ||
		!strings.Contains(strings.Join(rep.Options[0].Notes, "\n"), "one of the 2 × L40S given holds the model") {
		t.Errorf("8B on 2 × L40S: %v; %+v", err, rep.Options[0])
	}
}
