package probe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"headroom.dev/headroom/vllm"
)

// llamaH100 is the v0.19.0 calibration row of Llama-3.1-8B on an H100
// (memory/testdata/vllm-0.19.0-h100.csv: weights 14.99, activation 1.89,
// non-torch 0.25 GiB, graphs 0.91 GiB actual, 58.11 GiB KV, 476016
// tokens, 29751 blocks; batch 8192 tokens / 1024 sequences).
func llamaH100(at time.Time) Record {
	return Record{
		Time: at, Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100-80GB", GPUTotalBytes: 85029158912,
		VLLMVersion: v019, TensorParallelSize: 1, PipelineParallelSize: 1, MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024,
		Dtype: "auto", KVCacheDtype: "auto", GPUMemoryUtilization: 0.95, MaxModelLen: 8192,
		WeightsBytes: gibBytes(14.99), ActivationBytes: gibBytes(1.89), NonTorchBytes: gibBytes(0.25), CUDAGraphBytes: gibBytes(0.91),
		AvailableKVBytes: gibBytes(58.11), KVTokens: 476016, NumGPUBlocks: 29751,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache", "headroom", "calibration.jsonl")
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	a, b := llamaH100(at), llamaH100(at.Add(time.Hour))
	b.MaxNumSeqs = 256
	for _, r := range []Record{a, b} {
		if err := AppendRecord(path, r); err != nil {
			t.Fatal(err)
		}
	}
	got, skipped, err := readFile(t, path)
	if err != nil || skipped != 0 || len(got) != 2 || !got[0].Time.Equal(at) || got[1].MaxNumSeqs != 256 || got[0].VLLMVersion != v019 {
		t.Fatalf("got %+v, %d skipped, %v", got, skipped, err)
	}
	line, _ := os.ReadFile(path)
	for _, field := range []string{`"model":"meta-llama/Llama-3.1-8B-Instruct"`, `"gpu":"H100-80GB"`, `"vllm_version":"0.19.0"`, `"tensor_parallel_size":1`, `"kv_cache_tokens":476016`} {
		if !strings.Contains(string(line), field) {
			t.Errorf("file lacks %s", field)
		}
	}
}

// TestAppendConcurrent: probes writing at once leave whole lines.
func TestAppendConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calibration.jsonl")
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := llamaH100(time.Unix(int64(i), 0))
			r.Model = fmt.Sprintf("org/model-%d-%s", i, strings.Repeat("x", 3000))
			if err := AppendRecord(path, r); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	got, skipped, err := readFile(t, path)
	if err != nil || skipped != 0 || len(got) != 40 {
		t.Errorf("%d records, %d skipped, %v", len(got), skipped, err)
	}
}

// TestAppendAfterCutLine: a file cut short mid-record (disk full, power
// loss) keeps the next record on a line of its own.
func TestAppendAfterCutLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calibration.jsonl")
	if err := os.WriteFile(path, []byte(`{"model":"m","gpu":"g","vllm_versi`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendRecord(path, llamaH100(time.Unix(0, 0))); err != nil {
		t.Fatal(err)
	}
	got, skipped, err := readFile(t, path)
	if err != nil || len(got) != 1 || skipped != 1 {
		t.Errorf("%d records, %d skipped, %v; want 1 record after 1 cut line", len(got), skipped, err)
	}
}

func TestReadRecordsSkipsBadLines(t *testing.T) {
	good, _ := json.Marshal(llamaH100(time.Unix(0, 0)))
	text := strings.Join([]string{
		string(good),
		`{"model":"m","gpu":"g"}`,            // no version
		`{"model":"m","gpu":"g","vllm_versi`, // cut short by a crash
		"",
		`{"model":"m","gpu":"g","vllm_version":"0.19.0","weights_bytes":-5}`,
		"x" + strings.Repeat("y", maxRecordLine+10),
		string(good),
	}, "\n")
	got, skipped, err := ReadRecords(strings.NewReader(text))
	if err != nil || len(got) != 2 || skipped != 4 {
		t.Errorf("%d records, %d skipped, %v", len(got), skipped, err)
	}
}

func TestMatches(t *testing.T) {
	r := llamaH100(time.Unix(0, 0))
	sp, dev := spec(t, "meta-llama/Llama-3.1-8B-Instruct"), device(t, "H100-80GB")
	// On an H100 vLLM 0.19.0 defaults to 8192 batched tokens and 1024
	// sequences (vllm-memory.md §2.3), so a plan that gives neither matches.
	k := KeyFor(sp, dev, vllm.Settings{Version: v019})
	if !r.Matches(k) {
		t.Fatalf("%+v does not match %+v", r, k)
	}
	kUpper := k
	kUpper.Model = "META-LLAMA/llama-3.1-8b-instruct"
	if !r.Matches(kUpper) {
		t.Error("model ids compare without case")
	}
	for name, mod := range map[string]func(*Key){
		"version":   func(k *Key) { k.Version = vllm.MustVersion("0.20.0") },
		"gpu":       func(k *Key) { k.GPU = "A100-80GB" },
		"tp":        func(k *Key) { k.TensorParallelSize = 2 },
		"pp":        func(k *Key) { k.PipelineParallelSize = 2 },
		"batched":   func(k *Key) { k.MaxNumBatchedTokens = 2048 },
		"seqs":      func(k *Key) { k.MaxNumSeqs = 256 },
		"dtype":     func(k *Key) { k.Dtype = "float32" },
		"quantized": func(k *Key) { k.Quantization = "fp8" },
	} {
		k2 := k
		mod(&k2)
		if r.Matches(k2) {
			t.Errorf("matches with another %s", name)
		}
	}
	// The utilization and the context length change no measured part.
	if !r.Matches(KeyFor(sp, dev, vllm.Settings{Version: v019, GPUMemoryUtilization: 0.8, MaxModelLen: 4096})) {
		t.Error("utilization or max-model-len broke the match")
	}
	m := r.Measured()
	if m == nil || m.Weights != gibBytes(14.99) || m.Activation != gibBytes(1.89) || m.NonTorch != gibBytes(0.25) || m.CUDAGraph != gibBytes(0.91) || !strings.Contains(m.Source, "probe of meta-llama/Llama-3.1-8B-Instruct") {
		t.Errorf("measured %+v", m)
	}
	if (Record{Model: "m"}).Measured() != nil {
		t.Error("a record with no figures measures something")
	}
}

func TestLatestMatch(t *testing.T) {
	old, newer, other := llamaH100(time.Unix(100, 0)), llamaH100(time.Unix(200, 0)), llamaH100(time.Unix(300, 0))
	newer.WeightsBytes = 1
	other.GPU = "L4"
	k := KeyFor(spec(t, "meta-llama/Llama-3.1-8B-Instruct"), device(t, "H100-80GB"), vllm.Settings{Version: v019})
	got, ok := LatestMatch([]Record{newer, old, other}, k)
	if !ok || got.WeightsBytes != 1 {
		t.Errorf("got %+v, %v", got, ok)
	}
	if _, ok := LatestMatch([]Record{other}, k); ok {
		t.Error("matched another GPU")
	}
}

func TestCalibrationPath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_CACHE_HOME": "/var/cache/u", "HOME": "/home/u"}, "/var/cache/u/headroom/calibration.jsonl"},
		{map[string]string{"XDG_CACHE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.cache/headroom/calibration.jsonl"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.cache/headroom/calibration.jsonl"},
	} {
		got, err := CalibrationPath(env(tt.env))
		if err != nil || got != tt.want {
			t.Errorf("%v: got %q, %v", tt.env, got, err)
		}
	}
	if _, err := CalibrationPath(env(nil)); err == nil {
		t.Error("no HOME: no error")
	}
}

func FuzzReadRecords(f *testing.F) {
	good, _ := json.Marshal(llamaH100(time.Unix(0, 0)))
	f.Add(string(good) + "\n")
	f.Add(string(good) + "\n{\"model\":1}\n" + string(good))
	f.Add(`{"model":"m","gpu":"g","vllm_version":"v0.19.0rc1","num_gpu_blocks":1e3}`)
	f.Fuzz(func(t *testing.T, text string) {
		recs, skipped, err := ReadRecords(strings.NewReader(text))
		if err != nil || skipped < 0 {
			t.Fatalf("err %v skipped %d", err, skipped)
		}
		if len(recs)+skipped > strings.Count(text, "\n")+1 {
			t.Fatalf("%d records and %d skipped from %d lines", len(recs), skipped, strings.Count(text, "\n")+1)
		}
		for _, r := range recs {
			if !r.valid() {
				t.Fatalf("invalid record %+v", r)
			}
		}
	})
}

// readFile reads the records of the file at path.
func readFile(t *testing.T, path string) ([]Record, int, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ReadRecords(f)
}
