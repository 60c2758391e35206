package admission

import "runtime/debug"

// ServerGCPercent is the garbage collector's target (GOGC) a webhook
// server runs with when the operator has not chosen one.
//
// The server's live heap is a few MiB (the catalog cache, TLS and HTTP/2
// state) while every review allocates tens of KiB (decoding the object,
// planning, encoding the answer), so with Go's default of 100 the heap goal
// is reached within a few dozen reviews. In the load benchmark
// (bench/webhook: 500 reviews a second, 45 KiB each, a live heap of
// 2.5 MiB) the server collects 10.6 times a second at 100, 4.6 at 200 and
// 1.8 at 400; each collection takes CPU from the reviews in flight (mark
// assists, the background workers), which on a small pod shows in the tail
// latency. At 400 the heap goal is about five times the live heap, a dozen
// MiB. A burst of large reviews (bodies of up to 4 MiB) raises the live
// heap and the goal with it: GOMEMLIMIT, which the Helm chart (charts/headroom) sets under the
// container's memory limit, makes the runtime collect sooner near it.
const ServerGCPercent = 400

// TuneGC gives the process the webhook server's garbage collector target,
// ServerGCPercent, unless gogc (the value of the GOGC environment variable)
// is set: an operator's GOGC wins, and the runtime has already applied it.
// It reports whether it changed the target.
func TuneGC(gogc string) bool {
	if gogc != "" {
		return false
	}
	debug.SetGCPercent(ServerGCPercent)
	return true
}
