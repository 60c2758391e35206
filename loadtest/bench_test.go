//go:build unix

package loadtest

import (
	"context"
	"fmt"
	"headroom.dev/headroom/workload"
	"syscall"
	"testing"
	"time"

	"headroom.dev/headroom/internal/fakeopenai"
)

// BenchmarkOpenLoop measures the client's own overhead: an open loop at a
// constant rate against the fixed-delay stand-in (10 ms to the first
// token, 16 tokens 2 ms apart: about 40 requests in flight at 1000/s),
// beside a baseline in the same run: the same pacing (RealClock.SleepUntil
// to each due time) with no request, which is the machine's timer floor.
// It reports the achieved send rate as a share of the requested one and
// the p99 lateness of the sends, for both, and the process's CPU time per
// request (client and stand-in together; the baseline's is the pacing
// loop's): on a machine shared with other work the wall-clock figures
// follow the neighbours' load, the CPU time does not.
//
//	go test ./loadtest -run XXX -bench OpenLoop -benchtime 1x
func BenchmarkOpenLoop(b *testing.B) {
	srv := fakeopenai.Start(fakeopenai.Options{TTFT: 10 * time.Millisecond, ITL: 2 * time.Millisecond})
	defer srv.Close()
	const seconds = 3
	for _, rate := range []float64{100, 500, 1000} {
		n := int(rate * seconds)
		b.Run(fmt.Sprintf("rate=%g", rate), func(b *testing.B) {
			for range b.N {
				// Baseline: pacing alone.
				cpu0 := cpuTime()
				clock := RealClock{}
				start := clock.Now()
				lag := NewStats(nil)
				for i := range n {
					due := time.Duration(float64(i) / rate * float64(time.Second))
					clock.SleepUntil(context.Background(), start.Add(due))
					lag.Sent(&Outcome{Due: due, Sent: clock.Now().Sub(start)})
				}
				var base Result
				lag.summarize(&base)
				cpu1 := cpuTime()

				c := client(srv, EndpointCompletions)
				r, err := Run(context.Background(), Config{Client: c, Warmup: true,
					Stream: stream(b, workload.Spec{Rate: rate, Arrival: workload.Constant, NumRequests: n, Prompt: workload.Fixed(100), Output: workload.Fixed(16)})})
				if err != nil {
					b.Fatal(err)
				}
				cpu2 := cpuTime()
				if r.Failed > 0 {
					b.Fatalf("%d failed: %v", r.Failed, r.ErrorExamples)
				}
				b.ReportMetric(r.SendRate.Achieved/rate, "achieved/requested")
				b.ReportMetric(base.SendRate.Achieved/rate, "baseline-achieved/requested")
				b.ReportMetric(r.SendLag.P99, "lag-p99-ms")
				b.ReportMetric(base.SendLag.P99, "baseline-lag-p99-ms")
				b.ReportMetric(r.TTFT.P50, "ttft-p50-ms")
				b.ReportMetric(float64((cpu2-cpu1).Microseconds())/float64(n+2), "cpu-us/request")
				b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(n), "baseline-cpu-us/request")
			}
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
