package telemetry

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/vllm"
)

// An A100-80GB as nvidia-smi 535 reports it (testdata/smi/
// query-gpu-535-units.csv): 81920 MiB total, 74305 MiB used, 7128 MiB free;
// its process a python3 whose name /proc gave with a newline in it.
var recordGPUs = []GPU{{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-4a3f", TotalBytes: 81920 << 20, UsedBytes: 74305 << 20,
	FreeBytes: 7128 << 20, ReservedBytes: Unknown, UtilizationPercent: Unknown,
	Processes: []Process{{GPUIndex: 0, PID: 2291733, GI: Unknown, CI: Unknown, Name: "python3\nx,y", UsedBytes: Unknown}}}}

var recordTime = time.Date(2025, 6, 1, 12, 0, 0, 123e6, time.FixedZone("CEST", 2*3600))

func TestSnapshotCSV(t *testing.T) {
	rows, err := SnapshotCSV(recordTime, SourceNvidiaSMI, recordGPUs)
	if err != nil {
		t.Fatal(err)
	}
	// UTC to the millisecond; unknown values empty; the process name kept
	// on one line and quoted for its comma.
	want := "2025-06-01T10:00:00.123Z,nvidia-smi,gpu,0,GPU-4a3f,NVIDIA A100-SXM4-80GB,,85899345920,77914439680,7474249728\n" +
		"2025-06-01T10:00:00.123Z,nvidia-smi,process,0,GPU-4a3f,\"python3?x,y\",2291733,,,\n"
	var got strings.Builder
	for _, r := range rows {
		got.Write(r)
	}
	if got.String() != want || len(rows) != 2 {
		t.Errorf("got\n%s\nwant\n%s", got.String(), want)
	}
	if n := strings.Count(SnapshotCSVHeader, ","); n != strings.Count(strings.SplitN(want, "\n", 2)[0], ",") {
		t.Errorf("the header has %d commas, a row another count", n)
	}
}

func TestSnapshotJSON(t *testing.T) {
	b, err := SnapshotJSON(recordTime, SourceNvidiaSMI, recordGPUs)
	if err != nil {
		t.Fatal(err)
	}
	var back snapshotRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Time != "2025-06-01T10:00:00.123Z" || back.Source != "nvidia-smi" || len(back.GPUs) != 1 || back.GPUs[0].UsedBytes != 74305<<20 ||
		!strings.Contains(string(b), `"used_bytes":null`) {
		t.Errorf("%s", b)
	}
}

// TestRecord: what the server exports is a number, what it does not is
// null; without a vLLM reading only the GPUs are known; alerts are a
// list, empty rather than null.
func TestRecord(t *testing.T) {
	v := &VLLMSample{KVCacheUsage: 0.941, RequestsRunning: 48, PreemptionsTotal: 7,
		Names: map[vllm.Metric]string{vllm.MetricKVCacheUsage: "vllm:kv_cache_usage_perc", vllm.MetricRequestsRunning: "vllm:num_requests_running"}}
	r := Reading{Time: recordTime, VLLM: v, GPUs: recordGPUs, MinFreeBytes: 7128 << 20, OOMRisk: 0.5}
	b, err := json.Marshal(r.Record(nil, errors.New("nvidia-smi: timed out")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"time":"2025-06-01T10:00:00.123Z"`, `"kv_cache_usage":0.941`, `"num_requests_running":48`,
		`"num_requests_waiting":null`, `"num_preemptions_total":null`, `"preemptions_per_minute":null`, `"ttft_p99_seconds":null`,
		`"oom_risk":0.5`, `"gpu_used_bytes":77914439680`, `"gpu_total_bytes":85899345920`, `"gpu_min_free_bytes":7474249728`,
		`"metric_names":{"kv_cache_usage":"vllm:kv_cache_usage_perc","requests_running":"vllm:num_requests_running"}`,
		`"alerts":[]`, `"error":"nvidia-smi: timed out"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("lacks %s:\n%s", want, b)
		}
	}
	b, _ = json.Marshal(Reading{Time: recordTime, MinFreeBytes: Unknown}.Record([]Alert{{Code: AlertGPUHeadroom}}, nil))
	want := `{"time":"2025-06-01T10:00:00.123Z","kv_cache_usage":null,"num_requests_running":null,"num_requests_waiting":null,` +
		`"num_preemptions_total":null,"preemptions_per_minute":null,"ttft_p99_seconds":null,"ttft_window_seconds":null,"oom_risk":null,` +
		`"gpu_used_bytes":null,"gpu_total_bytes":null,"gpu_min_free_bytes":null,"alerts":[{"time":"0001-01-01T00:00:00Z","code":"gpu_headroom","message":"","value":0,"threshold":0}]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
