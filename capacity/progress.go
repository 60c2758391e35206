package capacity

import (
	"fmt"
	"sync"
)

// Progress is where one option's sizing stands.
type Progress struct {
	GPU string
	// Step says what is being simulated, in words: "one replica's SLO
	// capacity (run 5)", "windows: 34 of 144 sized", "replaying the
	// autoscaler, 1 to 7 replicas: 12h0m0s of 24h0m0s".
	Step string
	// Done is the share of the option's work done: an estimate from the
	// steps' usual shares of the time (the capacity search about a tenth,
	// the windows about a third, the replays the rest), 0 to 1.
	Done float64
}

// Phases of a sizing and where each begins in Progress.Done.
const (
	phaseCapacity = iota
	phaseWindows
	phaseReplay
	phaseDone
)

var phaseStart = [...]float64{0, 0.10, 0.45, 1}

// expectedRuns is about how many one-replica runs the capacity search
// makes (the doubling, the bisection, the max-num-seqs candidates and a
// second search); past it the share stays at the phase's end.
const expectedRuns = 20

// tracker turns a sizing's steps into Progress.
type tracker struct {
	mu    sync.Mutex
	on    func(Progress)
	gpu   string
	phase int
	step  string
	runs  int
	frac  float64
	// detail is the step's count ("run 5", "34 of 144 sized").
	detail string
}

func newTracker(on func(Progress), gpu string) *tracker {
	return &tracker{on: on, gpu: gpu}
}

func (t *tracker) emit() {
	if t.on == nil {
		return
	}
	start, end := phaseStart[t.phase], phaseStart[min(t.phase+1, phaseDone)]
	step := t.step
	if t.detail != "" {
		step += ": " + t.detail
	}
	t.on(Progress{GPU: t.gpu, Step: step, Done: start + (end-start)*min(max(t.frac, 0), 1)})
}

func (t *tracker) setPhase(p int, step string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p != t.phase {
		t.frac, t.detail = 0, ""
	}
	t.phase, t.step = p, step
	if p == phaseCapacity {
		t.frac = float64(t.runs) / expectedRuns
	}
	t.emit()
}

// run counts a one-replica run of the capacity search.
func (t *tracker) run() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs++
	if t.phase == phaseCapacity {
		t.frac = min(float64(t.runs)/expectedRuns, 0.95)
		t.detail = fmt.Sprintf("run %d", t.runs)
		t.emit()
	}
}

// windows says how many windows are sized.
func (t *tracker) windows(done, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if total > 0 {
		t.frac = float64(done) / float64(total)
	}
	t.detail = fmt.Sprintf("%d of %d sized", done, total)
	t.emit()
}

// replay says how far through the traffic a replay is (0 to 1).
func (t *tracker) replay(frac float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.frac = frac
	t.detail = fmt.Sprintf("%.0f%% of the traffic", 100*frac)
	t.emit()
}
