package sim

import (
	"context"
	"math"
	"testing"

	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// qwen3MoEDP is Qwen3-30B-A3B (128 experts, 8 a token, hidden 2,048, 48
// MoE layers) on H100s at TP 1 and data parallel dp, vLLM 0.11.0.
func qwen3MoEDP(t *testing.T, dp int) (Config, *Roofline) {
	t.Helper()
	set := vllm.Settings{Version: vllm.Version{Minor: 11}, DataParallelSize: dp}
	b := plan(t, "Qwen/Qwen3-30B-A3B", "H100-80GB", dp, set)
	cal, _ := CalibrationFor(b.Device)
	m, err := RooflineFor(b, cal)
	if err != nil {
		t.Fatal(err)
	}
	return ConfigFor(b, m), m
}

// A MoE model's data-parallel ranks split its experts over TP × DP and
// compute the group's tokens together (vLLM's fused MoE under DP). A
// decode of 64 sequences a rank at DP 2 reads, on each rank, half of the
// experts that 128 tokens reach, where one engine reads all that its 64
// reach: touched(n) = 1 − (1 − 8/128)^n, 0.99974 of 128 and 0.98392 of
// 64, so the read is 0.5 × 0.99974 / 0.98392 = 0.508 of one engine's.
// Each of the 48 MoE layers then gathers and scatters the 128 tokens'
// activations (128 × 2,048 × 2 B = 512 KiB) across the two ranks: two
// NCCL collectives of 25 µs and 262,144 B over NVLink's 450 GB/s at
// 0.8, 2 × (25 + 0.728) µs = 51.5 µs a layer, 2.47 ms a step.
func TestDataParallelMoEExperts(t *testing.T) {
	_, one := qwen3MoEDP(t, 1)
	_, two := qwen3MoEDP(t, 2)
	if one.DataParallel != 1 || two.DataParallel != 2 || math.Abs(two.ExpertBytes/one.ExpertBytes-0.5) > 1e-9 || math.Abs(two.RoutedParams/one.RoutedParams-0.5) > 1e-9 {
		t.Fatalf("DP 2 holds %.3f of the experts' bytes, %.3f of their parameters; want 0.5", two.ExpertBytes/one.ExpertBytes, two.RoutedParams/one.RoutedParams)
	}
	decode := Batch{Requests: 64, Tokens: 64, Decodes: 64, ContextTokens: 64 * 1000, DecodeContext: 64 * 1000}
	alone := one.Parts(decode)
	grouped := decode
	grouped.GroupTokens = 128
	g := two.Parts(grouped)
	readOne := one.ExpertBytes * one.expertsTouched(64) / (one.Bandwidth * one.BandwidthEfficiency * orOne(one.ExpertRead))
	readTwo := two.ExpertBytes * two.expertsTouched(128) / (two.Bandwidth * two.BandwidthEfficiency * orOne(two.ExpertRead))
	if r := readTwo / readOne; math.Abs(r-0.508) > 0.001 {
		t.Errorf("the experts' read at DP 2 is %.4f of one engine's, want 0.508", r)
	}
	if g.Experts >= alone.Experts || g.Experts < 0.5*alone.Experts {
		t.Errorf("experts: %.2f ms at DP 2, %.2f ms alone", g.Experts*1e3, alone.Experts*1e3)
	}
	want := 48 * 2 * (25e-6 + 128*2048*2*0.5/(450e9*0.8))
	if math.Abs(g.AllReduce-want) > 0.01*want || alone.AllReduce != 0 {
		t.Errorf("dispatch and combine: %.3f ms a step, want %.3f", g.AllReduce*1e3, want*1e3)
	}
	// Priced alone, a rank takes its peers as busy as it.
	if a := two.Parts(decode); a.Experts != g.Experts {
		t.Errorf("a rank alone: experts %.3f ms, with its group %.3f", a.Experts*1e3, g.Experts*1e3)
	}
}

// The ranks step in lockstep: while rank 1 prefills an 8,000-token prompt
// in one step (about 0.15 s: 8,000 × 2 × 3.3 GFLOP at 0.37 of 989
// TFLOP/s), rank 0's decode waits for it, so its longest gap between
// tokens is that step, ten times and more its usual gap; as independent
// engines it never waits.
func TestDataParallelLockstep(t *testing.T) {
	cfg, _ := qwen3MoEDP(t, 2)
	src := func() Source {
		return &sliceSource{{ID: "short", PromptTokens: 100, OutputTokens: 200}, {ID: "long", Arrival: 0.5, PromptTokens: 8000, OutputTokens: 2}}
	}
	lock, err := RunDataParallel(context.Background(), cfg, src(), RunOptions{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	free, err := RunFleet(context.Background(), cfg, src(), FleetOptions{Replicas: 2, Router: LeastOutstanding, FleetOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	l, f := lock.ITL, free.Fleet.ITL
	if lock.Requests != 2 || l.Max < 100 || l.Max < 10*l.P50 || f.Max > 3*f.P50 {
		t.Errorf("lockstep: ITL p50 %.1f ms, max %.1f ms; independent engines: p50 %.1f ms, max %.1f ms", l.P50, l.Max, f.P50, f.Max)
	}
	// Dummy steps are no steps of the run: the short request's 200
	// tokens and the long one's 2 take at most 202 steps and 2 prefills.
	if lock.Steps > 204 {
		t.Errorf("%d steps counted", lock.Steps)
	}
	t.Logf("lockstep: ITL p50 %.1f ms, max %.1f ms, %d steps; independent engines: p50 %.1f ms, max %.1f ms", l.P50, l.Max, lock.Steps, f.P50, f.Max)
}

// A max-num-seqs search of a data-parallel server runs every candidate as
// the server (max-num-seqs is each engine's): a burst of 400 requests of
// 1,024/128 tokens on Llama-3.1-8B takes two H100 engines at most three
// quarters of one's time, and the trial is the server's run.
func TestSeqsSearchDataParallel(t *testing.T) {
	cfg, fe := llama8B(t, "H100-80GB")
	burst := workload.Spec{Rate: 1e6, NumRequests: 400, Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: 1}
	open := func() (Source, func(), error) { return source(t, burst), func() {}, nil }
	conf := func(n int) (Config, bool, error) { c := cfg; c.MaxNumSeqs = n; return c, true, nil }
	var took [3]float64
	for _, dp := range []int{1, 2} {
		c, err := ChooseMaxNumSeqs(context.Background(), SeqsSearch{Candidates: []int{256}, Config: conf, Open: open, Run: RunOptions{FrontEnd: fe}, DataParallel: dp})
		if err != nil {
			t.Fatal(err)
		}
		took[dp] = c.Trials[0].Report.DurationS
	}
	server, err := RunDataParallel(context.Background(), cfg, source(t, burst), RunOptions{FrontEnd: fe}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if took[2] > 0.75*took[1] || math.Abs(took[2]-server.DurationS) > 1e-9 {
		t.Errorf("one engine %.2f s, two %.2f s, the server alone %.2f s", took[1], took[2], server.DurationS)
	}
}
