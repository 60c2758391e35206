package cli

import "testing"

// BenchmarkPlanProfile is `plan --profile` on a typical profile (shortLog's:
// 20 req/s of ~1,200-token requests, Llama-3.1-8B on one H100-80GB at
// max-model-len 32768: 9 candidates × 20,000 simulated requests) against
// the same plan without it, in the same run. The ratio is the cost of the
// search; README.md (plan) reports it.
//
//	go test ./internal/cli -run '^$' -bench PlanProfile -benchtime 5x
func BenchmarkPlanProfile(b *testing.B) {
	logFile := writeFile(b, "req.log", shortLog())
	code, prof, errs := run(b, offline, "profile", logFile, "--window", "1m", "-o", "json")
	if code != 0 {
		b.Fatal(errs)
	}
	profFile := writeFile(b, "profile.json", prof)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"plain", planSeqsBase},
		{"profile", append(append([]string(nil), planSeqsBase...), "--profile", profFile)},
		{"log", append(append([]string(nil), planSeqsBase...), "--profile", logFile)},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if code, _, errs := run(b, offline, c.args...); code != 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
