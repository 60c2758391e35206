package report

import (
	"context"
	"math"
	"testing"

	"headroom.dev/headroom/workload"
)

// FuzzSimulateBench drives a simulation with any pasted `vllm bench serve`
// command (workload.ParseBench, at most 40 requests of it): it answers
// every request with finite latencies or refuses in one line. Seeds: the
// parser's own, a prompt past the context, a rate near zero, a ramp and a
// burstiness near zero.
func FuzzSimulateBench(f *testing.F) {
	for _, s := range []string{"vllm bench serve --random-input-len 10 --num-prompts 2", "--request-rate inf --max-concurrency 3 --random-range-ratio 0.5",
		"vllm bench serve --dataset-name sonnet", "--num-prompts 30 --random-input-len 100000 --random-output-len 1", "--request-rate 1e-9 --num-prompts 3",
		"--ramp-up-strategy linear --ramp-up-start-rps 1 --ramp-up-end-rps 100 --num-prompts 40", "--burstiness 0.001 --request-rate 5 --num-prompts 20"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := workload.ParseBench(s)
		if err != nil {
			return
		}
		spec := b.Spec
		if spec.NumRequests > 40 || spec.NumRequests == 0 {
			spec.NumRequests = 40
		}
		spec.Speedup = 1
		req := SimRequest{Engine: EngineRequest{Plan: Request{Model: "Qwen/Qwen2.5-7B-Instruct", GPU: "L40S", Offline: true}},
			Workload: spec}
		rep, err := Simulate(context.Background(), offlineEnv(), NoFiles, req)
		if !answered(t, rep, err, int64(spec.NumRequests)) {
			return
		}
		for _, v := range []float64{rep.TTFT.Mean, rep.TPOT.Mean, rep.DurationS, rep.E2E.Mean} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%q: TTFT %v TPOT %v dur %v", s, rep.TTFT.Mean, rep.TPOT.Mean, rep.DurationS)
			}
		}
	})
}
