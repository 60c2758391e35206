package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// shortLog is 1,200 requests 100 ms apart (10 req/s for 120 s) of
// 800-1,199 prompt and 150-249 output tokens: chat-sized requests, about
// 1,200 tokens each, far below a quarter of max-model-len.
func shortLog() string {
	var b strings.Builder
	for i := range 1200 {
		ms := 100 * i
		fmt.Fprintf(&b, "2026-11-20T10:%02d:%02d.%03dZ level=info msg=done req_id=r%d input_tokens=%d output_tokens=%d status=200\n",
			ms/60000, ms/1000%60, ms%1000, i, 800+i*37%400, 150+i*53%100)
	}
	return b.String()
}

var planSeqsBase = []string{"plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--max-model-len", "32768", "-o", "json"}

// The worked scenario: Llama-3.1-8B on one H100-80GB at max-model-len
// 32768, where the KV cache at the recommended utilization holds about
// 488,000 tokens (vLLM 0.33.0: Llama runs on Model Runner V2, whose
// profile run has no top-k/top-p pass). Without traffic the plan keeps
// vLLM's max-num-seqs (1024 on an H100), names the one rule, and says what
// the cache holds at which utilization. The
// traffic (shortLog, profiled in windows of 1 minute: 600 requests in the
// busiest, 10 req/s of about 1,200 tokens each) is replayed as 20,000
// Poisson arrivals on every candidate: a request lives about 5 s (E2E p99),
// so about 10 × 5 = 50 are in flight (Little's law) and a cap of 8 or 16
// makes requests queue for the whole run, 64 binds at the peaks only (its
// tail within a few percent of the others'), and from 128 up the cap never
// binds and every run is the same. The chosen value is vLLM's 1024 or 64,
// whichever BetterTrial prefers at that margin; either way the plan keeps
// everything else.
func TestPlanProfileChoosesMaxNumSeqs(t *testing.T) {
	logFile := writeFile(t, "req.log", shortLog())
	code, prof, errs := run(t, offline, "profile", logFile, "--window", "1m", "-o", "json")
	if code != 0 {
		t.Fatalf("profile: exit %d: %s", code, errs)
	}
	profFile := writeFile(t, "profile.json", prof)

	code, plain, errs := run(t, offline, planSeqsBase...)
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	var without report.Report
	if err := json.Unmarshal([]byte(plain), &without); err != nil {
		t.Fatal(err)
	}
	if without.Recommended.MaxNumSeqs != 1024 || without.Recommended.FromTraffic != nil || strings.Contains(plain, "max_num_seqs_from_traffic") {
		t.Fatalf("without traffic: max-num-seqs %d (want vLLM's 1024), evidence %v", without.Recommended.MaxNumSeqs, without.Recommended.FromTraffic)
	}
	if why := strings.Join(without.Recommended.Why, "\n"); !strings.Contains(why, "max-num-seqs 1024: "+memory.MaxNumSeqsRule) ||
		!strings.Contains(why, fmt.Sprintf("the KV cache holds %s tokens at --gpu-memory-utilization %.2f", vllm.Thousands(without.Recommended.KVCacheTokens), without.Recommended.GPUMemoryUtilization)) {
		t.Fatalf("why: %s", why)
	}

	code, out, errs := run(t, offline, append(planSeqsBase, "--profile", profFile)...)
	if code != 0 {
		t.Fatalf("plan --profile: exit %d: %s", code, errs)
	}
	var with report.Report
	if err := json.Unmarshal([]byte(out), &with); err != nil {
		t.Fatal(err)
	}
	ev := with.Recommended.FromTraffic
	if ev == nil {
		t.Fatalf("no max_num_seqs_from_traffic in %s", out)
	}
	if !strings.Contains(ev.Traffic, "Poisson 10 req/s (its busiest 60s window)") || !strings.Contains(ev.Traffic, "20,000 requests") {
		t.Errorf("traffic: %s", ev.Traffic)
	}
	if ev.Rule != 1024 || ev.MaxNumSeqs != with.Recommended.MaxNumSeqs || (ev.MaxNumSeqs != 1024 && ev.MaxNumSeqs != 64) {
		t.Fatalf("in use %d, chosen %d, recommended %d: want 1024 in use, 1024 or 64 chosen and recommended", ev.Rule, ev.MaxNumSeqs, with.Recommended.MaxNumSeqs)
	}
	// Candidates: vLLM's 1024, then 8 ... 512.
	var seqs []int
	byN := map[int]int{}
	for i, c := range ev.Candidates {
		seqs = append(seqs, c.MaxNumSeqs)
		byN[c.MaxNumSeqs] = i
		if c.Requests != 20000 || c.Rejected != 0 {
			t.Errorf("max-num-seqs %d: %d finished, %d rejected; want all 20,000", c.MaxNumSeqs, c.Requests, c.Rejected)
		}
	}
	if fmt.Sprint(seqs) != "[1024 8 16 32 64 128 256 512]" {
		t.Fatalf("candidates %v", seqs)
	}
	small, best := ev.Candidates[byN[8]], ev.Candidates[byN[1024]]
	// At 8 requests queue: the wait is most of the latency, and the tail is
	// many times the chosen value's; from 64 up every run is the same.
	if small.TTFTP99MS < 0.9*small.E2EP99MS || small.E2EP99MS < 10*best.E2EP99MS || best.Preemptions != 0 {
		t.Errorf("8: E2E p99 %.0f ms, TTFT p99 %.0f ms; 1024: E2E p99 %.0f ms, %d preemptions", small.E2EP99MS, small.TTFTP99MS, best.E2EP99MS, best.Preemptions)
	}
	for _, n := range []int{128, 256, 512} {
		if c := ev.Candidates[byN[n]]; math.Abs(c.E2EP99MS/best.E2EP99MS-1) > 0.02 {
			t.Errorf("max-num-seqs %d: E2E p99 %.0f ms, want the same run as 1024's %.0f (within 2%%)", n, c.E2EP99MS, best.E2EP99MS)
		}
	}
	if c := ev.Candidates[byN[64]]; math.Abs(c.E2EP99MS/best.E2EP99MS-1) > 0.05 {
		t.Errorf("max-num-seqs 64: E2E p99 %.0f ms, want within 5%% of 1024's %.0f", c.E2EP99MS, best.E2EP99MS)
	}
	why := strings.Join(with.Recommended.Why, "\n")
	if !strings.Contains(why, fmt.Sprintf("max-num-seqs %d: chosen by simulating the traffic (8 values tried): E2E p99 ", ev.MaxNumSeqs)) ||
		(ev.MaxNumSeqs == 1024) != strings.Contains(why, "the same as without traffic") {
		t.Errorf("why:\n%s", why)
	}
	if ev.Reason == "" || !strings.Contains(why, ev.Reason) {
		t.Errorf("reason %q not in why", ev.Reason)
	}
	// The rest of the report is the plan without traffic (the pinned
	// pool is sized from the traffic too: TestPinnedKVFromTraffic).
	with.Recommended, without.Recommended = report.RecommendedReport{}, report.RecommendedReport{}
	with.Command, without.Command, with.VLLMArgs, without.VLLMArgs = "", "", nil, nil
	with.PinnedKV, without.PinnedKV, with.PinnedArgs, without.PinnedArgs = nil, nil, nil, nil
	a, _ := json.Marshal(with)
	b, _ := json.Marshal(without)
	if string(a) != string(b) {
		t.Errorf("the plan changed beyond max-num-seqs:\n%s\n%s", a, b)
	}

	// A request log is replayed at its own arrivals.
	code, table, errs := run(t, offline, "plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--max-model-len", "32768", "--profile", logFile)
	if code != 0 {
		t.Fatalf("plan --profile LOG: exit %d: %s", code, errs)
	}
	if !strings.Contains(table, "up to the first 20,000 requests of "+logFile+" at their logged arrivals") ||
		!strings.Contains(table, "max-num-seqs    8: E2E p99") {
		t.Errorf("table:\n%s", table)
	}
}

func TestPlanProfileBadInput(t *testing.T) {
	dir := t.TempDir()
	garbage := writeFile(t, "garbage.txt", "hello\n")
	untimed := writeFile(t, "untimed.log", "input_tokens=100 output_tokens=10\n")
	code, prof, errs := run(t, offline, "profile", untimed, "-o", "json")
	if code != 0 {
		t.Fatalf("profile: %s", errs)
	}
	untimedProf := writeFile(t, "untimed.json", prof)
	base := []string{"plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", dir + "/none.json"}, "--profile " + dir + "/none.json: no such file"},
		{[]string{"--profile", garbage}, "neither a 'headroom profile -o json' output nor a request log"},
		{[]string{"--profile", untimedProf}, "has no time windows (its log lines carry no times), so its rate is unknown: give --rate R"},
		{[]string{"--profile", untimedProf, "--rate", "-1"}, "--rate must be a positive number"},
		{[]string{"--rate", "3"}, "--rate needs --profile FILE"},
		{[]string{"--profile", garbage, "--all-gpus"}, "give --gpu, not --all-gpus"},
	} {
		code, _, errs := run(t, offline, append(base, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	// An untimed profile with a rate runs.
	code, out, errs := run(t, offline, append(base, "--profile", untimedProf, "--rate", "2", "--max-model-len", "4096", "-o", "json")...)
	if code != 0 || !strings.Contains(out, `"traffic": "Poisson 2 req/s (--rate)`) {
		t.Errorf("untimed with --rate: exit %d %s", code, errs)
	}
}

// profile with a model and GPU replays each pool's requests of the log.
// shortLog on one H100-80GB at max-model-len 32768: every request is
// short (under 2,048 tokens), so there is one pool, with max-model-len
// 2048; the rule gives 488,000-odd KV tokens ÷ the pool's p90 of 1,363
// tokens = 358. The replay shows the E2E p99 is about 3 s, so at 10 req/s
// about 10 × 3 = 30 requests are in flight at the worst (Little's law):
// every cap from 64 up never binds and gives the same run (358's
// included), 8 binds and queues. Of equal runs the larger cap wins: vLLM's
// 1024, and the reason says 358 gives the same run.
func TestProfilePoolsChooseMaxNumSeqs(t *testing.T) {
	logFile := writeFile(t, "req.log", shortLog())
	args := []string{"profile", logFile, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--max-model-len", "32768", "-o", "json"}
	code, out, errs := run(t, offline, args...)
	if code != 0 {
		t.Fatalf("profile: exit %d: %s", code, errs)
	}
	var r ProfileReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Pools) != 1 || r.Pools[0].Name != "short" || r.Pools[0].P90Tokens != 1363 {
		t.Fatalf("pools: %+v", r.Pools)
	}
	pool, ev := r.Pools[0], r.PoolSeqs["short"]
	if ev == nil {
		t.Fatalf("no evidence for the short pool: %s", out)
	}
	if ev.Rule != 358 || ev.MaxNumSeqs != 1024 || pool.MaxNumSeqs != 1024 || !strings.Contains(pool.Command, "--max-num-seqs 1024") {
		t.Fatalf("rule %d, chosen %d, pool %d, %s", ev.Rule, ev.MaxNumSeqs, pool.MaxNumSeqs, pool.Command)
	}
	var at128 float64
	for _, c := range ev.Candidates {
		if c.MaxNumSeqs == 128 {
			at128 = c.E2EP99MS
		}
	}
	for _, c := range ev.Candidates {
		if c.Requests != 1200 || c.Preemptions != 0 {
			t.Errorf("max-num-seqs %d: %d finished, %d preemptions; want 1,200 and none", c.MaxNumSeqs, c.Requests, c.Preemptions)
		}
		if (c.MaxNumSeqs >= 64 && c.E2EP99MS != at128) || (c.MaxNumSeqs == 8 && c.E2EP99MS <= at128) {
			t.Errorf("max-num-seqs %d: E2E p99 %.0f ms against %.0f at 128", c.MaxNumSeqs, c.E2EP99MS, at128)
		}
	}
	if !strings.HasSuffix(pool.Why[len(pool.Why)-1], "; 358 gives the same run, and the larger value leaves room for more") {
		t.Errorf("why: %v", pool.Why)
	}
	// Two logs are not one timeline to replay: the rule, and a note.
	second := writeFile(t, "req2.log", shortLog())
	code, out, errs = run(t, offline, append([]string{"profile", logFile, second}, args[2:]...)...)
	if code != 0 || !strings.Contains(out, "only one log file, not stdin, can be replayed") || strings.Contains(out, "pool_max_num_seqs_from_traffic") ||
		!strings.Contains(out, `"max_num_seqs": 358`) {
		t.Errorf("two files: exit %d %s %s", code, errs, out)
	}
}
