package memory_test

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// calibrationRow is one real vLLM start-up from
// testdata/vllm-0.19.0-h100.csv (57 vLLM 0.19.0 start-ups on H100-80GB
// from the llm-d capacity planner's published start-up logs, numbers as
// vLLM logged them; testdata/README.md).
type calibrationRow struct {
	model                                       string
	tp, pp, dp                                  int
	util                                        float64
	maxModelLen, batched, seqs                  int
	dtype, quant, kvDtype                       string
	eager                                       bool
	weights, act, nonTorch, kvGiB, graph, total float64
	tokens                                      int64
}

func readCalibration(t testing.TB) []calibrationRow {
	t.Helper()
	recs, col := readCSV(t, "testdata/vllm-0.19.0-h100.csv")
	var rows []calibrationRow
	for _, r := range recs[1:] {
		get := func(k string) string { return r[col[k]] }
		if get("startup_failed") == "yes" {
			// Failed for reasons outside memory accounting (no network,
			// a DP launcher bug, another process holding the GPU).
			continue
		}
		atoi := func(k string) int { n, _ := strconv.Atoi(get(k)); return n }
		atof := func(k string) float64 { x, _ := strconv.ParseFloat(get(k), 64); return x }
		row := calibrationRow{
			model: get("model"), tp: atoi("tensor_parallel_size"), pp: atoi("pipeline_parallel_size"), dp: atoi("data_parallel_size"),
			util: atof("gpu_memory_utilization"), maxModelLen: atoi("max_model_len"), batched: atoi("max_num_batched_tokens"), seqs: atoi("max_num_seqs"),
			dtype: strings.TrimPrefix(get("dtype"), "torch."), quant: get("quantization"), kvDtype: get("kv_cache_dtype"),
			eager:   get("enforce_eager") == "True",
			weights: atof("model_loading_gib"), act: atof("torch_peak_increase_gib"), nonTorch: atof("non_torch_increase_gib"),
			kvGiB: atof("available_kv_cache_gib"), graph: atof("cudagraph_pool_actual_gib"), total: atof("gpu_total_gib"),
		}
		row.tokens, _ = strconv.ParseInt(get("gpu_kv_cache_tokens"), 10, 64)
		if row.quant == "None" {
			row.quant = ""
		}
		rows = append(rows, row)
	}
	return rows
}

func (r calibrationRow) input(t testing.TB) memory.Input {
	spec, ok := catalog.Lookup(r.model)
	if !ok {
		t.Fatalf("calibration model %s is not in the catalog", r.model)
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	q := r.quant
	if q == "compressed-tensors" || q == "gptq_marlin" {
		q = "" // read from the checkpoint's quantization_config
	}
	return memory.Input{
		Model:  spec,
		Device: sel.Device,
		Settings: vllm.Settings{
			TensorParallelSize: r.tp, PipelineParallelSize: r.pp, DataParallelSize: r.dp,
			GPUMemoryUtilization: r.util, MaxModelLen: r.maxModelLen,
			MaxNumBatchedTokens: r.batched, MaxNumSeqs: r.seqs,
			Dtype: r.dtype, Quantization: q, KVCacheDtype: r.kvDtype, EnforceEager: r.eager,
			Version: vllm.MustVersion("0.19.0"),
		},
	}
}

// TestCalibrationAccuracy replays every successful start-up through the
// planner and reports the mean and max absolute % error of KV tokens and of
// each budget part. Targets: KV tokens within 0.3% mean and 3% max. For scale: the llm-d capacity planner's study of the same kind
// of runs reports 21.6% mean and 287% max.
func TestCalibrationAccuracy(t *testing.T) {
	rows := readCalibration(t)
	if len(rows) < 40 {
		t.Fatalf("only %d usable calibration rows", len(rows))
	}
	type stat struct {
		name      string
		sum, maxE float64
		n         int
		worst     string
	}
	stats := map[string]*stat{}
	order := []string{"kv_tokens", "kv_gib", "weights", "activation", "non_torch", "cudagraph"}
	for _, k := range order {
		stats[k] = &stat{name: k}
	}
	add := func(k string, pred, actual float64, label string) {
		if actual == 0 {
			return
		}
		e := math.Abs(pred-actual) / actual * 100
		s := stats[k]
		s.sum += e
		s.n++
		if e > s.maxE {
			s.maxE, s.worst = e, label
		}
	}
	var lines []string
	for _, r := range rows {
		b, err := memory.Plan(r.input(t))
		if err != nil {
			t.Fatalf("%s: %v", r.model, err)
		}
		label := fmt.Sprintf("%s tp%d pp%d %s q=%s kv=%s", r.model, r.tp, r.pp, r.dtype, r.quant, r.kvDtype)
		g := func(x int64) float64 { return float64(x) / (1 << 30) }
		// vLLM logs the first worker's measurements; the KV figures are
		// the minimum over all workers.
		p := b.Stages[0]
		add("kv_tokens", float64(b.KVTokens), float64(r.tokens), label)
		add("kv_gib", g(p.KVCache), r.kvGiB, label)
		add("weights", g(p.Weights), r.weights, label)
		add("activation", g(p.Activation), r.act, label)
		add("non_torch", g(p.NonTorch), r.nonTorch, label)
		add("cudagraph", g(p.CUDAGraph), r.graph, label)
		lines = append(lines, fmt.Sprintf("%-70s tokens %9d / %9d (%+6.2f%%)  W %6.2f/%6.2f  A %5.2f/%5.2f  N %4.2f/%4.2f  KV %6.2f/%6.2f  G %4.2f/%4.2f",
			label, b.KVTokens, r.tokens, (float64(b.KVTokens)/float64(r.tokens)-1)*100,
			g(p.Weights), r.weights, g(p.Activation), r.act, g(p.NonTorch), r.nonTorch, g(p.KVCache), r.kvGiB, g(p.CUDAGraph), r.graph))
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Log(l)
	}
	t.Logf("%d start-ups (vLLM 0.19.0, H100-80GB): predicted vs logged", len(rows))
	for _, k := range order {
		s := stats[k]
		t.Logf("%-11s mean |err| %6.2f%%   max |err| %6.2f%%   worst: %s", s.name, s.sum/float64(s.n), s.maxE, s.worst)
	}
	// The version issue's bar: the start-ups reproduce as before the
	// profile run was modelled by release (0.27% mean, 3.96% max then;
	// 0.21% and 2.75% with the sampler mechanism).
	kv := stats["kv_tokens"]
	if mean := kv.sum / float64(kv.n); mean > 0.3 {
		t.Errorf("KV tokens mean error %.2f%% exceeds 0.3%%", mean)
	}
	if kv.maxE > 3 {
		t.Errorf("KV tokens max error %.2f%% exceeds 3%% (%s)", kv.maxE, kv.worst)
	}
}

// TestExternalAnchor checks a start-up outside the calibration set: KAITO
// PR #2156 reports that vLLM's `--max-model-len auto` chose 20,272 tokens
// for Qwen3-8B on one A10 at --gpu-memory-utilization 0.84 (kaito.md §5,
// peers.md §7). The vLLM version is not stated (KAITO ran a 0.1x release
// then, before CUDA graphs entered the budget in 0.21.0), and the A10's
// usable total is an estimate, so the tolerance is 10%.
func TestExternalAnchor(t *testing.T) {
	in := memory.Input{
		Model:  spec(t, "Qwen/Qwen3-8B"),
		Device: device(t, "A10"),
		Settings: vllm.Settings{GPUMemoryUtilization: 0.84, MaxModelLen: vllm.AutoMaxModelLen,
			Version: vllm.MustVersion("0.19.0")},
	}
	b := plan(t, in)
	e := (float64(b.MaxModelLen)/20272 - 1) * 100
	t.Logf("Qwen3-8B on A10 at 0.84, auto: predicted %d tokens, KAITO measured 20,272 (%+.1f%%)", b.MaxModelLen, e)
	if math.Abs(e) > 10 {
		t.Errorf("auto-fit length %d is %.1f%% off KAITO's 20,272", b.MaxModelLen, e)
	}
}

// TestMoECalibration checks the fused-MoE workspace on every MoE start-up
// of the calibration set: vLLM 0.19.0 logs a torch peak of the persistent
// workspace plus the larger of the other forward activations and the
// sampler run (and, on Kimi-VL, MoonViT's cached rotary table), and the
// plan must find it within 0.05 GiB (the logs give two decimals; without
// the workspace DeepSeek-V2-Lite was 0.46 GiB short and Kimi-VL 0.53,
// without the table Kimi-VL was 0.08 short). KV tokens must be within
// 0.5%, the bar the plan issue sets for these start-ups.
func TestMoECalibration(t *testing.T) {
	n := 0
	for _, r := range readCalibration(t) {
		in := r.input(t)
		if in.Model.MoE == nil || in.Model.MoE.Experts == 0 {
			continue
		}
		n++
		b, err := memory.Plan(in)
		if err != nil {
			t.Fatalf("%s: %v", r.model, err)
		}
		act := float64(b.Stages[0].Activation) / (1 << 30)
		kvErr := (float64(b.KVTokens)/float64(r.tokens) - 1) * 100
		t.Logf("%s TP=%d: activation %.2f GiB (logged %.2f), KV tokens %d (logged %d, %+.2f%%)", r.model, r.tp, act, r.act, b.KVTokens, r.tokens, kvErr)
		if math.Abs(act-r.act) > 0.05 {
			t.Errorf("%s TP=%d: activation %.2f GiB, vLLM logged %.2f", r.model, r.tp, act, r.act)
		}
		if math.Abs(kvErr) > 0.5 {
			t.Errorf("%s TP=%d: KV tokens %+.2f%% off", r.model, r.tp, kvErr)
		}
	}
	if n < 4 {
		t.Fatalf("only %d MoE start-ups in the calibration set, want the 4 it holds", n)
	}
}

// readCSV reads a start-up table: its rows after the header, and each
// column's index by name.
func readCSV(t testing.TB, path string) ([][]string, map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("%s: no header", path)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	return recs, col
}
