package sim

import (
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// A request to /v1/completions renders no chat: it costs the API server
// what harmony's chat costs (the fitted request no Jinja template
// renders), where a chat request of a Jinja model costs the template's
// Request. The 8-GPU host takes its share of either.
func TestFrontEndByEndpoint(t *testing.T) {
	set := vllm.Settings{Version: vllm.Version{Minor: 11}}
	qwen := plan(t, "Qwen/Qwen3-14B", "H100-80GB", 1, set)
	oss := plan(t, "openai/gpt-oss-20b", "H100-80GB", 1, set)
	tp8 := set
	tp8.TensorParallelSize = 8
	big := plan(t, "Qwen/Qwen3-235B-A22B", "H100-80GB", 8, tp8)
	c, _ := CalibrationFor(qwen.Device)
	if !(c.Request > 2*c.HarmonyRequest && c.HarmonyRequest > 0 && c.NodeHostShare > 0 && c.NodeHostShare < 1) {
		t.Fatalf("the H100's API server: %+v", c.FrontEnd)
	}
	chat, comp := workload.EndpointChat, workload.EndpointCompletions
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"Qwen3-14B chat", c.FrontEndFor(qwen, chat).Request, c.Request},
		{"Qwen3-14B completion", c.FrontEndFor(qwen, comp).Request, c.HarmonyRequest},
		{"Qwen3-14B, no endpoint named", c.FrontEndFor(qwen, "").Request, c.HarmonyRequest},
		{"gpt-oss chat", c.FrontEndFor(oss, chat).Request, c.HarmonyRequest},
		{"gpt-oss completion", c.FrontEndFor(oss, comp).Request, c.HarmonyRequest},
		{"Qwen3-235B TP 8 chat", c.FrontEndFor(big, chat).Request, c.Request * c.NodeHostShare},
		{"Qwen3-235B TP 8 completion", c.FrontEndFor(big, comp).Request, c.HarmonyRequest * c.NodeHostShare},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %.6f s a request, want %.6f", tc.name, tc.got, tc.want)
		}
	}
	if !RendersChatTemplate(qwen) || RendersChatTemplate(oss) {
		t.Error("RendersChatTemplate: Qwen3 renders Jinja, gpt-oss harmony")
	}
	own := c
	own.CompletionRequest = 1e-3
	if own.FrontEndFor(qwen, comp).Request != 1e-3 || own.FrontEndFor(qwen, chat).Request != c.Request {
		t.Error("a calibration's frontend_completion_request_s prices completions only")
	}

	// gpustack's 1,000 x 128/4 burst on Qwen3-14B (gs-q14-h100-rand128):
	// through the chat endpoint the last request reaches the engine after
	// 1,000 x Request of the API server's CPU (12.2 s at the fit), and the
	// run lasts at least that; as completions the server's work is 1,000 x
	// HarmonyRequest (2.45 s) and the engine, busy about 10 s on the same
	// prefills, sets the end: an earlier end and earlier first tokens.
	run := func(endpoint string, src Source) *Report {
		return runPlan(t, qwen, c, src, RunOptions{FrontEnd: c.FrontEndFor(qwen, endpoint)})
	}
	burst := func() *benchSource { return &benchSource{n: 1000, prompt: 128, output: 4} }
	ch, co := run(chat, burst()), run(comp, burst())
	// A log's requests say which endpoint they called: half of the burst
	// as chats in a completions run puts 500 x Request + 500 x
	// HarmonyRequest (7.3 s) of work on the API server, so the run lasts
	// at least that and ends between the two.
	mixed := run(comp, &halfChats{*burst()})
	if work := 500 * (c.Request + c.HarmonyRequest); mixed.DurationS < work || !(co.DurationS < mixed.DurationS && mixed.DurationS < ch.DurationS) {
		t.Errorf("half chats: %.2f s (the API server's work %.2f s), between %.2f and %.2f", mixed.DurationS, work, co.DurationS, ch.DurationS)
	}
	t.Logf("half chats: %.2f s, mean TTFT %.0f ms", mixed.DurationS, mixed.TTFT.Mean)
	if ch.DurationS < 1000*c.Request || co.DurationS < 1000*c.HarmonyRequest || co.DurationS > 0.9*ch.DurationS || co.TTFT.Mean >= ch.TTFT.Mean {
		t.Errorf("chat: %.2f s, mean TTFT %.0f ms; completions: %.2f s, %.0f ms", ch.DurationS, ch.TTFT.Mean, co.DurationS, co.TTFT.Mean)
	}
	t.Logf("chat: %.2f s, mean TTFT %.0f ms; completions: %.2f s, %.0f ms", ch.DurationS, ch.TTFT.Mean, co.DurationS, co.TTFT.Mean)
}

// halfChats marks every other request of a burst as a chat.
type halfChats struct{ benchSource }

func (h *halfChats) Next() (Request, error) {
	r, err := h.benchSource.Next()
	if h.i%2 == 0 {
		r.Endpoint = workload.EndpointChat
	}
	return r, err
}

// --api-server-count 4 runs four API-server processes: each request's
// CPU is priced at a quarter (the four as one four times as fast), the
// latency on the way in as it is. The Qwen3-14B burst of 1,000 128-token
// chats, whose first tokens wait 12.2 s for one server's 1,000 x 12.2 ms,
// then reaches the engine within 3.05 s and ends when the engine does.
func TestAPIServerCount(t *testing.T) {
	set := vllm.Settings{Version: vllm.Version{Minor: 11}}
	one := plan(t, "Qwen/Qwen3-14B", "H100-80GB", 1, set)
	set.APIServerCount = 4
	four := plan(t, "Qwen/Qwen3-14B", "H100-80GB", 1, set)
	c, _ := CalibrationFor(one.Device)
	f1, f4 := c.FrontEndFor(one, workload.EndpointChat), c.FrontEndFor(four, workload.EndpointChat)
	if f4.Request != f1.Request/4 || f4.OutputToken != f1.OutputToken/4 || f4.ByEndpoint.Completions != f1.ByEndpoint.Completions/4 || f4.Latency != f1.Latency {
		t.Errorf("one API server %+v, four %+v", f1, f4)
	}
	run := func(b memory.Budget, f FrontEnd) *Report {
		return runPlan(t, b, c, &benchSource{n: 1000, prompt: 128, output: 4}, RunOptions{FrontEnd: f})
	}
	r1, r4 := run(one, f1), run(four, f4)
	if r1.DurationS < 1000*f1.Request || r4.DurationS > 0.7*r1.DurationS || r4.TTFT.Mean > 0.7*r1.TTFT.Mean {
		t.Errorf("one API server: %.2f s, mean TTFT %.0f ms; four: %.2f s, %.0f ms", r1.DurationS, r1.TTFT.Mean, r4.DurationS, r4.TTFT.Mean)
	}
	t.Logf("one API server: %.2f s, mean TTFT %.0f ms; four: %.2f s, %.0f ms", r1.DurationS, r1.TTFT.Mean, r4.DurationS, r4.TTFT.Mean)
	if c := ConfidenceOfRun(four, r4); c.Fitted() || !strings.HasPrefix(strings.Join(c.Outside, ";"), "4 API-server processes") {
		t.Errorf("four API servers: %+v", c)
	}
}

// runPlan runs src through the engine of plan b on the roofline of c.
func runPlan(t testing.TB, b memory.Budget, c Calibration, src Source, opt RunOptions) *Report {
	t.Helper()
	m, err := RooflineFor(b, c)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(ConfigFor(b, m))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), e, src, opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
