package graceful

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A byte gate admits by size: ten requests of the floor fill a budget of
// ten floors at once (a count gate of four would have queued six), the
// next two wait, the one after is refused at once; a waiter past maxWait
// gets ErrQueueTimeout; a request larger than the budget counts as the
// whole budget and enters once everything is released.
func TestByteGate(t *testing.T) {
	g := NewByteGate("reviews", 100, 10, 2, 50*time.Millisecond)
	ctx := context.Background()
	var releases []func()
	for i := range 10 {
		r, err := g.Enter(ctx, 1) // counted as the floor, 10
		if err != nil {
			t.Fatalf("request %d of the floor: %v", i, err)
		}
		releases = append(releases, r)
	}
	// The budget is full: two wait (and time out), the third is refused.
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := g.Enter(ctx, 10); errs <- err }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for g.Waiting() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := g.Enter(ctx, 10); !errors.Is(err, ErrBusy) {
		t.Errorf("third waiter: %v, want ErrBusy", err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrQueueTimeout) {
			t.Errorf("waiter past 50ms: %v, want ErrQueueTimeout", err)
		}
	}
	for _, r := range releases {
		r()
	}
	// 1,000 bytes count as the budget: it waits for all ten to leave (a
	// gate whose waiters wait long enough for the test on a busy machine).
	g = NewByteGate("reviews", 100, 10, 2, time.Minute)
	releases = releases[:0]
	for range 10 {
		r, err := g.Enter(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := g.Enter(context.Background(), 1000)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	deadline = time.Now().Add(5 * time.Second)
	for g.Waiting() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for i, r := range releases {
		select {
		case <-got:
			t.Fatalf("the budget-sized request entered with %d of ten released", i)
		default:
		}
		r()
	}
	select {
	case r := <-got:
		if r != nil {
			r()
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the budget-sized request did not enter once all were released")
	}
}
