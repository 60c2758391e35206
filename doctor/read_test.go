package doctor

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

func readString(t *testing.T, name, text string) *Evidence {
	t.Helper()
	ev, err := NewEvidence(traffic.Options{Window: traffic.DefaultWindow})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Read(context.Background(), name, strings.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestParsePyDict(t *testing.T) {
	m, ok := parsePyDict(`{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, 'gpu_memory_utilization': 0.95, 'enable_prefix_caching': True, 'api_key': None, 'load_format': <LoadFormat.AUTO: 'auto'>, 'served_model_name': ['a', "b"], 'compilation_config': {'level': 3, 'sizes': (1, 2)}} trailing`)
	if !ok {
		t.Fatal("not parsed")
	}
	want := map[string]any{
		"model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": int64(8192), "gpu_memory_utilization": 0.95,
		"enable_prefix_caching": true, "api_key": nil, "load_format": "<LoadFormat.AUTO: 'auto'>",
		"served_model_name": []any{"a", "b"}, "compilation_config": map[string]any{"level": int64(3), "sizes": []any{int64(1), int64(2)}},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got  %#v\nwant %#v", m, want)
	}
	kw := parseKeywords(`model='x, y', speculative_config=None, dtype=torch.bfloat16, max_seq_len=8192, override={"a": 1, "b": 2}, enforce_eager=False`)
	wantKW := map[string]any{"model": "x, y", "speculative_config": nil, "dtype": "torch.bfloat16", "max_seq_len": int64(8192),
		"override": map[string]any{"a": int64(1), "b": int64(2)}, "enforce_eager": false}
	if !reflect.DeepEqual(kw, wantKW) {
		t.Errorf("keywords\n got  %#v\nwant %#v", kw, wantKW)
	}
	for _, bad := range []string{"", "{", "[1, 2]", "model=1"} {
		if m, ok := parsePyDict(bad); ok && len(m) > 0 {
			t.Errorf("parsePyDict(%q) = %v", bad, m)
		}
	}
}

func TestReadVLLMLog(t *testing.T) {
	ev := readCorpus(t, "capture-oom.log")
	if len(ev.Logs) != 1 || len(ev.OOMs) != 1 {
		t.Fatalf("%d logs, %d OOMs", len(ev.Logs), len(ev.OOMs))
	}
	l := ev.Logs[0]
	if !slices.Equal(ev.Inputs[0].Kinds, []string{KindVLLMLog, KindOOM}) {
		t.Errorf("kinds %v", ev.Inputs[0].Kinds)
	}
	if l.Versions[0] != vllm.MustVersion("0.19.0") || !l.HasSettings || l.Model != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("log %+v", l)
	}
	s := l.Settings
	if s.GPUMemoryUtilization != 0.98 || s.MaxModelLen != 8192 || s.Dtype != "bfloat16" || s.TensorParallelSize != 1 || s.KVCacheDtype != "auto" {
		t.Errorf("settings %+v", s)
	}
	o := ev.OOMs[0]
	// 512.00 MiB = 2^29; 79.19 GiB and 299.06 MiB as vLLM rounds them.
	if o.OOM.Tried != 1<<29 || o.Phase != PhaseCapture || o.Line.Line != 20 || o.PhaseLine.Line != 19 {
		t.Errorf("OOM %+v", o)
	}
	if l.Report.WeightsBytes != 16095389942 /* 14.99 × 2^30 = 16,095,389,941.76, rounded */ || l.Report.KVTokens != 495520 {
		t.Errorf("report weights %d tokens %d", l.Report.WeightsBytes, l.Report.KVTokens)
	}
}

func TestPhases(t *testing.T) {
	for _, c := range []struct {
		file, phase string
	}{
		{"loading-oom.log", PhaseLoading},
		{"capture-oom.log", PhaseCapture},
		{"fragmentation-runtime.log", PhaseServing},
		{"utilization-edge.log", PhaseServing},
		{"seed001-oom.txt", ""},
	} {
		ev := readCorpus(t, c.file)
		if len(ev.OOMs) != 1 || ev.OOMs[0].Phase != c.phase {
			t.Errorf("%s: %+v, want phase %q", c.file, ev.OOMs, c.phase)
		}
	}
	// vLLM's own sampler message names the phase.
	ev := readString(t, "s", "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.\n")
	if len(ev.OOMs) != 1 || ev.OOMs[0].Phase != PhaseSampler {
		t.Errorf("sampler: %+v", ev.OOMs)
	}
}

func TestReadMixedPaste(t *testing.T) {
	// A ticket paste: a command, nvidia-smi's query CSV, dmon, metrics
	// and a request line, one after another.
	text := `$ vllm serve Qwen/Qwen2.5-7B-Instruct \
    --max-model-len 16384 --max-num-seqs 512
index, name, memory.used [MiB], memory.total [MiB]
0, NVIDIA L40S, 44210 MiB, 46068 MiB
# gpu    sm   mem   enc   dec    fb  bar1
# Idx     %     %     %     %    MB    MB
    0    97    63     0     0 44210     5
    0    99    70     0     0 45002     5
vllm:num_requests_waiting{model_name="q"} 12
vllm:kv_cache_usage_perc{model_name="q"} 0.97
DCGM_FI_DEV_FB_USED{gpu="0"} 45002
DCGM_FI_DEV_FB_FREE{gpu="0"} 1066
2025-06-20T12:00:00Z input_tokens=9000 output_tokens=300
`
	ev := readString(t, "paste", text)
	kinds := ev.Inputs[0].Kinds
	for _, k := range []string{KindVLLMCommand, KindSMIQuery, KindSMIDmon, KindMetrics, KindRequestLog} {
		if !slices.Contains(kinds, k) {
			t.Errorf("kinds %v, want %s; notes %v", kinds, k, ev.Inputs[0].Notes)
		}
	}
	if len(ev.Commands) != 1 || ev.Commands[0].Settings.MaxNumSeqs != 512 || ev.Commands[0].Settings.MaxModelLen != 16384 {
		t.Errorf("commands %+v", ev.Commands)
	}
	if len(ev.GPUs) != 2 || ev.GPUs[0].GPUs[0].UsedBytes != 44210<<20 || ev.GPUs[1].GPUs[0].UsedBytes != 45002<<20 {
		t.Errorf("gpus %+v", ev.GPUs)
	}
	m := ev.Metrics[0]
	// DCGM reports MiB: used 45002, total = used + free = 46068.
	if m.VLLM == nil || m.VLLM.KVCacheUsage != 0.97 || m.GPUUsedBytes != 45002<<20 || m.GPUTotalBytes != 46068<<20 {
		t.Errorf("metrics %+v", m)
	}
	if ev.Traffic.Requests() != 1 {
		t.Errorf("requests %d", ev.Traffic.Requests())
	}
}

func TestReadDescribe(t *testing.T) {
	ev := readCorpus(t, "describe-pod.txt")
	k := ev.K8s
	if len(k.Containers) != 1 {
		t.Fatalf("containers %+v", k.Containers)
	}
	c := k.Containers[0]
	if c.Settings.Model != "meta-llama/Llama-3.1-8B-Instruct" || c.Settings.MaxModelLen != 32768 || c.Container != "vllm" || c.Version != vllm.MustVersion("0.10.1") ||
		c.GPUCount != 1 || c.MemoryLimit != 32<<30 || c.Settings.Env["VLLM_USE_V1"] != "1" || !c.VLLM {
		t.Errorf("container %+v", c)
	}
	// Liveness: delay 20 s + 3 failures × 10 s period = 50 s.
	if len(c.Probes) != 2 || c.Probes[0].Kind != "liveness" || c.Probes[0].BudgetSeconds != 50 {
		t.Errorf("probes %+v", c.Probes)
	}
	if len(k.Restarts) != 1 || k.Restarts[0].Count != 7 || len(k.CrashLoop) != 2 || len(k.ProbeFailures) != 1 {
		t.Errorf("restarts %+v crash %v probes %v", k.Restarts, k.CrashLoop, k.ProbeFailures)
	}
}

func TestReadManifests(t *testing.T) {
	ev := readCorpus(t, "k8s-deployment.yaml", "k8s-pod-status.yaml", "timeslicing.yaml")
	k := ev.K8s
	if len(k.Containers) != 2 {
		t.Fatalf("containers %+v", k.Containers)
	}
	c := k.Containers[0]
	// 16Gi = 16 × 2^30 bytes; the liveness probe gives 30 + 3 × 10 = 60 s.
	if c.Settings.GPUMemoryUtilization != 0.95 || c.MemoryLimit != 16<<30 || c.GPUResource != "nvidia.com/gpu" || c.Version != vllm.MustVersion("0.8.5") {
		t.Errorf("container %+v", c)
	}
	if len(c.Probes) != 2 || c.Probes[0].BudgetSeconds != 60 || c.Probes[0].Line.Line != 37 {
		t.Errorf("probes %+v", c.Probes)
	}
	if len(k.HPAs) != 1 || !k.HPAs[0].CPUOnly {
		t.Errorf("hpa %+v", k.HPAs)
	}
	if len(k.OOMKilled) != 1 || len(k.CrashLoop) != 1 || len(k.Restarts) != 1 || k.Restarts[0].Count != 6 {
		t.Errorf("status %+v", k)
	}
	// The time-slicing config and the node's replicas label.
	if len(k.Sharing) != 2 {
		t.Errorf("sharing %+v", k.Sharing)
	}
	// Node selector (L4) and node labels (A100) name GPUs.
	if len(k.GPUHints) != 2 {
		t.Errorf("hints %+v", k.GPUHints)
	}
	for _, in := range ev.Inputs {
		if !slices.Equal(in.Kinds, []string{KindManifest}) {
			t.Errorf("%s: %v", in.Source, in.Kinds)
		}
	}
}

func TestNotEvidence(t *testing.T) {
	ev := readString(t, "notes.txt", "hello\nworld\n")
	if !ev.Empty() {
		t.Errorf("kinds %v", ev.Inputs[0].Kinds)
	}
	// A binary file is skipped with a note, not an error that would end
	// the reading of the files beside it; alone, it leaves nothing.
	e2, _ := NewEvidence(traffic.Options{})
	if err := e2.Read(context.Background(), "core.dump", strings.NewReader("\x7fELF\x02\x01\x01\x00\x00\x00")); err != nil {
		t.Errorf("binary: %v", err)
	}
	if !e2.Empty() || len(e2.Inputs[0].Notes) != 1 || !strings.Contains(e2.Inputs[0].Notes[0], "not text: skipped") {
		t.Errorf("binary input %+v, want nothing recognised and a note", e2.Inputs[0])
	}
	d := Diagnose(ev, Options{})
	if !d.Healthy() || d.Findings == nil || d.DeadEnds == nil {
		t.Errorf("diagnosis of nothing: %+v", d)
	}
}
