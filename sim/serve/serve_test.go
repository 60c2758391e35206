package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"headroom.dev/headroom/sim"
)

// start serves an engine of 1000 blocks of 16 tokens, max-model-len 4096,
// 10 ms steps, at timeScale simulated seconds per real second.
func start(t *testing.T, timeScale float64) *httptest.Server {
	t.Helper()
	return startWith(t, sim.Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, Timer: sim.Fixed(0.010), TokenEvents: true}, timeScale)
}

// startWith serves the engine of cfg at timeScale until the test ends.
func startWith(t *testing.T, cfg sim.Config, timeScale float64) *httptest.Server {
	t.Helper()
	return startOpts(t, cfg, Options{TimeScale: timeScale})
}

// startOpts serves the engine of cfg with opt (its Engine and Model set
// here) until the test ends.
func startOpts(t *testing.T, cfg sim.Config, opt Options) *httptest.Server {
	t.Helper()
	e, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt.Engine, opt.Model = e, "sim-model"
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); cancel(); <-done })
	return ts
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sse reads the data lines of a stream.
func sse(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	} `json:"usage"`
}

// A streamed completion of max_tokens 5 for "one two three four five six"
// (6 words: ceil(6 × 4 / 3) = 8 prompt tokens): 5 chunks of " tok", the
// last with finish_reason length, a usage chunk (8 + 5 = 13), [DONE].
func TestStreamCompletion(t *testing.T) {
	ts := start(t, 100)
	lines := sse(t, post(t, ts.URL+"/v1/completions", `{"model":"sim-model","prompt":"one two three four five six","max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`))
	if len(lines) != 7 || lines[6] != "[DONE]" {
		t.Fatalf("lines: %q", lines)
	}
	for i, l := range lines[:5] {
		var c chunk
		if err := json.Unmarshal([]byte(l), &c); err != nil || c.Object != "text_completion" || len(c.Choices) != 1 || c.Choices[0].Text != " tok" {
			t.Fatalf("chunk %d: %s (%v)", i, l, err)
		}
		if fr := c.Choices[0].FinishReason; (i == 4) != (fr != nil && *fr == "length") {
			t.Errorf("chunk %d finish_reason %v", i, fr)
		}
	}
	var u chunk
	if err := json.Unmarshal([]byte(lines[5]), &u); err != nil || u.Usage == nil || len(u.Choices) != 0 {
		t.Fatalf("usage chunk: %s", lines[5])
	}
	if u.Usage.Prompt != 8 || u.Usage.Completion != 5 || u.Usage.Total != 13 {
		t.Errorf("usage: %+v", *u.Usage)
	}
}

// A streamed chat: the role first, then 3 tokens; without include_usage
// no usage chunk. prompt_tokens (an extension) sets the prompt length.
func TestStreamChat(t *testing.T) {
	ts := start(t, 100)
	lines := sse(t, post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,"prompt_tokens":100}`))
	if len(lines) != 5 || lines[4] != "[DONE]" {
		t.Fatalf("lines: %q", lines)
	}
	var first chunk
	_ = json.Unmarshal([]byte(lines[0]), &first)
	if first.Object != "chat.completion.chunk" || first.Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk: %s", lines[0])
	}
	for _, l := range lines[1:4] {
		var c chunk
		if err := json.Unmarshal([]byte(l), &c); err != nil || c.Choices[0].Delta.Content != " tok" || c.Usage != nil {
			t.Errorf("token chunk: %s", l)
		}
	}
}

// --stream-interval 5 and max_tokens 12, one token a step: vLLM sends the
// first token, then 5 when tokens 2–6 have gathered, 5 more at 11, and the
// last one with finish_reason: chunks of 1, 5, 5 and 1 tokens, whatever
// the handler's pace against the steps'.
func TestStreamInterval(t *testing.T) {
	cfg := sim.Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, Timer: sim.Fixed(0.010), TokenEvents: true}
	ts := startOpts(t, cfg, Options{TimeScale: 100, StreamInterval: 5})
	lines := sse(t, post(t, ts.URL+"/v1/completions", `{"model":"sim-model","prompt":"a b c","max_tokens":12,"stream":true}`))
	if len(lines) != 5 || lines[4] != "[DONE]" {
		t.Fatalf("lines: %q", lines)
	}
	for i, want := range []int{1, 5, 5, 1} {
		var c chunk
		if err := json.Unmarshal([]byte(lines[i]), &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("chunk %d: %s (%v)", i, lines[i], err)
		}
		if got := strings.Count(c.Choices[0].Text, " tok"); got != want {
			t.Errorf("chunk %d: %d tokens, want %d", i, got, want)
		}
		if fr := c.Choices[0].FinishReason; (i == 3) != (fr != nil && *fr == "length") {
			t.Errorf("chunk %d finish_reason %v", i, fr)
		}
	}
}

// Non-streaming: the whole text and the usage. Chat content parts count
// their text: "a b c" → 3 words → 4 tokens.
func TestWholeResponses(t *testing.T) {
	ts := start(t, 100)
	resp := post(t, ts.URL+"/v1/chat/completions", `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"text","text":"a b c"}]}],"max_completion_tokens":4}`)
	defer resp.Body.Close()
	var v struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Object != "chat.completion" || v.Choices[0].Message.Content != " tok tok tok tok" || v.Usage.Prompt != 4 || v.Usage.Completion != 4 {
		t.Errorf("%+v", v)
	}
}

func TestErrorsAndInfo(t *testing.T) {
	ts := start(t, 100)
	for body, code := range map[string]int{
		`{"model":"other","prompt":"x"}`:   404,
		`{"prompt":"x","max_tokens":4096}`: 400, // 2 + 4096 > 4096
		`{"prompt":`:                       400,
		`{"prompt":{"a":1}}`:               400,
		`{"prompt":"x","max_tokens":0}`:    400,
	} {
		resp := post(t, ts.URL+"/v1/completions", body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != code || e.Error.Code != code || e.Error.Message == "" {
			t.Errorf("%s: status %d, error %+v; want %d", body, resp.StatusCode, e, code)
		}
	}
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if len(m.Data) != 1 || m.Data[0].ID != "sim-model" || m.Data[0].MaxModelLen != 4096 {
		t.Errorf("models: %+v", m)
	}
	if resp, err := http.Get(ts.URL + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("health: %v %v", resp, err)
	}
}

func metrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Real time: 10 tokens of 10 ms steps at time scale 1 take at least
// 100 ms (one step for the prompt and its first token, nine more). After
// two requests the metrics count 2 TTFTs, 2 × 9 inter-token gaps and
// 20 generated tokens.
func TestRealTimeAndMetrics(t *testing.T) {
	ts := start(t, 1)
	t0 := time.Now()
	for range 2 {
		resp := post(t, ts.URL+"/v1/completions", `{"prompt":"x","max_tokens":10}`)
		resp.Body.Close()
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Errorf("two 10-token requests took %v, want >= 200ms", d)
	}
	fams := metrics(t, ts.URL)
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total", "vllm:cache_config_info"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if h := fams["vllm:time_to_first_token_seconds"]; h == nil || h.Metric[0].Histogram.GetSampleCount() != 2 {
		t.Errorf("ttft: %v", h)
	}
	if h := fams["vllm:inter_token_latency_seconds"]; h == nil || h.Metric[0].Histogram.GetSampleCount() != 18 {
		t.Errorf("itl: %v", h)
	}
	if c := fams["vllm:generation_tokens_total"]; c == nil || c.Metric[0].Counter.GetValue() != 20 {
		t.Errorf("generation tokens: %v", c)
	}
	if l := fams["vllm:num_requests_running"].Metric[0].Label; len(l) == 0 {
		t.Error("no model_name label")
	}
}

// A client that goes away mid-stream aborts its request: nothing stays
// running.
func TestDisconnectAborts(t *testing.T) {
	ts := start(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":3000,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if fams := metrics(t, ts.URL); fams["vllm:num_requests_running"].Metric[0].Gauge.GetValue() == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("the request still runs after its client went away")
}
