package telemetry

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"headroom.dev/headroom/vllm"
)

func readSample(t *testing.T, name string) VLLMSample {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "vllm", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseVLLMMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestParseVLLMMetrics(t *testing.T) {
	tests := []struct {
		file                      string
		kv, running, waiting, pre float64
		kvName                    string
		ttftCount, ttftP99        float64
		models                    []string
		blocks                    int64
	}{
		// vLLM 0.6.3 (V0): only the old KV name, a fraction despite "perc".
		// TTFT p99: rank 0.99*1000 = 990 falls in (1.0, 2.5] holding
		// cumulative 985..998, so 1.0 + 1.5*(990-985)/(998-985) = 1.576923...
		{file: "vllm-0.6.3-v0.txt", kv: 0.9473684210526315, running: 12, waiting: 3, pre: 7,
			kvName: "vllm:gpu_cache_usage_perc", ttftCount: 1000, ttftP99: 1.0 + 1.5*5/13,
			models: []string{"meta-llama/Llama-3.1-8B-Instruct"}, blocks: 27911},
		// vLLM 0.11 (V1): the new name. rank 0.99*5000 = 4950 in (2.5, 5.0]
		// holding 4920..4975: 2.5 + 2.5*30/55 = 3.863636...
		{file: "vllm-0.11.0-v1.txt", kv: 0.9412, running: 48, waiting: 17, pre: 231,
			kvName: "vllm:kv_cache_usage_perc", ttftCount: 5000, ttftP99: 2.5 + 2.5*30/55,
			models: []string{"Qwen/Qwen3-8B"}, blocks: 29751},
		// Two data-parallel engines: counts add (20+25, 0+6, 3+40), KV is
		// the fuller engine's 0.97. TTFT buckets add: 200 observations,
		// rank 198 in (1.0, 2.5] holding 196..199: 1.0 + 1.5*2/3 = 2.0.
		{file: "vllm-0.11.0-dp2.txt", kv: 0.97, running: 45, waiting: 6, pre: 43,
			kvName: "vllm:kv_cache_usage_perc", ttftCount: 200, ttftP99: 2.0,
			models: []string{"meta-llama/Llama-3.3-70B-Instruct"}, blocks: 29751},
		// 0.9.2 .. 0.10 export both names; the new one is read. No request
		// has finished its first token yet, so there is no p99.
		{file: "vllm-0.10.2-both-names.txt", kv: 0.35, running: 9, waiting: 0, pre: 0,
			kvName: "vllm:kv_cache_usage_perc", ttftCount: 0, ttftP99: 0,
			models: []string{"mistralai/Mistral-7B-Instruct-v0.3"}, blocks: 29751},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := readSample(t, tt.file)
			if !near(s.KVCacheUsage, tt.kv) || s.Names[vllm.MetricKVCacheUsage] != tt.kvName {
				t.Errorf("KV usage %v from %q, want %v from %q", s.KVCacheUsage, s.Names[vllm.MetricKVCacheUsage], tt.kv, tt.kvName)
			}
			if s.RequestsRunning != tt.running || s.RequestsWaiting != tt.waiting || s.PreemptionsTotal != tt.pre {
				t.Errorf("running/waiting/preemptions = %v/%v/%v, want %v/%v/%v",
					s.RequestsRunning, s.RequestsWaiting, s.PreemptionsTotal, tt.running, tt.waiting, tt.pre)
			}
			if s.TTFT.Count != tt.ttftCount || !near(s.TTFTP99Seconds, tt.ttftP99) {
				t.Errorf("TTFT count %v p99 %v, want %v and %v", s.TTFT.Count, s.TTFTP99Seconds, tt.ttftCount, tt.ttftP99)
			}
			if strings.Join(s.Models, ",") != strings.Join(tt.models, ",") {
				t.Errorf("models %v, want %v", s.Models, tt.models)
			}
			if s.CacheConfig.NumGPUBlocks != tt.blocks || s.CacheConfig.BlockSize != 16 || s.CacheConfig.GPUMemoryUtilization != 0.9 {
				t.Errorf("cache config %+v", s.CacheConfig)
			}
			for _, m := range []vllm.Metric{vllm.MetricRequestsRunning, vllm.MetricRequestsWaiting, vllm.MetricPreemptions, vllm.MetricTTFT} {
				if !s.Has(m) {
					t.Errorf("%s not found", m)
				}
			}
		})
	}
}

func TestParseVLLMMetricsErrors(t *testing.T) {
	tests := []struct {
		name, in string
		noVLLM   bool
	}{
		{"not prometheus", "<html><body>404</body></html>\n", false},
		{"no vllm metric", "# TYPE process_open_fds gauge\nprocess_open_fds 87.0\n", true},
		{"empty", "", true},
		{"torn line", "vllm:num_requests_running{model_name=\"m\"", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseVLLMMetrics(strings.NewReader(tt.in))
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrNoVLLMMetrics) != tt.noVLLM {
				t.Errorf("%v: ErrNoVLLMMetrics want %v", err, tt.noVLLM)
			}
		})
	}
}

func TestParseVLLMMetricsPartial(t *testing.T) {
	// A server that exports only the queue gauges: the rest is absent, not zero-but-present.
	s, err := ParseVLLMMetrics(strings.NewReader("vllm:num_requests_waiting{model_name=\"m\"} 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.RequestsWaiting != 4 || !s.Has(vllm.MetricRequestsWaiting) || s.Has(vllm.MetricKVCacheUsage) || s.Has(vllm.MetricTTFT) {
		t.Errorf("got %+v", s)
	}
	// KV usage above 1 (rounding in the server) is capped; NaN is no value.
	s, err = ParseVLLMMetrics(strings.NewReader("vllm:kv_cache_usage_perc 1.0000001\nvllm:num_requests_running NaN\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.KVCacheUsage != 1 || s.Has(vllm.MetricRequestsRunning) {
		t.Errorf("got %+v", s)
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{Count: 10, Buckets: []Bucket{{0.1, 2}, {0.5, 6}, {1, 9}, {math.Inf(1), 10}}}
	tests := []struct {
		q, want float64
		ok      bool
	}{
		{0.1, 0.05, true},          // rank 1 in (0, 0.1] holding 0..2: 0.1*1/2
		{0.5, 0.1 + 0.4*3/4, true}, // rank 5 in (0.1, 0.5] holding 2..6
		{0.9, 1, true},             // rank 9 = the (0.5, 1] bucket's top
		{0.99, 1, true},            // rank 9.9 lies in +Inf: the largest finite bound
		{-0.1, 0, false},
		{1.1, 0, false},
	}
	for _, tt := range tests {
		got, ok := h.Quantile(tt.q)
		if ok != tt.ok || !near(got, tt.want) {
			t.Errorf("Quantile(%v) = %v, %v; want %v, %v", tt.q, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := (Histogram{}).Quantile(0.99); ok {
		t.Error("an empty histogram has no quantile")
	}
}

func TestHistogramSub(t *testing.T) {
	prev := Histogram{Count: 10, Sum: 4, Buckets: []Bucket{{0.1, 2}, {1, 9}, {math.Inf(1), 10}}}
	cur := Histogram{Count: 15, Sum: 9, Buckets: []Bucket{{0.1, 2}, {1, 11}, {math.Inf(1), 15}}}
	d := cur.Sub(prev)
	want := Histogram{Count: 5, Sum: 5, Buckets: []Bucket{{0.1, 0}, {1, 2}, {math.Inf(1), 5}}}
	if d.Count != want.Count || d.Sum != want.Sum || len(d.Buckets) != 3 || d.Buckets[1] != want.Buckets[1] || d.Buckets[2] != want.Buckets[2] {
		t.Errorf("Sub = %+v, want %+v", d, want)
	}
	// After a restart the counts start again: the new reading is the window.
	restarted := Histogram{Count: 3, Buckets: []Bucket{{0.1, 1}, {1, 3}, {math.Inf(1), 3}}}
	if got := restarted.Sub(prev); got.Count != 3 {
		t.Errorf("after restart Sub = %+v", got)
	}
}

// A sample with its histogram encodes to JSON and back: the last bucket's
// bound is +Inf, which JSON has no number for (audit --live -o json and the
// cluster page's /api/audit encode samples).
func TestSampleJSONRoundTrip(t *testing.T) {
	s := readSample(t, "vllm-0.11.0-v1.txt")
	last := s.TTFT.Buckets[len(s.TTFT.Buckets)-1]
	if !math.IsInf(last.UpperBound, 1) {
		t.Fatalf("the last TTFT bucket is %v, want +Inf", last.UpperBound)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `{"le":"+Inf","count":`) || !strings.Contains(string(data), `{"le":"0.001","count":`) {
		t.Errorf("buckets as JSON: %s", data)
	}
	var back VLLMSample
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.TTFT, s.TTFT) {
		t.Errorf("round trip: %+v, want %+v", back.TTFT, s.TTFT)
	}
	if err := json.Unmarshal([]byte(`{"le":"lots","count":1}`), &Bucket{}); err == nil {
		t.Error("a bound that is not a number decoded")
	}
}

// A sample's JSON gives a quantity the exposition did not carry, or
// carried as no number, as null, and one it carried, 0 included, as its
// value: two running, none waiting, the KV usage NaN, no preemption
// counter at all.
func TestSampleJSONNullWhereUnknown(t *testing.T) {
	s, err := ParseVLLMMetrics(strings.NewReader("vllm:num_requests_running 2\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc NaN\n"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"num_requests_running":2`, `"num_requests_waiting":0`, `"kv_cache_usage":null`, `"num_preemptions_total":null`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s: %s", want, data)
		}
	}
}
