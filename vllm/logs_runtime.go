package vllm

import (
	"strconv"
	"strings"
)

// vLLM's lines while serving: periodic statistics, preemptions, a dead engine.

var (
	kvUsageRe = lazyRE(`KV cache usage: (\d+(?:\.\d+)?)`)
	runningRe = lazyRE(`Running: (\d{1,9})`)
	waitingRe = lazyRE(`(?:Waiting|Pending): (\d{1,9})`)
	// cumulativePreemptRe is V0's running count on each preemption
	// warning (vllm/core/scheduler.py, "total_num_cumulative_preemption=N"):
	// a log cut to its last lines still says how many there were.
	cumulativePreemptRe = lazyRE(`total_num_cumulative_preemption=(\d{1,12})`)
)

func parsePreemption(l string) (LogEvent, bool) {
	if !strings.Contains(l, "KV cache space") && !strings.Contains(l, "is preempted by") &&
		!strings.Contains(l, "Preempted request") && !strings.Contains(l, "preempted request") {
		return LogEvent{}, false
	}
	anchor := "reempt"
	for _, a := range []string{"Sequence group", "Preempted request", "preempted request"} {
		if strings.Contains(l, a) {
			anchor = a
			break
		}
	}
	ev := event(LogPreemption, l, anchor)
	if m := cumulativePreemptRe().FindStringSubmatch(l); m != nil {
		ev.Preemptions, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return ev, true
}

// parseStats reads the statistics line; one whose numbers do not parse
// still says the engine was serving.
func parseStats(l string) (LogEvent, bool) {
	ev := event(LogStats, l, statsAnchor(l))
	if m := kvUsageRe().FindStringSubmatch(l); m != nil {
		if f, err := strconv.ParseFloat(m[1], 64); err == nil && f <= 100 {
			ev.KVUsage = f / 100
		}
	}
	if m := runningRe().FindStringSubmatch(l); m != nil {
		ev.Running, _ = strconv.Atoi(m[1])
	}
	for _, m := range waitingRe().FindAllStringSubmatch(l, 4) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			ev.Waiting = max(ev.Waiting, n)
		}
	}
	return ev, true
}

// statsAnchor starts the message at "Avg prompt throughput" when the line
// has it, else at the usage figure.
func statsAnchor(l string) string {
	if strings.Contains(l, "Avg prompt throughput") {
		return "Avg prompt throughput"
	}
	return "KV cache usage: "
}

func engineDead(anchor string) func(string) (LogEvent, bool) {
	return func(l string) (LogEvent, bool) { return event(LogEngineDead, l, anchor), true }
}
