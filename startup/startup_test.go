package startup

import (
	"strings"
	"testing"
	"time"
)

// Llama-3.1-70B-Instruct's checkpoint: 141,107,412,992 bytes (its
// model.safetensors.index.json total_size, as the model catalog records
// it); in bf16 at TP 4 each GPU holds about a quarter of it.
const (
	llama70B     = 141107412992
	llama70BRank = llama70B / 4
	llama8B      = 16060522496 // Llama-3.1-8B-Instruct's total_size
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name            string
		in              Input
		load, total     time.Duration
		window          time.Duration
		summaryContains string
	}{
		{
			// 141.107 GB at 1 GB/s = 141.1 s, read; a rank's 35.3 GB at
			// 3 GB/s = 11.8 s, copy, overlapped: 141 s (whole seconds).
			// 30 + 141 + 60 = 231 s; the probe window twice that.
			name: "70B TP 4, local (the default)",
			in:   Input{CheckpointBytes: llama70B, RankWeightBytes: llama70BRank, Ranks: 4},
			load: 141 * time.Second, total: 231 * time.Second, window: 462 * time.Second,
			summaryContains: "3m51s (30s pod start + 2m21s reading 141 GB from local storage + 1m0s engine start)",
		},
		{
			// 141,107,412,992 B / (125 × 2^20 B/s = 131,072,000) = 1076.6 s.
			name: "70B TP 4, network",
			in:   Input{CheckpointBytes: llama70B, RankWeightBytes: llama70BRank, Ranks: 4, Storage: Network},
			load: 1077 * time.Second, total: 1167 * time.Second, window: 2334 * time.Second,
			summaryContains: "from network storage",
		},
		{
			// The page cache is not the bound: 16.06 GB at 3 GB/s = 5.35 s.
			name: "8B TP 1, cached",
			in:   Input{CheckpointBytes: llama8B, RankWeightBytes: llama8B, Ranks: 1, Storage: Cached},
			load: 5 * time.Second, total: 95 * time.Second, window: 190 * time.Second,
			summaryContains: "copying 16 GB a GPU from the page cache",
		},
		{
			// No checkpoint size: the GPUs' weights, 4 × 35.28 GB, are read.
			name: "checkpoint size unknown",
			in:   Input{RankWeightBytes: llama70BRank, Ranks: 4},
			load: 141 * time.Second, total: 231 * time.Second, window: 462 * time.Second,
		},
		{
			name: "dummy weights read nothing",
			in:   Input{CheckpointBytes: llama70B, RankWeightBytes: llama70BRank, Ranks: 4, LoadFormat: "dummy", Storage: Network},
			load: 0, total: 90 * time.Second, window: 180 * time.Second,
			summaryContains: "no weights read (--load-format dummy)",
		},
	} {
		e := Of(tc.in)
		if e.Load != tc.load || e.Total != tc.total || e.ProbeWindow() != tc.window {
			t.Errorf("%s: load %s total %s window %s, want %s %s %s", tc.name, e.Load, e.Total, e.ProbeWindow(), tc.load, tc.total, tc.window)
		}
		if !strings.Contains(e.Summary(), tc.summaryContains) {
			t.Errorf("%s: summary %q lacks %q", tc.name, e.Summary(), tc.summaryContains)
		}
	}
}

// Weights per rank: at TP 8 on cached storage the copy of an eighth runs in
// parallel, so it takes an eighth of the TP 1 time.
func TestRankShareOnCached(t *testing.T) {
	one := Of(Input{CheckpointBytes: llama70B, RankWeightBytes: llama70B, Ranks: 1, Storage: Cached})
	eight := Of(Input{CheckpointBytes: llama70B, RankWeightBytes: llama70B / 8, Ranks: 8, Storage: Cached})
	// 141.1 GB / 3 GB/s = 47.04 s -> 47 s; 17.64 GB / 3 GB/s = 5.88 s -> 6 s.
	if one.Load != 47*time.Second || eight.Load != 6*time.Second {
		t.Errorf("cached loads %s (TP 1) and %s (TP 8), want 47s and 6s", one.Load, eight.Load)
	}
}

func TestParseStorage(t *testing.T) {
	for in, want := range map[string]Storage{"": Local, "network": Network, " Cached ": Cached, "LOCAL": Local} {
		if got, err := ParseStorage(in); err != nil || got != want {
			t.Errorf("ParseStorage(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := ParseStorage("nfs")
	if err == nil || err.Error() != `unknown storage class "nfs": give cached, local or network (where the checkpoint is read from at start-up)` {
		t.Errorf("ParseStorage(nfs): %v", err)
	}
}

// FuzzParseStorage: any text is a class or one line of error, never a
// panic; a class it accepts reads back as itself.
func FuzzParseStorage(f *testing.F) {
	f.Add("network")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStorage(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if again, err := ParseStorage(string(st)); err != nil || again != st {
			t.Fatalf("%q read as %q, which reads back as %q, %v", s, st, again, err)
		}
	})
}
