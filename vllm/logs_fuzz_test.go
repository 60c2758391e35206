package vllm

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// saneEvent checks what any recognised line must satisfy.
func saneEvent(t *testing.T, ev LogEvent) {
	t.Helper()
	if ev.Kind == "" || len(ev.Message) > MaxMessageLen || ev.Device < -1 {
		t.Fatalf("event %+v", ev)
	}
	m := ev.Memory
	for _, b := range []int64{m.Total, m.Free, m.Requested, m.Weights, m.Activation, m.NonTorch, m.NonKV, m.PeakTorch,
		m.CUDAGraph, m.CUDAGraphEstimate, m.AvailableKV, m.KVNeeded, ev.Tokens, ev.Blocks, ev.CPUBlocks} {
		if b < 0 || b > maxLogBytes {
			t.Fatalf("figure %d out of range in %+v", b, ev)
		}
	}
	if ev.MaxModelLen < 0 || ev.EstimatedMaxLen < 0 {
		t.Fatalf("lengths in %+v", ev)
	}
	for _, f := range []float64{ev.Seconds, ev.Concurrency, ev.Utilization} {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("float %v in %+v", f, ev)
		}
	}
	if ev.Utilization > 1 {
		t.Fatalf("utilization %v", ev.Utilization)
	}
	if ev.KVUsage < 0 || ev.KVUsage > 1 || ev.Running < 0 || ev.Waiting < 0 || len(ev.Args) > MaxLineLen {
		t.Fatalf("run-time figures in %+v", ev)
	}
	if o := ev.OOM; o != nil {
		for _, b := range []int64{o.Tried, o.Total, o.Free, o.ProcessInUse, o.Allocated, o.PrivatePools, o.ReservedUnallocated, o.Reserved} {
			if b < 0 || b > maxLogBytes {
				t.Fatalf("OOM figure %d in %+v", b, o)
			}
		}
	}
	if (ev.OOM != nil) != (ev.Kind == LogErrOOM) {
		t.Fatalf("OOM details on a %s line", ev.Kind)
	}
}

func FuzzParseLogLine(f *testing.F) {
	for _, s := range []string{
		"(EngineCore_DP0 pid=212) INFO 11-22 10:01:02 [gpu_worker.py:298] Available KV cache memory: 58.11 GiB",
		"INFO 11-22 10:01:02 [kv_cache_utils.py:1087] GPU KV cache size: 476,016 tokens",
		"Maximum concurrency for 8,192 tokens per request: 58.11x",
		"ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.47 GiB). Based on the available memory, the estimated maximum model length is 20272. Try",
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.23 GiB is free. Process 4711 has 77.95 GiB memory in use. Of the allocated memory 75.60 GiB is allocated by PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated.",
		"RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.19 MiB free; 14.65 GiB reserved in total by PyTorch)",
		"ValueError: Free memory on device cuda:1 (60.85/79.19 GiB) on startup is less than desired GPU memory utilization (0.95, 75.23 GiB).",
		"Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.95, 75.23 GiB). Actual usage is 14.99 GiB for weight, 1.89 GiB for peak activation, 0.25 GiB for non-torch memory, and 0.84 GiB for CUDAGraph memory.",
		"Auto-fit max_model_len: reduced from 40960 to 20272 to fit in available GPU memory (2.47 GiB available for KV cache)",
		"Memory profiling results: total_gpu_memory=79.19GiB peak_torch_memory=14.94GiB non_torch_memory=0.79GiB kv_cache_size=55.54GiB gpu_memory_utilization=0.90",
		"# GPU blocks: 7109, # CPU blocks: 512",
		"ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (20272).",
		"\x1b[32mINFO\x1b[0m Application startup complete.\r",
		"non-default args: {'model': 'x', 'max_model_len': 8192}",
		"args: Namespace(host=None, model='x', max_model_len=32768)",
		"Initializing an LLM engine with config: model='x', max_seq_len=2048",
		"Running: 58 reqs, Swapped: 0 reqs, Pending: 37 reqs, GPU KV cache usage: 99.6%, CPU KV cache usage: 0.0%.",
		"init engine (profile, create kv cache, warmup model) took 26.14 seconds",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		ev, ok := ParseLogLine(line)
		if !ok {
			if !reflect.DeepEqual(ev, LogEvent{}) {
				t.Fatalf("unrecognised line gave %+v", ev)
			}
			return
		}
		saneEvent(t, ev)
		var r StartupReport
		r.Add(ev)
		if r.Lines != 0 || len(r.Errors) > 1 || (len(r.Errors) == 1) != ev.Kind.IsError() {
			t.Fatalf("report %+v from %+v", r, ev)
		}
	})
}

// FuzzLogScanner feeds text as one write and as two writes cut at any
// point: the reports must agree, whatever the bytes.
func FuzzLogScanner(f *testing.F) {
	f.Add("INFO Model loading took 14.99 GiB memory and 4.8 seconds\nINFO GPU KV cache size: 476,016 tokens\r\nINFO:     Application startup complete.\n", 17)
	f.Add("Loading: 0%\rLoading: 100%\rINFO Available KV cache memory: 3.02 GiB", 5)
	f.Add("ValueError: No available memory for the cache blocks.\n\n\n", 0)
	f.Fuzz(func(t *testing.T, text string, cut int) {
		if cut < 0 {
			cut = -cut
		}
		if cut < 0 {
			cut = 0
		}
		cut %= len(text) + 1
		var whole, split LogScanner
		whole.Write([]byte(text))
		whole.Flush()
		split.Write([]byte(text[:cut]))
		split.Write([]byte(text[cut:]))
		split.Flush()
		a, b := whole.Report(), split.Report()
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("whole %+v\nsplit %+v", a, b)
		}
		var rd LogScanner
		rd.ReadFrom(strings.NewReader(text))
		if c := rd.Report(); !reflect.DeepEqual(a, c) {
			t.Fatalf("write %+v\nread  %+v", a, c)
		}
		if a.Lines > strings.Count(text, "\n")+strings.Count(text, "\r")+1 || len(a.Errors) > MaxReportErrors {
			t.Fatalf("report %+v", a)
		}
		for _, e := range a.Errors {
			saneEvent(t, e)
		}
	})
}
