package progress

import (
	"bytes"
	"headroom.dev/headroom/internal/testkit"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLiveLine: on a terminal Set redraws in place, Print clears the live
// line and writes a whole one, Clear erases only a line that is shown.
func TestLiveLine(t *testing.T) {
	var b bytes.Buffer
	l := &Line{w: &b, live: true}
	l.Clear()
	l.Set("launch 1  loading")
	l.Set("launch 1  profiling")
	l.Print("launch 1: started in 42 s")
	l.Print("note")
	l.Set("launch 2  loading")
	l.Clear()
	l.Clear()
	want := "\r\033[Klaunch 1  loading" + "\r\033[Klaunch 1  profiling" + "\r\033[Klaunch 1: started in 42 s\n" + "note\n" +
		"\r\033[Klaunch 2  loading" + "\r\033[K"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

// TestPlainLine: off a terminal only Print writes, one whole line each.
func TestPlainLine(t *testing.T) {
	var b bytes.Buffer
	l := New(&b)
	if l.Live() {
		t.Fatal("a buffer is not a terminal")
	}
	l.Set("launch 1  loading")
	l.Print("launch 1: started in 42 s")
	l.Clear()
	if b.String() != "launch 1: started in 42 s\n" {
		t.Errorf("got %q", b.String())
	}
	var nilLine *Line
	nilLine.Set("x")
	nilLine.Print("x")
	nilLine.Clear()
	New(nil).Print("x")
	New(nil).Every(time.Millisecond, time.Millisecond, func() string { return "x" })()
}

// TestEvery: the message is drawn every period, an empty one skipped, and
// stopping clears a live line; off a terminal the plain period prints
// whole lines, and a plain period of 0 prints nothing.
func TestEvery(t *testing.T) {
	for _, live := range []bool{true, false} {
		var b testkit.SyncBuffer
		l := &Line{w: &b, live: live}
		var mu sync.Mutex
		n := 0
		stop := l.Every(time.Millisecond, time.Millisecond, func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			if n%2 == 0 {
				return ""
			}
			return "tick"
		})
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(b.String(), "tick") < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		stop()
		got := b.String()
		if strings.Count(got, "tick") < 3 {
			t.Fatalf("live %t: %q after 10 s", live, got)
		}
		if live && (!strings.HasSuffix(got, "tick\r\033[K") || strings.Contains(got, "\n")) {
			t.Errorf("live: %q", got)
		}
		if !live && (strings.Contains(got, "\r") || strings.ReplaceAll(got, "tick\n", "") != "") {
			t.Errorf("plain: %q", got)
		}
	}
	var b testkit.SyncBuffer
	stop := (&Line{w: &b}).Every(time.Millisecond, 0, func() string { return "tick" })
	time.Sleep(5 * time.Millisecond)
	stop()
	if b.String() != "" {
		t.Errorf("plain period 0 printed %q", b.String())
	}
}

// TestIsTerminal: a pipe and a regular file are not terminals.
func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(w) || IsTerminal(f) || IsTerminal(&bytes.Buffer{}) {
		t.Error("a pipe, a file or a buffer taken for a terminal")
	}
}
