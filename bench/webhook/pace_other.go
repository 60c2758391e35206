//go:build !linux

package main

import "time"

// pacer wakes the sender at its due times with time.Sleep: outside Linux
// there is no portable absolute-deadline sleep, and the report's timer
// floor shows what that costs.
type pacer struct {
	start time.Time
}

// pacerKind names how the sender sleeps, for the report.
const pacerKind = "time.Sleep"

// newPacer starts a schedule now; release does nothing here.
func newPacer() (p *pacer, release func()) {
	return &pacer{start: time.Now()}, func() {}
}

// sleepUntil returns at start+offset, or at once when that has passed.
func (p *pacer) sleepUntil(offset time.Duration) {
	time.Sleep(time.Until(p.start.Add(offset)))
}
