// Package progress shows how far a long command has come: a line redrawn
// in place on a terminal, whole lines where the output goes to a file or a
// pipe (a log, CI), which a redrawn line would litter with carriage
// returns. It imports nothing of headroom and sits on the ground floor;
// the commands (probe's launches, profile's and simulate's reading,
// snapshot's recording, audit's count) share it.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// clearLine returns to the start of the line and erases it (ANSI EL).
const clearLine = "\r\033[K"

// Periods of Show: a live line is redrawn twice a second; elsewhere a
// line every 10 seconds is enough to show the command is alive without
// flooding a log.
const (
	LivePeriod  = 500 * time.Millisecond
	PlainPeriod = 10 * time.Second
)

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Line is one status line on a writer. Its methods may be called from
// several goroutines; on a nil *Line or a nil writer they do nothing.
type Line struct {
	w    io.Writer
	live bool

	mu    sync.Mutex
	shown bool // a live line is on the screen
}

// New is a line on w, live when w is a terminal.
func New(w io.Writer) *Line {
	return &Line{w: w, live: w != nil && IsTerminal(w)}
}

// Live reports whether the line is redrawn in place.
func (l *Line) Live() bool { return l != nil && l.live }

// Set shows msg in place of the live line; off a terminal it shows
// nothing (a caller that wants lines there calls Print).
func (l *Line) Set(msg string) {
	if !l.Live() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set(msg)
}

func (l *Line) set(msg string) {
	fmt.Fprint(l.w, clearLine+msg)
	l.shown = true
}

// Print writes msg as a line of its own; on a terminal it takes the live
// line's place, and the next Set draws below it.
func (l *Line) Print(msg string) {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.print(msg)
}

func (l *Line) print(msg string) {
	if l.shown {
		fmt.Fprint(l.w, clearLine)
		l.shown = false
	}
	fmt.Fprintln(l.w, msg)
}

// Clear erases the live line, if one is shown.
func (l *Line) Clear() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		fmt.Fprint(l.w, clearLine)
		l.shown = false
	}
}

// Every shows msg() every live period on a terminal (Set) and every plain
// period elsewhere (Print; 0 shows nothing there), until the returned
// function is called, which clears the live line. An empty msg() shows
// nothing that time. msg is called with the line's lock held, so that
// what it reads and what it draws cannot be overtaken by a Set or a Print;
// it must not call the line's methods.
func (l *Line) Every(live, plain time.Duration, msg func() string) (stop func()) {
	period := plain
	if l.Live() {
		period = live
	}
	if l == nil || l.w == nil || period <= 0 {
		return func() {}
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				l.mu.Lock()
				if m := msg(); m != "" && l.live {
					l.set(m)
				} else if m != "" {
					l.print(m)
				}
				l.mu.Unlock()
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		l.Clear()
	}
}

// Show shows msg() on w, a live line every LivePeriod on a terminal and a
// plain line every PlainPeriod elsewhere, until the returned function is
// called.
func Show(w io.Writer, msg func() string) (stop func()) {
	return New(w).Every(LivePeriod, PlainPeriod, msg)
}
