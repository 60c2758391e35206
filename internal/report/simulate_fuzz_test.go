package report

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/workload"
)

// FuzzSimulateBounds drives the simulation builder with any rate, KV pool
// (--num-gpu-blocks-override, --block-size) and GPU memory (--gpu-memory):
// it answers (within the requests given) or refuses in one line, and
// never panics or allocates by the pool's nominal size (a pool of two
// billion blocks runs in the fuzzer's memory). Seeds are the bad-input
// sweep's cases.
func FuzzSimulateBounds(f *testing.F) {
	f.Add(1.0, "", "", 0)
	f.Add(1e-300, "", "", 0)
	f.Add(1e-20, "", "", 0)
	f.Add(math.Inf(1), "", "", 0)
	f.Add(20.0, "1000000000000", "", 0)
	f.Add(5.0, "2000000000", "", 1)
	f.Add(5.0, "", "4096GiB", 1)
	f.Add(5.0, "", "100000GiB", 0)
	f.Add(5.0, "", "1e9GiB", 0)
	f.Add(5.0, "1", "", 16)
	f.Add(-1.0, "-5", "0GiB", -3)
	f.Fuzz(func(t *testing.T, rate float64, blocks, memory string, blockSize int) {
		var flags []string
		if blocks != "" {
			flags = append(flags, "--num-gpu-blocks-override", blocks)
		}
		if blockSize != 0 {
			flags = append(flags, "--block-size", strconv.Itoa(blockSize))
		}
		plan := Request{Model: "Qwen/Qwen2.5-7B-Instruct", GPU: "L40S", Offline: true, Flags: flags}
		if memory != "" {
			plan.GPU, plan.GPUMemory = "", memory
		}
		const n = 20
		req := SimRequest{Engine: EngineRequest{Plan: plan, StepTime: "fixed:10ms"},
			Workload: workload.Spec{Rate: rate, NumRequests: n, Prompt: workload.Fixed(100), Output: workload.Fixed(4), Speedup: 1}}
		rep, err := Simulate(context.Background(), offlineEnv(), NoFiles, req)
		if !answered(t, rep, err, n) {
			return
		}
		if rep.Settings.NumGPUBlocks > sim.MaxBlocks {
			t.Fatalf("a pool of %d blocks", rep.Settings.NumGPUBlocks)
		}
	})
}

// answered holds a simulation of n requests to its contract: refused in
// one line (false), or every request answered, rejected or past the
// horizon unless the run fell behind (true).
func answered(t *testing.T, rep *SimReport, err error, n int64) bool {
	t.Helper()
	if err != nil {
		if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
			t.Fatalf("error %q: want one line", msg)
		}
		return false
	}
	if got := rep.Requests + rep.Rejected + rep.BeyondHorizon; got > n || (rep.FellBehind == nil && got != n) {
		t.Fatalf("%d answered, %d rejected, %d beyond the horizon of %d requests", rep.Requests, rep.Rejected, rep.BeyondHorizon, n)
	}
	return true
}
