package report

import (
	"context"
	"os"
	"syscall"
	"testing"

	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/workload"
)

// BenchmarkCapacityDay is capacity's speed target, measured beside the
// simulator's own in the same process: `headroom capacity --model
// Qwen/Qwen3-14B --gpu H100-80GB,L40S --vllm-version 0.19.0 --rate 2
// --peak-rate 30 --duration 24h --prompt-tokens 1500 --output-tokens 300
// --slo ttft_p99=2s,tpot_p99=80ms` (1.38 million requests a replay), and
// the 1M-request simulate run of sim's BenchmarkRun/1M (Llama-3.1-8B on
// one H100-80GB, 10 req/s Poisson, prompts uniform 16-2000, outputs
// 1-400). It reports the CPU seconds of each (user + system, what a busy
// shared host does not distort) and their ratio; the target is at most 60
// CPU seconds for the day, from about 720 before capacity had a package
// of its own.
//
//	go test ./internal/report -run XXX -bench CapacityDay -benchtime 1x
//
// HEADROOM_BENCH_GPUS=H100-80GB sizes one option (for a profile).
func BenchmarkCapacityDay(b *testing.B) {
	gpus := []string{"H100-80GB", "L40S"}
	if g := os.Getenv("HEADROOM_BENCH_GPUS"); g != "" {
		gpus = []string{g}
	}
	bounds, err := slo.Parse("ttft_p99=2s,tpot_p99=80ms")
	if err != nil {
		b.Fatal(err)
	}
	day := CapacityRequest{Engine: EngineRequest{Plan: Request{Model: "Qwen/Qwen3-14B", Version: "0.19.0", Offline: true}},
		GPUs: gpus, SLO: bounds,
		Workload: workload.Spec{Rate: 2, PeakRate: 30, Duration: 24 * 3600, Prompt: workload.Fixed(1500), Output: workload.Fixed(300), Seed: 1}}
	million := SimRequest{Engine: EngineRequest{Plan: Request{Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100-80GB", Offline: true}},
		Workload: workload.Spec{Rate: 10, NumRequests: 1_000_000, Prompt: workload.Uniform{Lo: 16, Hi: 2000}, Output: workload.Uniform{Lo: 1, Hi: 400}, Seed: 1}}
	var simCPU, dayCPU float64
	for range b.N {
		cpu0 := cpuSeconds()
		sr, err := Simulate(context.Background(), offlineEnv(), nil, million)
		if err != nil {
			b.Fatal(err)
		}
		cpu1 := cpuSeconds()
		rep, err := Capacity(context.Background(), offlineEnv(), nil, day)
		if err != nil {
			b.Fatal(err)
		}
		cpu2 := cpuSeconds()
		simCPU += cpu1 - cpu0
		dayCPU += cpu2 - cpu1
		if b.N == 1 {
			b.Logf("simulate: %d requests, %.0f simulated s", sr.Report.Requests, sr.Report.DurationS)
			for _, o := range rep.Options {
				if a := o.Autoscaler; a != nil {
					b.Logf("%s: %.3f req/s a replica; ideal %d / %.2f replicas, %.1f GPU-hours; autoscaled %d-%d (%s), %d of %d windows, %.1f GPU-hours, $%.2f, %d flaps; simulations %+v",
						o.GPU, o.SLOCapacityPerS, o.PeakReplicas, o.MeanReplicas, o.GPUHours, a.MinReplicas, a.MaxReplicas, a.Policy,
						a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours, a.Replay.CostUSD, a.Flaps, o.runs)
				}
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(simCPU/n, "simulate-1M-cpu-s")
	b.ReportMetric(dayCPU/n, "capacity-day-cpu-s")
	b.ReportMetric(dayCPU/simCPU, "day/simulate")
}

// cpuSeconds is the process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
