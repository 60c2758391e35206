package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/vllm"
)

// browser finds a Chromium binary. Without one the test skips, unless
// HEADROOM_REQUIRE_BROWSER=1 (set by .ci/run when it installed one).
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("HEADROOM_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium binary found and HEADROOM_REQUIRE_BROWSER=1: install chromium (apt-get install chromium)")
	}
	t.Skip("no chromium binary found; set HEADROOM_REQUIRE_BROWSER=1 to make this a failure")
	return ""
}

// pageErrors collects what the page reports as broken: uncaught
// exceptions, console errors and Content-Security-Policy violations.
type pageErrors struct {
	mu   sync.Mutex
	msgs []string
}

func (p *pageErrors) listen(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.msgs = append(p.msgs, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			// The 400 of the bad-input step is logged as a failed
			// resource load; that is the page working.
			if ev.Entry.Level == log.EntryLevelError && !strings.Contains(ev.Entry.Text, "status of 400") {
				p.msgs = append(p.msgs, "console: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (p *pageErrors) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.msgs {
		t.Errorf("the page reported: %s", m)
	}
}

// openBrowser starts headless Chromium (closed when the test ends) with a
// tab whose errors are collected, for 90 seconds at most.
func openBrowser(t *testing.T, exe string) (context.Context, *pageErrors) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1280, 900),
		chromedp.Flag("headless", true), chromedp.DisableGPU, chromedp.NoSandbox)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// A bound for a browser that hangs, not a speed target: the page's
	// plans, simulation and capacity answer in seconds on an idle machine
	// and took over 90 s on a loaded one, where a tighter bound made the
	// CI red for being slow.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })
	// The first action starts the browser; the listener needs its tab.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	errs := &pageErrors{}
	errs.listen(t, ctx)
	return ctx, errs
}

// barPart is one segment of the card's bar as the DOM shows it.
type barPart struct {
	Part  string  `json:"part"`
	GiB   string  `json:"gib"`
	Width float64 `json:"width"`
}

const readBar = `Array.from(document.querySelectorAll('#bar .seg')).map(s => ({
	part: s.dataset.part, gib: s.dataset.gib,
	width: s.getBoundingClientRect().width / document.getElementById('bar').clientWidth}))`

const readLegend = `Object.fromEntries(Array.from(document.querySelectorAll('#legend li')).map(
	li => [li.dataset.part, li.querySelector('.gib').textContent]))`

// TestPageInBrowser loads the page in headless Chromium, pastes a `vllm
// serve` command, and reads the verdict and the bar's numbers from the DOM:
// they must be the API's plan JSON for the same input.
func TestPageInBrowser(t *testing.T) {
	exe := browser(t)
	srv := newSimServer(t)
	ctx, errs := openBrowser(t, exe)

	const command = "vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n  --max-model-len 32768 --gpu-memory-utilization 0.95"
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitReady(chromedp.CSS("#models-list option")),
		chromedp.SendKeys(chromedp.ID("gpu"), "H100-80GB"),
		chromedp.SetValue(chromedp.ID("command"), command),
		chromedp.Click(chromedp.ID("plan-button")),
		chromedp.WaitVisible(chromedp.CSS("#bar .seg")),
	); err != nil {
		t.Fatal(err)
	}
	verdict := run(t, ctx, chromedp.Text(chromedp.ID("verdict")))
	fits := run(t, ctx, chromedp.AttributeValue(chromedp.ID("verdict"), "data-fits")).Value
	bar := run(t, ctx, chromedp.Evaluate[[]barPart](readBar))
	legend := run(t, ctx, chromedp.Evaluate[map[string]string](readLegend))
	hash := run(t, ctx, chromedp.Evaluate[string]("location.hash"))

	code, js := post(t, srv.URL+"/api/plan", mustJSON(t, map[string]any{"gpu": "H100-80GB", "command": command}))
	if code != 200 {
		t.Fatalf("API: %d %s", code, js)
	}
	var r report.Report
	if err := json.Unmarshal(js, &r); err != nil {
		t.Fatal(err)
	}
	p := r.PerGPU
	if fits != fmt.Sprint(r.Fits) || !r.Fits || !strings.HasPrefix(verdict, "Fits") || !strings.Contains(verdict, "32,768 tokens") {
		t.Errorf("verdict %q (data-fits %s), API fits %t", verdict, fits, r.Fits)
	}
	// The bar draws the CLI table's parts, the JSON's numbers: non-torch
	// and the CUDA context apart.
	want := map[string]float64{
		"weights": p.WeightsGiB, "activation": p.ActivationGiB, "nontorch": p.NonTorchGiB, "context": p.ContextGiB,
		"graphs": p.CUDAGraphGiB, "kv": p.KVCacheGiB, "unused": p.UnusedGiB,
	}
	if len(bar) != len(want) {
		t.Fatalf("bar has %d parts, want %d: %+v", len(bar), len(want), bar)
	}
	var widths float64
	for _, s := range bar {
		w := fmt.Sprintf("%.2f", want[s.Part])
		if s.GiB != w || legend[s.Part] != w {
			t.Errorf("%s: bar says %s GiB, legend %s, API %s", s.Part, s.GiB, legend[s.Part], w)
		}
		// Each part's width is its share of the card (within a pixel's worth).
		if share := want[s.Part] / p.TotalGiB; math.Abs(s.Width-share) > 0.01 {
			t.Errorf("%s is %.3f of the bar, its share of the card is %.3f", s.Part, s.Width, share)
		}
		widths += s.Width
	}
	if math.Abs(widths-1) > 0.01 {
		t.Errorf("the parts fill %.3f of the bar, want the whole card", widths)
	}

	// How sure: one row a planned part, each with the API's class, and the
	// KV band in words.
	classes := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#evidence tbody tr")].map((tr) => tr.dataset.class)`))
	band := run(t, ctx, chromedp.Text(chromedp.ID("band")))
	if len(classes) != len(r.Evidence) || len(classes) != 4 {
		t.Errorf("evidence rows %v, API has %d", classes, len(r.Evidence))
	}
	for i := range min(len(classes), len(r.Evidence)) {
		if classes[i] != r.Evidence[i].Class {
			t.Errorf("evidence row %d is %s, API %s", i, classes[i], r.Evidence[i].Class)
		}
	}
	if !strings.Contains(band, "between "+vllm.Thousands(r.KVCacheTokensBand.Low)) || !strings.Contains(band, r.Settings.SamplerPath) {
		t.Errorf("band %q, API %+v, sampler %s", band, r.KVCacheTokensBand, r.Settings.SamplerPath)
	}

	// The host block: one row a term of the API's host plan, its limit
	// first.
	hostRows := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#host-terms tbody tr")].map((tr) => tr.dataset.term)`))
	hostSummary := run(t, ctx, chromedp.Text(chromedp.ID("host-summary")))
	if len(hostRows) != len(r.Host.Terms) || len(hostRows) == 0 || hostRows[0] != r.Host.Terms[0].Term || !strings.HasPrefix(hostSummary, "Memory limit and request "+r.Host.MemoryLimit+":") {
		t.Errorf("host rows %v, summary %q; API %+v", hostRows, hostSummary, r.Host)
	}

	// No LoRA, drafter or multimodal limit: no features line.
	if hidden := run(t, ctx, chromedp.Evaluate[bool](`document.getElementById('features').hidden`)); !hidden {
		t.Error("the features line shows for a command without features")
	}

	// The URL holds the plan: opening it elsewhere shows the same verdict.
	if !strings.Contains(hash, "gpu=H100-80GB") || !strings.Contains(hash, "command=") {
		t.Fatalf("the URL does not hold the plan: %q", hash)
	}
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+"/"+hash), chromedp.WaitVisible(chromedp.CSS("#bar .seg"))); err != nil {
		t.Fatal(err)
	}
	shared := run(t, tab, chromedp.Text(chromedp.ID("verdict")))
	sharedBar := run(t, tab, chromedp.Evaluate[[]barPart](readBar))
	if shared != verdict || len(sharedBar) != len(bar) || sharedBar[0] != bar[0] {
		t.Errorf("the shared link shows %q %+v, the page showed %q %+v", shared, sharedBar, verdict, bar)
	}

	// The upgrade preflight: a release in the "upgrade to" field shows both
	// plans side by side, the answer first, as /api/plan answers with
	// upgrade_to (the bytes of plan --upgrade-to -o json).
	checkUpgradeInBrowser(t, ctx, srv.URL, command)

	// Bad input: an inline message on the field, the last plan stays.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("gpu"), "H1OO"),
		chromedp.Click(chromedp.ID("plan-button")),
		chromedp.WaitVisible(chromedp.ID("form-error")),
	); err != nil {
		t.Fatal(err)
	}
	msg := run(t, ctx, chromedp.Text(chromedp.ID("form-error")))
	invalid := run(t, ctx, chromedp.AttributeValue(chromedp.ID("gpu"), "aria-invalid")).Value
	if !strings.Contains(msg, "H100") || invalid != "true" {
		t.Errorf("bad GPU: message %q, aria-invalid %q", msg, invalid)
	}

	// The doctor box names the cause of a pasted OOM.
	oom, err := os.ReadFile("testdata/oom.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("gpu"), "H100-80GB"),
		chromedp.SetValue(chromedp.ID("doctor-text"), string(oom)),
		chromedp.Click(chromedp.CSS("#doctor-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#doctor-result .finding")),
	); err != nil {
		t.Fatal(err)
	}
	finding := run(t, ctx, chromedp.AttributeValue(chromedp.CSS("#doctor-result .finding"), "data-code")).Value
	if finding != "kv_cache_pressure" {
		t.Errorf("doctor's first finding %q, want kv_cache_pressure (as `headroom doctor` says for this OOM)", finding)
	}
	// The simulation panel draws `headroom simulate -o json`'s series.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#sim-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#sim-result svg")),
	); err != nil {
		t.Fatal(err)
	}
	points := run(t, ctx, chromedp.Evaluate[int](`document.querySelector('#sim-result polyline[data-series=kv_usage]').points.length`))
	code, js = post(t, srv.URL+"/api/simulate", mustJSON(t, map[string]any{"plan": map[string]any{"gpu": "H100-80GB", "command": command},
		"rate": 5, "duration_s": 120, "prompt_tokens": 1024, "output_tokens": 256, "bursts": []string{"50x30000@30s"}}))
	var sim struct {
		Series []json.RawMessage `json:"series"`
	}
	if err := json.Unmarshal(js, &sim); code != 200 || err != nil {
		t.Fatalf("API: %d %s", code, js)
	}
	if points != len(sim.Series) || points < 50 {
		t.Errorf("the chart has %d points, the API's series %d windows", points, len(sim.Series))
	}
	// The endpoint chosen on the panel is the one the API is asked to
	// price: the page's request body says chat.
	run(t, ctx, chromedp.Evaluate[bool](`window.sentBodies = []; { const f = window.fetch; window.fetch = (u, o) => { window.sentBodies.push(o && o.body); return f(u, o); }; } true`))
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("sim-endpoint"), "chat"),
		chromedp.Click(chromedp.CSS("#sim-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#sim-result svg")),
	); err != nil {
		t.Fatal(err)
	}
	if sent := run(t, ctx, chromedp.Evaluate[string](`JSON.parse(window.sentBodies[window.sentBodies.length - 1]).endpoint`)); sent != "chat" {
		t.Errorf("the simulation panel asked for endpoint %q, want chat", sent)
	}
	// The capacity panel draws `headroom capacity -o json`'s windows: two
	// points a window (a step), for the model above on its default options.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("cap-hours"), "0.5"),
		chromedp.Click(chromedp.CSS("#cap-form button[type=submit]")),
	); err != nil {
		t.Fatal(err)
	}
	// The chart or the error, whichever comes: an error ends the test
	// with its words (the API once answered "context canceled" when an
	// answer took more than 5 s, and the wait for a chart ran to the
	// test's deadline).
	run(t, ctx, chromedp.Poll[bool](`document.querySelector('#cap-result svg') !== null || !document.getElementById('cap-error').hidden`))
	if msg := run(t, ctx, chromedp.Evaluate[string](`document.getElementById('cap-error').hidden ? "" : document.getElementById('cap-error').textContent`)); msg != "" {
		t.Fatalf("the capacity form: %s", msg)
	}
	capPoints := run(t, ctx, chromedp.Evaluate[int](`document.querySelector('#cap-result polyline[data-series=replicas]').points.length`))
	rows := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#cap-table tbody tr').length`))
	if capPoints != 2*3 || rows != 2 {
		t.Errorf("the capacity chart has %d points (want 6: three 10-minute windows) and %d rows (want 2 options)", capPoints, rows)
	}
	// LoRA slots and a drafter: the page says what they add as the
	// table's Features line says it, from the API's features object.
	const featured = "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --enable-lora --max-loras 4 --max-lora-rank 64 " +
		`--speculative-config '{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":5}'`
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("gpu"), "L4"),
		chromedp.SetValue(chromedp.ID("command"), featured),
		chromedp.Click(chromedp.ID("plan-button")),
	); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Poll[bool](`!document.getElementById('features').hidden && `+planDone, chromedp.WithPollingTimeout(2*time.Minute)))
	items := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#features li")].map((li) => li.textContent)`))
	code, js = post(t, srv.URL+"/api/plan", mustJSON(t, map[string]any{"gpu": "L4", "command": featured}))
	var feat report.Report
	if err := json.Unmarshal(js, &feat); code != 200 || err != nil || feat.Features.LoRA == nil || feat.Features.Speculative == nil {
		t.Fatalf("API: %d %s", code, js)
	}
	if got, want := strings.Join(items, "; "), report.FeaturesLine(feat.Features); len(items) != 2 || got != want {
		t.Errorf("the page's features %q, the table's line %q", got, want)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("gpu"), "H100-80GB")); err != nil {
		t.Fatal(err)
	}

	// An uploaded config.json plans like a catalog model (the handler test
	// checks the numbers against a logged run); the page names it.
	cfg, err := filepath.Abs("testdata/Qwen3-8B-config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("config"), []string{cfg})); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Poll[bool](`document.getElementById('config-status').textContent.includes('loaded')`))
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("model"), "my-qwen"),
		chromedp.SetValue(chromedp.ID("command"), " "), // the page trims it to no command
		chromedp.Click(chromedp.ID("plan-button")),
	); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Poll[bool](`document.getElementById('summary').textContent.startsWith('my-qwen')`))
	uploaded := run(t, ctx, chromedp.Evaluate[map[string]string](readLegend))
	cfgText, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	code, js = post(t, srv.URL+"/api/plan", mustJSON(t, map[string]any{"model": "my-qwen", "config": string(cfgText), "gpu": "H100-80GB"}))
	var up report.Report
	if err := json.Unmarshal(js, &up); code != 200 || err != nil {
		t.Fatalf("API: %d %s", code, js)
	}
	if w := fmt.Sprintf("%.2f", up.PerGPU.KVCacheGiB); uploaded["kv"] != w {
		t.Errorf("uploaded config: the page shows %s GiB of KV cache, the API %s", uploaded["kv"], w)
	}

	errs.check(t)

	if os.Getenv("HEADROOM_SCREENSHOTS") == "1" {
		screenshots(t, ctx, srv.URL+"/"+hash, string(oom))
	}
}

// upgradeRow is one row of the page's upgrade table.
type upgradeRow struct {
	Term   string `json:"term"`
	Label  string `json:"label"`
	Before string `json:"before"`
	After  string `json:"after"`
	Cause  string `json:"cause"`
}

// planDone is true once the page's plan calls have all answered.
const planDone = `!document.getElementById('plan-button').disabled`

const readUpgrade = `Object.fromEntries(Array.from(document.querySelectorAll('#upgrade-table tbody tr')).map(tr => [tr.dataset.term, {
	term: tr.dataset.term, label: tr.querySelector('th').textContent, before: tr.querySelector('.before').textContent,
	after: tr.querySelector('.after').textContent, cause: tr.querySelector('.cause').textContent}]))`

// checkUpgradeInBrowser fills the "upgrade to" field for the plan on the
// page (vLLM 0.20.0 -> 0.21.0) and reads the upgrade table: the CUDA-graph
// estimate's row with its cause and source, and the KV tokens before and
// after, must be the API's. Pinned at 0.95, the estimate moves into the
// budget on 0.21.0 and costs its 0.89 GiB of KV cache: under the default
// 20% allowed (OK), over 1% (BLOCKED, shown first).
func checkUpgradeInBrowser(t *testing.T, ctx context.Context, url, command string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("vllm-version"), "0.20.0"),
		chromedp.SetValue(chromedp.ID("upgrade-to"), "0.21.0"),
		chromedp.Click(chromedp.ID("plan-button")),
		chromedp.WaitVisible(chromedp.CSS(`#upgrade-table tr[data-term="per_gpu.cudagraph_in_budget"]`)),
	); err != nil {
		t.Fatal(err)
	}
	// The plan button is disabled until the page's last call (every GPU)
	// answers; a click before that would be lost.
	run(t, ctx, chromedp.Poll[bool](planDone))
	rows := run(t, ctx, chromedp.Evaluate[map[string]upgradeRow](readUpgrade))
	heading := run(t, ctx, chromedp.Text(chromedp.ID("upgrade-verdict")))
	verdict := run(t, ctx, chromedp.AttributeValue(chromedp.ID("upgrade-verdict"), "data-verdict")).Value
	hash := run(t, ctx, chromedp.Evaluate[string]("location.hash"))
	api := func(maxLoss string) report.UpgradeReport {
		body := map[string]any{"gpu": "H100-80GB", "command": command, "vllm_version": "0.20.0", "upgrade_to": "0.21.0"}
		if maxLoss != "" {
			body["max_kv_loss"] = maxLoss
		}
		code, js := post(t, url+"/api/plan", mustJSON(t, body))
		var u report.UpgradeReport
		if err := json.Unmarshal(js, &u); code != 200 || err != nil {
			t.Fatalf("API: %d %s", code, js)
		}
		return u
	}
	u := api("")
	if !strings.Contains(hash, "upgrade-to=0.21.0") || !strings.Contains(hash, "vllm-version=0.20.0") {
		t.Errorf("the URL does not hold the upgrade: %q", hash)
	}
	if verdict != u.Verdict || verdict != "ok" || !strings.HasPrefix(heading, "Upgrade vLLM 0.20.0 → 0.21.0: OK") {
		t.Errorf("upgrade verdict %q (%s), API %s", heading, verdict, u.Verdict)
	}
	kv := rows["kv_cache_tokens"]
	if kv.Before != vllm.Thousands(u.From.KVCacheTokens) || kv.After != vllm.Thousands(u.To.KVCacheTokens) || u.To.KVCacheTokens >= u.From.KVCacheTokens {
		t.Errorf("KV tokens on the page %s -> %s, API %d -> %d", kv.Before, kv.After, u.From.KVCacheTokens, u.To.KVCacheTokens)
	}
	var graphs *report.UpgradeChange
	for i, c := range u.Changes {
		if c.Term == "per_gpu.cudagraph_in_budget" {
			graphs = &u.Changes[i]
		}
	}
	g := rows["per_gpu.cudagraph_in_budget"]
	if graphs == nil || len(graphs.Causes) == 0 {
		t.Fatalf("the API names no cause for the CUDA-graph estimate: %+v", u.Changes)
	}
	if g.Label != graphs.Label || !strings.Contains(g.Cause, "CUDA-graph estimate") || g.Before != graphs.From || g.After != graphs.To || g.Before != "false" ||
		!strings.Contains(g.Cause, graphs.Causes[0].Source) || !strings.Contains(g.Cause, "0.21.0") {
		t.Errorf("CUDA-graph row %+v, API %+v", g, *graphs)
	}
	if len(rows) != 3+len(u.Changes) {
		t.Errorf("the table has %d rows, want 3 and the API's %d changes", len(rows), len(u.Changes))
	}

	// Over the allowed loss: BLOCKED, and why, first.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("max-kv-loss"), "1%"),
		chromedp.Click(chromedp.ID("plan-button")),
	); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Poll[bool](`document.getElementById('upgrade-verdict').dataset.verdict === 'loses-kv' && `+planDone))
	blocked := api("1%")
	heading = run(t, ctx, chromedp.Text(chromedp.ID("upgrade-verdict")))
	if blocked.Verdict != "loses-kv" || heading != "Upgrade vLLM 0.20.0 → 0.21.0: BLOCKED: "+blocked.Why {
		t.Errorf("1%% allowed: the page says %q, the API %s: %s", heading, blocked.Verdict, blocked.Why)
	}

	// Emptied (a space: the page trims it to none, and chromedp cannot set
	// an empty value), the upgrade view goes and the page plans as before.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("vllm-version"), " "),
		chromedp.SetValue(chromedp.ID("upgrade-to"), " "),
		chromedp.SetValue(chromedp.ID("max-kv-loss"), " "),
		chromedp.Click(chromedp.ID("plan-button")),
	); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Poll[bool](`document.getElementById('upgrade').hidden && !location.hash.includes('upgrade-to') && `+planDone))
}

// screenshots writes the page at desktop and phone width to
// docs/screenshots/ (PNG), for the README.
func screenshots(t *testing.T, ctx context.Context, url, oom string) {
	dir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name string
		w, h int64
	}{{"serve.png", 1280, 900}, {"serve-phone.png", 390, 844}} {
		if err := chromedp.Do(ctx,
			chromedp.EmulateViewport(s.w, s.h),
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(url),
			chromedp.WaitVisible(chromedp.CSS("#all-gpus tbody tr")),
			chromedp.SetValue(chromedp.ID("doctor-text"), oom),
			chromedp.Click(chromedp.CSS("#doctor-form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#doctor-result .finding")),
			chromedp.Click(chromedp.CSS("#sim-form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#sim-result svg")),
		); err != nil {
			t.Fatal(err)
		}
		png := run(t, ctx, chromedp.FullScreenshot(100))
		if !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("%s: not a PNG", s.name)
		}
		if err := os.WriteFile(filepath.Join(dir, s.name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", filepath.Join(dir, s.name), len(png))
	}
}

// run runs one action that returns a value, failing the test on an error.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
