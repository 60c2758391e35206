package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
)

// shortLog is 2,400 requests 50 ms apart (20 req/s for 120 s) of 800-1,199
// prompt and 150-249 output tokens: chat-sized requests, about 1,200
// tokens each, far below the quarter of max-model-len the planner's rule
// sizes max-num-seqs for.
func shortLog() string {
	var b strings.Builder
	for i := range 2400 {
		ms := 50 * i
		fmt.Fprintf(&b, "2026-11-20T10:%02d:%02d.%03dZ level=info msg=done req_id=r%d input_tokens=%d output_tokens=%d status=200\n",
			ms/60000, ms/1000%60, ms%1000, i, 800+i*37%400, 150+i*53%100)
	}
	return b.String()
}

var planSeqsBase = []string{"plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--max-model-len", "32768", "-o", "json"}

// The worked scenario: Llama-3.1-8B on one H100-80GB at max-model-len
// 32768. The rule: at the recommended utilization 0.95 (and vLLM's
// max-num-seqs 1024 on an H100) the KV cache holds 468,880 tokens; a
// quarter of 32768 is 8192; 468,880 / 8192 = 57.2, so max-num-seqs 57.
// The traffic (shortLog, profiled in windows of 1 minute: 1,200 requests
// in the busiest, 20 req/s) asks for about 1,200 tokens a request, so 57
// requests fill 57 × 1,200 ≈ 68k of the 475k KV tokens and the rest of
// the cache idles while requests queue: each takes ~200 decode steps, and
// at 20 req/s more than 57 are in flight (Little's law: 20 req/s × a few
// seconds each), so under the rule the queue grows for the whole run and
// a request's wait (TTFT) is most of its E2E. A larger max-num-seqs uses
// the cache and keeps up. The plan must choose a larger value, say why
// against the rule, and keep the rest of the report as without traffic.
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
	if without.Recommended.MaxNumSeqs != 57 || without.Recommended.FromTraffic != nil || strings.Contains(plain, "max_num_seqs_from_traffic") {
		t.Fatalf("without traffic: max-num-seqs %d (want the rule's 57), evidence %v", without.Recommended.MaxNumSeqs, without.Recommended.FromTraffic)
	}
	if !strings.Contains(strings.Join(without.Recommended.Why, "\n"), "max-num-seqs 57: 468880 KV tokens hold 57 requests of 8192 tokens") {
		t.Fatalf("the rule's arithmetic changed: %v", without.Recommended.Why)
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
	if !strings.Contains(ev.Traffic, "Poisson 20 req/s (its busiest 60s window)") || !strings.Contains(ev.Traffic, "20,000 requests") {
		t.Errorf("traffic: %s", ev.Traffic)
	}
	if ev.Rule != 57 || ev.MaxNumSeqs != with.Recommended.MaxNumSeqs || ev.MaxNumSeqs <= 57 {
		t.Fatalf("rule %d, chosen %d, recommended %d: want the rule's 57 and a larger choice", ev.Rule, ev.MaxNumSeqs, with.Recommended.MaxNumSeqs)
	}
	// Candidates: vLLM's 1024, 8 ... 512 and the rule's 57.
	var seqs []int
	byN := map[int]int{}
	for i, c := range ev.Candidates {
		seqs = append(seqs, c.MaxNumSeqs)
		byN[c.MaxNumSeqs] = i
		if c.Requests != 20000 || c.Rejected != 0 {
			t.Errorf("max-num-seqs %d: %d finished, %d rejected; want all 20,000", c.MaxNumSeqs, c.Requests, c.Rejected)
		}
	}
	if fmt.Sprint(seqs) != "[1024 8 16 32 64 128 256 512 57]" {
		t.Fatalf("candidates %v", seqs)
	}
	rule, best := ev.Candidates[byN[57]], ev.Candidates[byN[ev.MaxNumSeqs]]
	// Under the rule requests queue: the wait is most of the latency, and
	// the tail is many times the chosen value's.
	if rule.TTFTP99MS < 0.9*rule.E2EP99MS || rule.E2EP99MS < 10*best.E2EP99MS || best.Preemptions != 0 {
		t.Errorf("rule: E2E p99 %.0f ms, TTFT p99 %.0f ms; chosen %d: E2E p99 %.0f ms, %d preemptions", rule.E2EP99MS, rule.TTFTP99MS, best.MaxNumSeqs, best.E2EP99MS, best.Preemptions)
	}
	why := strings.Join(with.Recommended.Why, "\n")
	want := fmt.Sprintf("max-num-seqs %d: chosen by simulating the traffic (9 values tried): E2E p99 ", ev.MaxNumSeqs)
	if !strings.Contains(why, want) || !strings.Contains(why, "; 57 would give E2E p99 ") || strings.Contains(why, "typical context") {
		t.Errorf("why:\n%s", why)
	}
	if ev.Reason == "" || !strings.Contains(why, ev.Reason) {
		t.Errorf("reason %q not in why", ev.Reason)
	}
	if !strings.Contains(with.Command, fmt.Sprintf("--max-num-seqs %d", ev.MaxNumSeqs)) {
		t.Errorf("command: %s", with.Command)
	}
	// Only the recommendation moves: the plan of the given settings is the same.
	if with.KVCacheTokens != without.KVCacheTokens || with.Recommended.MaxModelLen != without.Recommended.MaxModelLen ||
		with.Recommended.GPUMemoryUtilization != without.Recommended.GPUMemoryUtilization {
		t.Errorf("the plan moved: %d vs %d KV tokens", with.KVCacheTokens, without.KVCacheTokens)
	}

	// The log itself, replayed at its own arrivals (the same 20 req/s),
	// chooses above the rule too; the table shows every candidate.
	code, table, errs := run(t, offline, "plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--max-model-len", "32768", "--profile", logFile)
	if code != 0 {
		t.Fatalf("plan --profile LOG: exit %d: %s", code, errs)
	}
	if !strings.Contains(table, "up to the first 20,000 requests of "+logFile+" at their logged arrivals") ||
		!strings.Contains(table, "max-num-seqs   57: E2E p99") || strings.Contains(table, "--max-num-seqs 57\n") {
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
// 2048; the rule gives 468,880-odd KV tokens ÷ the pool's p90 of 1,363
// tokens = 344. The replay shows the E2E p99 is about 6 s, so at 20 req/s
// about 20 × 6 = 120 requests are in flight at the worst (Little's law):
// every cap from 128 up never binds and gives the same run (344's
// included), 64 and below bind and queue. Of equal runs the larger cap
// wins: vLLM's 1024, and the reason says 344 gives the same run.
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
	if ev.Rule != 344 || ev.MaxNumSeqs != 1024 || pool.MaxNumSeqs != 1024 || !strings.Contains(pool.Command, "--max-num-seqs 1024") {
		t.Fatalf("rule %d, chosen %d, pool %d, %s", ev.Rule, ev.MaxNumSeqs, pool.MaxNumSeqs, pool.Command)
	}
	var at128 float64
	for _, c := range ev.Candidates {
		if c.MaxNumSeqs == 128 {
			at128 = c.E2EP99MS
		}
	}
	for _, c := range ev.Candidates {
		if c.Requests != 2400 || c.Preemptions != 0 {
			t.Errorf("max-num-seqs %d: %d finished, %d preemptions; want 2,400 and none", c.MaxNumSeqs, c.Requests, c.Preemptions)
		}
		if binds := c.MaxNumSeqs < 128; binds != (c.E2EP99MS > at128) {
			t.Errorf("max-num-seqs %d: E2E p99 %.0f ms against %.0f at 128", c.MaxNumSeqs, c.E2EP99MS, at128)
		}
	}
	if !strings.HasSuffix(pool.Why[len(pool.Why)-1], "; 344 gives the same run, and the larger value leaves room for more") {
		t.Errorf("why: %v", pool.Why)
	}
	// Two logs are not one timeline to replay: the rule, and a note.
	second := writeFile(t, "req2.log", shortLog())
	code, out, errs = run(t, offline, append([]string{"profile", logFile, second}, args[2:]...)...)
	if code != 0 || !strings.Contains(out, "only one log file, not stdin, can be replayed") || strings.Contains(out, "pool_max_num_seqs_from_traffic") ||
		!strings.Contains(out, `"max_num_seqs": 344`) {
		t.Errorf("two files: exit %d %s %s", code, errs, out)
	}
}
