package sim

import (
	"context"
	"testing"

	"headroom.dev/headroom/model"
)

// FuzzEngine runs random traffic through random small engines, with and
// without pipeline stages, hybrid ones with Mamba state blocks, tight
// pools among them (preemptions of
// requests whose tokens are in flight): every request finishes or is
// rejected, with its outputs and times in order, and the pool is empty at
// the end.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{2, 40, 4, 16, 5, 30, 8, 0, 60, 4, 1})
	f.Add([]byte{1, 3, 2, 8, 9, 90, 30, 3, 200, 50, 0})
	f.Add([]byte{4, 12, 8, 32, 12, 17, 3, 1, 17, 3, 2, 250, 200, 9})
	f.Add([]byte{13, 30, 4, 64, 5, 200, 60, 2, 90, 9, 0, 120, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		at := func(i int) int {
			if i < len(b) {
				return int(b[i])
			}
			return 0
		}
		cfg := Config{NumGPUBlocks: 2 + at(1), BlockSize: 16, MaxNumSeqs: 1 + at(2)%16, MaxNumBatchedTokens: 1 + at(3)%128,
			MaxModelLen: 4096, Timer: Fixed(0.010), PipelineStages: 1 + at(0)%4, FirstEvents: true}
		// A hybrid engine (a full and a linear-state group) keeping one, two
		// or one a block of Mamba state blocks (--mamba-cache-mode).
		switch at(0) >> 2 % 4 {
		case 1:
			cfg.Groups = []Group{{Kind: model.Full}, {Kind: model.Linear}}
		case 2:
			cfg.Groups = []Group{{Kind: model.Full}, {Kind: model.Linear}}
			cfg.StateBlocks = func(int) int { return 2 }
		case 3:
			cfg.Groups = []Group{{Kind: model.Full}, {Kind: model.Linear}}
			cfg.StateBlocks = func(n int) int { return cdiv(n, 16) }
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var src sliceSource
		due := 0.0
		for i := 4; i+2 < len(b) && len(src) < 40; i += 3 {
			due += float64(b[i]%8) * 0.003
			src = append(src, Request{ID: string(rune('a' + len(src))), Arrival: due, PromptTokens: 1 + int(b[i+1]), OutputTokens: 1 + int(b[i+2])%64})
		}
		n := len(src)
		finished := 0
		rep, err := Run(context.Background(), e, &src, RunOptions{OnFinish: func(ev Event) {
			finished++
			if !(ev.Arrival <= ev.FirstToken && ev.FirstToken <= ev.Finish) || ev.Generated != ev.Output {
				t.Fatalf("request %s: arrival %v, first token %v, finish %v, %d of %d tokens", ev.ID, ev.Arrival, ev.FirstToken, ev.Finish, ev.Generated, ev.Output)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.FellBehind != nil {
			return // stopped at the backlog bound, with requests still held
		}
		if int64(finished)+rep.Rejected != int64(n) || rep.Requests != int64(finished) {
			t.Fatalf("%d requests: %d finished, %d rejected, %d in the report", n, finished, rep.Rejected, rep.Requests)
		}
		if g := e.Gauges(); g.KVUsage != 0 || g.Running != 0 || g.Waiting != 0 {
			t.Fatalf("after the run: %+v", g)
		}
	})
}
