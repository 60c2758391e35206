package sim

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// BenchmarkRun is the speed target of the simulator: Llama-3.1-8B on one
// H100-80GB with vLLM's defaults, 10 req/s Poisson, prompts uniform
// 16-2000 tokens, outputs uniform 1-400, on the H100's fitted clock with
// the API server. It
// reports simulated seconds per wall second (the target is >= 1000), per
// CPU second of the process (what a busy shared host does not distort) and
// the live heap at the end of runs of 100k and 1M requests: the same
// heap for both shows memory does not grow with the request count.
//
//	go test ./sim -run XXX -bench Run -benchtime 1x
func BenchmarkRun(b *testing.B) {
	spec, ok := catalog.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	if !ok {
		b.Fatal("no Llama-3.1-8B in the catalog")
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Count: 1, Settings: vllm.Settings{Version: vllm.Newest()}})
	if err != nil {
		b.Fatal(err)
	}
	cal, _ := CalibrationFor(sel.Device)
	timer, err := RooflineFor(plan, cal)
	if err != nil {
		b.Fatal(err)
	}
	set := plan.Settings
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			var simulated, wall, cpu float64
			var heap uint64
			for range b.N {
				e, err := New(Config{NumGPUBlocks: int(plan.NumBlocks), BlockSize: set.BlockSize, MaxNumSeqs: set.MaxNumSeqs,
					MaxNumBatchedTokens: set.MaxNumBatchedTokens, MaxModelLen: plan.MaxModelLen, Timer: timer})
				if err != nil {
					b.Fatal(err)
				}
				spec := workload.Spec{Rate: 10, NumRequests: n, Prompt: workload.Uniform{Lo: 16, Hi: 2000}, Output: workload.Uniform{Lo: 1, Hi: 400}, Seed: 1}
				st, _, err := spec.Open(nil)
				if err != nil {
					b.Fatal(err)
				}
				start, cpu0 := time.Now(), cpuSeconds()
				rep, err := Run(context.Background(), e, FromWorkload(st), RunOptions{FrontEnd: cal.FrontEnd})
				if err != nil {
					b.Fatal(err)
				}
				wall += time.Since(start).Seconds()
				cpu += cpuSeconds() - cpu0
				simulated += rep.DurationS
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = ms.HeapAlloc
				runtime.KeepAlive(e)
				if b.N == 1 {
					b.Logf("%d requests: %.0f simulated s in %.2f wall s; ttft p99 %.0f ms, tpot mean %.1f ms, max KV %.2f, preemptions %d",
						rep.Requests, rep.DurationS, wall, rep.TTFT.P99, rep.TPOT.Mean, rep.MaxKVUsage, rep.Preemptions)
				}
			}
			b.ReportMetric(simulated/wall, "sim-s/wall-s")
			b.ReportMetric(simulated/cpu, "sim-s/cpu-s")
			b.ReportMetric(float64(heap)/(1<<20), "MiB-live-heap")
		})
	}
}

func itoa(n int) string {
	switch {
	case n%1_000_000 == 0:
		return string(rune('0'+n/1_000_000)) + "M"
	default:
		return string(rune('0'+n/100_000)) + "00k"
	}
}

// cpuSeconds is the process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkFleet is the fleet's speed target: 10 replicas of BenchmarkRun's
// Llama-3.1-8B on H100-80GB behind least-outstanding routing, 24 simulated
// hours of Poisson traffic at 20 req/s (1.73 million requests, BenchmarkRun's
// lengths). It reports simulated seconds per wall second (the target is
// >= 1000), per CPU second, and the live heap at the end.
//
//	go test ./sim -run XXX -bench Fleet -benchtime 1x
func BenchmarkFleet(b *testing.B) {
	cfg, fe := llama8B(b, "H100-80GB")
	b.ReportAllocs()
	var simulated, wall, cpu float64
	var heap uint64
	for range b.N {
		spec := workload.Spec{Rate: 20, Duration: benchHours * 3600, Prompt: workload.Uniform{Lo: 16, Hi: 2000}, Output: workload.Uniform{Lo: 1, Hi: 400}, Seed: 1}
		start, cpu0 := time.Now(), cpuSeconds()
		rep, err := RunFleet(context.Background(), cfg, source(b, spec), FleetOptions{RunOptions: RunOptions{FrontEnd: fe}, Replicas: 10, Router: LeastOutstanding})
		if err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start).Seconds()
		cpu += cpuSeconds() - cpu0
		simulated += rep.Fleet.DurationS
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = ms.HeapAlloc
		runtime.KeepAlive(rep)
		if b.N == 1 {
			b.Logf("%d requests: %.0f simulated s in %.2f wall s; ttft p99 %.0f ms, tpot mean %.1f ms, steps %d",
				rep.Fleet.Requests, rep.Fleet.DurationS, wall, rep.Fleet.TTFT.P99, rep.Fleet.TPOT.Mean, rep.Fleet.Steps)
		}
	}
	b.ReportMetric(simulated/wall, "sim-s/wall-s")
	b.ReportMetric(simulated/cpu, "sim-s/cpu-s")
	b.ReportMetric(float64(heap)/(1<<20), "MiB-live-heap")
}

// benchHours is BenchmarkFleet's simulated time (a variable, so a profile
// can take a shorter run).
var benchHours = 24.0

func init() {
	if h := os.Getenv("HEADROOM_BENCH_HOURS"); h != "" {
		benchHours, _ = strconv.ParseFloat(h, 64)
	}
}
