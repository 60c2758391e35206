//go:build linux

package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// pacer wakes the sender at its due times. On Linux the sender's goroutine
// keeps its OS thread and sleeps in clock_nanosleep with an absolute
// CLOCK_MONOTONIC deadline: the kernel wakes the thread itself, tens of
// microseconds late, where time.Sleep waits on the runtime's netpoller,
// whose epoll timeout has millisecond granularity, and wakes up to a
// millisecond or more late.
type pacer struct {
	// start is the zero of the schedule on Go's clock, mono the same
	// instant on CLOCK_MONOTONIC, the clock Go's monotonic readings come
	// from on Linux, so a due time means the same on both.
	start time.Time
	mono  int64
	// fallback is set when clock_nanosleep is not allowed (a seccomp
	// profile): the pacer then sleeps as elsewhere.
	fallback bool
}

// pacerKind names how the sender sleeps, for the report.
const pacerKind = "clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) on a locked OS thread"

// newPacer starts a schedule now. Call it on the goroutine that will
// sleep, and call release on that goroutine when done.
func newPacer() (p *pacer, release func()) {
	runtime.LockOSThread()
	// Go's clock is read first: the two readings are two calls, and a
	// thread descheduled between them (up to 126 µs seen under load) must
	// put the kernel's zero after Go's, so a wake-up is never early on the
	// clock the report measures with.
	start := time.Now()
	var ts unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	p = &pacer{start: start, mono: ts.Nano(), fallback: err != nil}
	return p, runtime.UnlockOSThread
}

// sleepUntil returns at start+offset, or at once when that has passed.
func (p *pacer) sleepUntil(offset time.Duration) {
	if !p.fallback {
		ts := unix.NsecToTimespec(p.mono + int64(offset))
		for {
			// An absolute deadline makes a retry after a signal exact.
			err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
			if err == nil {
				return
			}
			if err != unix.EINTR {
				p.fallback = true
				break
			}
		}
	}
	time.Sleep(time.Until(p.start.Add(offset)))
}
