package cli

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
)

// TestPinnedKVReplans: the pinned pool plan offers is planned again with
// the pinned flags (-o args --pin-kv pasted back) and fits, with the KV
// tokens it promised.
func TestPinnedKVReplans(t *testing.T) {
	base := []string{"plan", "--gpu", "H100-80GB", "--vllm-version", "0.21.0", "--offline"}
	cmd := []string{"--", "vllm", "serve", "Qwen/Qwen3-14B", "--max-model-len", "8192"}
	code, out, errs := run(t, offline, append(append(base, "-o", "json"), cmd...)...)
	if code != ExitFits {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.PinnedKV == nil || !r.PinnedKV.Fits || r.PinnedKV.Flag != "--kv-cache-memory-bytes" {
		t.Fatalf("pinned %+v", r.PinnedKV)
	}
	code, args, errs := run(t, offline, append(append(base, "-o", "args", "--pin-kv"), cmd...)...)
	if code != ExitFits || !strings.Contains(args, "--kv-cache-memory-bytes") || strings.Contains(args, "--gpu-memory-utilization") {
		t.Fatalf("exit %d: %s%s", code, args, errs)
	}
	again := append(append(append([]string{}, base...), "-o", "json", "--", "vllm", "serve", "Qwen/Qwen3-14B"), strings.Fields(args)...)
	code, out, errs = run(t, offline, again...)
	if code != ExitFits {
		t.Fatalf("the pinned flags do not fit: exit %d: %s%s", code, errs, out)
	}
	var p report.Report
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.KVCacheTokens != r.PinnedKV.KVTokens || p.KVCacheTokens != r.Recommended.KVCacheTokens {
		t.Errorf("pinned plan %d KV tokens, promised %d, the recommendation %d", p.KVCacheTokens, r.PinnedKV.KVTokens, r.Recommended.KVCacheTokens)
	}
	// The release without the flag is told so (exit 2).
	if code, _, errs := run(t, offline, "plan", "--gpu", "H100-80GB", "--vllm-version", "0.10.1", "--offline", "-o", "args", "--pin-kv", "--model", "Qwen/Qwen3-14B", "--max-model-len", "8192"); code != ExitBadInput || !strings.Contains(errs, "0.10.2") {
		t.Errorf("0.10.1: exit %d: %s", code, errs)
	}
}

// TestPinnedPoolTooBig: a 60 GiB pool beside Qwen3-14B's 27.5 GiB of
// weights does not fit the H100's 79.19 GiB less its CUDA context: the
// start-up check names the pinned pool.
func TestPinnedPoolTooBig(t *testing.T) {
	code, out, _ := run(t, offline, "plan", "--gpu", "H100-80GB", "--vllm-version", "0.21.0", "--offline", "-o", "json",
		"--", "vllm", "serve", "Qwen/Qwen3-14B", "--max-model-len", "8192", "--kv-cache-memory-bytes", "64424509440")
	if code != ExitNoFit {
		t.Fatalf("exit %d", code)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range r.Problems {
		found = found || p.Code == memory.CodePinnedPoolDoesntFit
	}
	if !found {
		t.Errorf("problems %+v", r.Problems)
	}
}

// TestPinnedKVFromTraffic: with a traffic profile the pinned pool is the
// simulated peak of the chosen max-num-seqs at 80% of the pool, in whole
// blocks, and the pinned plan fits.
func TestPinnedKVFromTraffic(t *testing.T) {
	logFile := writeFile(t, "req.log", shortLog())
	code, prof, errs := run(t, offline, "profile", logFile, "--window", "1m", "-o", "json")
	if code != 0 {
		t.Fatalf("profile: exit %d: %s", code, errs)
	}
	code, out, errs := run(t, offline, append(planSeqsBase, "--profile", writeFile(t, "profile.json", prof))...)
	if code != 0 {
		t.Fatalf("plan --profile: exit %d: %s", code, errs)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	ev, p := r.Recommended.FromTraffic, r.PinnedKV
	if ev == nil || p == nil {
		t.Fatalf("evidence %v, pinned %v", ev, p)
	}
	var peakUsage float64
	for _, c := range ev.Candidates {
		if c.MaxNumSeqs == ev.MaxNumSeqs {
			peakUsage = c.MaxKVUsage
		}
	}
	// peak tokens = ⌈usage × the recommended KV tokens⌉; the pool holds
	// ⌈peak / 0.8⌉ tokens rounded up to 16-token blocks.
	peak := int64(math.Ceil(peakUsage * float64(r.Recommended.KVCacheTokens)))
	want := (int64(math.Ceil(float64(peak)/0.8)) + 15) / 16 * 16
	if !p.Fits || p.KVTokens != want || !strings.Contains(p.Why, "simulated") {
		t.Errorf("pinned %d KV tokens (fits %t), want %d from a peak of %d: %s", p.KVTokens, p.Fits, want, peak, p.Why)
	}
}
