package loadtest

import (
	"context"
	"headroom.dev/headroom/workload"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"headroom.dev/headroom/internal/fakeopenai"
)

// TestCalibrationFit: replies on the line tokens = 12 + 1.25 × words give
// back 1.25 and 12, so 1262 tokens is (1262 − 12) / 1.25 = 1000 words.
// One length alone gives a rate through the origin; a fit outside
// 0.2..10 tokens per word (a server whose usage is not real) is refused.
func TestCalibrationFit(t *testing.T) {
	c := NewCalibration()
	if got := c.Words(1333); got != 1000 {
		t.Errorf("before any reply %d words for 1333 tokens, want 1333 × 0.75 = 1000", got)
	}
	c.Observe(100, 12+125)
	if r, f := c.Rate(); r != 1.37 || f != 0 {
		t.Errorf("one reply: %v per word, %v fixed; want 137/100 = 1.37, 0", r, f)
	}
	c.Observe(400, 12+500)
	if r, f := c.Rate(); r != 1.25 || f != 12 {
		t.Errorf("two lengths: %v per word, %v fixed; want 1.25, 12", r, f)
	}
	if got := c.Words(1262); got != 1000 {
		t.Errorf("Words(1262) = %d, want 1000", got)
	}
	bad := NewCalibration()
	bad.Observe(100, 5000)
	if r, _ := bad.Rate(); r != defaultTokensPerWord {
		t.Errorf("50 tokens per word accepted: %v", r)
	}
}

func TestPromptWords(t *testing.T) {
	p := prompt(rand.New(rand.NewPCG(1, 2)), 500)
	if n := len(strings.Fields(p)); n != 500 {
		t.Errorf("%d words, want 500", n)
	}
	if q := prompt(rand.New(rand.NewPCG(1, 3)), 500); q[:40] == p[:40] {
		t.Errorf("two streams begin alike: %q", q[:40])
	}
}

// fakeClock jumps to the time slept until, so an open loop's sends
// happen exactly at their due times on its reading.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// SleepUntil jumps, except over a minute or more: that is the watcher's
// reading interval in the test, and it waits for the end instead.
func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) error {
	if t.Sub(c.Now()) >= time.Minute {
		<-ctx.Done()
		return ctx.Err()
	}
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
	return ctx.Err()
}

// TestOpenLoopDueTimes: with the clock driven by the loop, each send is
// at its due time exactly, and --duration 1s cuts the constant 4/s
// schedule after the item due at 1 s (250, 500, 750, 1000 ms).
func TestOpenLoopDueTimes(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{})
	defer srv.Close()
	c := client(srv, EndpointCompletions)
	c.Clock = &fakeClock{now: time.Unix(1e9, 0)}
	r := run(t, Config{Client: c, Duration: time.Second, Interval: time.Hour,
		Stream: stream(t, workload.Spec{Rate: 4, Arrival: workload.Constant, Duration: 1, Prompt: workload.Fixed(5), Output: workload.Fixed(2)})})
	if r.Requests != 4 || r.SendLag.Max != 0 {
		t.Errorf("%d requests, send lag max %v ms; want 4, 0", r.Requests, r.SendLag.Max)
	}
	if r.SendRate.Achieved != 4 {
		t.Errorf("achieved rate %v, want 3 gaps over 750 ms = 4/s", r.SendRate.Achieved)
	}
}

// The streamed prompt is the text prompt builds from the same generator,
// and Len counts its bytes; read a few bytes at a time it is the same.
func TestPromptStreamed(t *testing.T) {
	for _, n := range []int{0, 1, 7, 500} {
		p := Prompt{Seed: 3, Stream: 9, Words: n}
		want := prompt(rand.New(rand.NewPCG(3, 9)), n)
		if got := p.String(); got != want {
			t.Fatalf("%d words: streamed %q, built %q", n, got, want)
		}
		if p.Len() != int64(len(want)) {
			t.Errorf("%d words: Len %d, text %d bytes", n, p.Len(), len(want))
		}
		var b strings.Builder
		buf := make([]byte, 3)
		r := p.Reader()
		for {
			k, err := r.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		if b.String() != want {
			t.Errorf("%d words in 3-byte reads: %q", n, b.String())
		}
	}
}
