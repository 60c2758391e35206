package memory_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// The features are tested as differences: the same plan with and without
// the feature, so that what they add is checked apart from the rest of
// the budget (whose overhead terms have their own calibration).

func settingsOf(t testing.TB, line string) vllm.Settings {
	t.Helper()
	w, err := vllm.SplitCommandLine(line)
	if err != nil {
		t.Fatal(err)
	}
	s, err := vllm.ParseCommand(w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// featureRow is one row of testdata/features/startups-features.csv.
type featureRow map[string]string

func featureRows(t testing.TB) map[string]featureRow {
	t.Helper()
	recs, col := readCSV(t, "testdata/features/startups-features.csv")
	rows := map[string]featureRow{}
	for _, r := range recs[1:] {
		row := featureRow{}
		for name, i := range col {
			row[name] = r[i]
		}
		rows[row["id"]] = row
	}
	return rows
}

// number reads the leading number of a cell ("15.22 (target+draft ...)",
// "62,512").
func (r featureRow) number(t testing.TB, key string) float64 {
	t.Helper()
	f := strings.Fields(r[key])
	if len(f) == 0 {
		t.Fatalf("row %s has no %s", r["id"], key)
	}
	x, err := strconv.ParseFloat(strings.ReplaceAll(f[0], ",", ""), 64)
	if err != nil {
		t.Fatalf("row %s %s: %v", r["id"], key, err)
	}
	return x
}

func gibOf(b int64) float64 { return float64(b) / gib }

// The example: four rank-64 slots on Qwen2.5-7B. Qwen2 declares no
// embedding modules, so vLLM wraps qkv_proj (3 slices), o_proj, gate_up_proj
// (2 slices) and down_proj of 28 layers; per slot and layer (H 3584, q 3584,
// k = v = 512, I 18944, r 64):
//
//	qkv      A 3·64·3584 = 688,128    B (3584+512+512)·64 = 294,912
//	o        A 64·3584   = 229,376    B 3584·64           = 229,376
//	gate_up  A 2·64·3584 = 458,752    B 2·18944·64        = 2,424,832
//	down     A 64·18944  = 1,212,416  B 3584·64           = 229,376
//	                                  sum 5,767,168 = 64 · 90,112
//
// × 28 layers × 2 bytes = 322,961,408 B a slot; four slots 1,291,845,632 B
// (1.203 GiB), which come out of the KV cache one for one.
func TestLoRASlotsQwen7B(t *testing.T) {
	const perSlot = 5767168 * 28 * 2
	base := "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192"
	in := memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "L4")}
	in.Settings = settingsOf(t, base)
	without := plan(t, in)
	in.Settings = settingsOf(t, base+" --enable-lora --max-loras 4 --max-lora-rank 64")
	with := plan(t, in)
	if d := with.PerGPU.Weights - without.PerGPU.Weights; d != 4*perSlot {
		t.Errorf("four rank-64 slots add %d B of weights, want 4 × %d = %d", d, perSlot, 4*perSlot)
	}
	if d := without.PerGPU.KVCache - with.PerGPU.KVCache; d != 4*perSlot {
		t.Errorf("the KV cache shrinks by %d B, want %d", d, 4*perSlot)
	}
	if f := with.Features().LoRA; f == nil || f.Slots != 4 || f.Rank != 64 || f.Bytes != 4*perSlot || without.Features().LoRA != nil {
		t.Errorf("features: %+v", f)
	}
	// --max-loras without --enable-lora allocates nothing.
	in.Settings = settingsOf(t, base+" --max-loras 4 --max-lora-rank 64")
	if off := plan(t, in); off.PerGPU.Weights != without.PerGPU.Weights {
		t.Errorf("slots planned without --enable-lora: %d B", off.PerGPU.Weights-without.PerGPU.Weights)
	}

	// Under TP 2 a column layer keeps A whole and a row layer B whole, so
	// a rank holds more than half (docs/features.md §1):
	//   qkv 688,128 + 2304·64; o 64·1792 + 229,376;
	//   gate_up 458,752 + 18944·64; down 64·9472 + 229,376 → 3,686,400;
	// fully sharded, exactly half: 2,883,584.
	for _, tt := range []struct {
		flags   string
		perRank int64
	}{
		{"", 3686400},
		{" --fully-sharded-loras", 2883584},
	} {
		in := memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "L4"), Count: 2}
		in.Settings = settingsOf(t, base+" -tp 2")
		tp2 := plan(t, in)
		in.Settings = settingsOf(t, base+" -tp 2 --enable-lora --max-loras 1 --max-lora-rank 64"+tt.flags)
		lora := plan(t, in)
		if d, want := lora.PerGPU.Weights-tp2.PerGPU.Weights, tt.perRank*28*2; d != want {
			t.Errorf("TP 2%s: one slot adds %d B a rank, want %d", tt.flags, d, want)
		}
	}
}

// Llama declares embed_tokens and lm_head as embedding modules: its
// vocabulary gets slots too, and before 0.12.0 256 extra rows a slot and
// in the model (#23635, #28382). Per slot at rank 16 (V 128,256, H 4096):
//
//	layers    32 · 16 · (3·4096 + 6144 + 4096 + 4096 + 2·4096 + 2·14336 + 14336 + 4096) = 32 · 16 · 81,920
//	embedding 0.12: (128,256)·16 + 4096·16;  0.11: (128,512)·16 + 4096·16 + 256·4096
//	logits    0.12: 16·4096 + 128,256·16 (a multiple of 256);  0.11: 16·4096 + 128,512·16 + 256·4096
//
// and at 0.11 the model's embedding and LM head 256 · 4096 rows each more.
func TestLoRAEmbeddingsAndExtraVocab(t *testing.T) {
	const layers = 32 * 16 * 81920
	const at012 = layers + (128256*16 + 4096*16) + (16*4096 + 128256*16)
	const at011 = layers + (128512*16 + 4096*16 + 256*4096) + (16*4096 + 128512*16 + 256*4096)
	for _, tt := range []struct {
		version string
		want    int64
	}{
		{"0.12.0", at012 * 2},
		{"0.11.1", at011*2 + 2*256*4096*2},
	} {
		v := vllm.MustVersion(tt.version)
		in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB")}
		in.Settings = settingsOf(t, "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192")
		in.Settings.Version = v
		off := plan(t, in)
		in.Settings = settingsOf(t, "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --enable-lora")
		in.Settings.Version = v
		on := plan(t, in)
		if d := on.PerGPU.Weights - off.PerGPU.Weights; d != tt.want {
			t.Errorf("vLLM %s: one rank-16 slot adds %d B, want %d", tt.version, d, tt.want)
		}
	}
}

// LoRA on fused-MoE experts from 0.11.2 (#21229): per layer and slot the
// experts add E · r · (2·(H + I) + I + H) for gated experts (w13's A and B
// for gate and up, w2's A and B). Mixtral-8x7B: E 8, H 4096, I 14336, 32
// layers: 8 · 16 · (2 · 18,432 + 18,432) = 7,077,888 a layer at rank 16.
func TestLoRAExpertsBoundary(t *testing.T) {
	weights := func(version string) int64 {
		in := memory.Input{Model: spec(t, "mistralai/Mixtral-8x7B-Instruct-v0.1"), Device: device(t, "H100-80GB"), Count: 2}
		in.Settings = settingsOf(t, "vllm serve mistralai/Mixtral-8x7B-Instruct-v0.1 -tp 2 --max-model-len 8192 --enable-lora")
		in.Settings.Version = vllm.MustVersion(version)
		return plan(t, in).PerGPU.Weights
	}
	// At TP 2 each rank holds every expert at half its width: E · r ·
	// (2·(H + I/2) + I/2 + H) = 8 · 16 · (2·11,264 + 11,264) per layer.
	const experts = 32 * 8 * 16 * (2*(4096+7168) + 7168 + 4096) * 2
	if d := weights("0.11.2") - weights("0.11.1"); d != experts {
		t.Errorf("expert slots add %d B a rank at 0.11.2, want %d", d, experts)
	}
}

// The GB10 series (rows 235–241, vLLM 0.25, a Gemma 4 MoE at rank 16):
// "Model loading took" grows by the same amount for each slot, as the
// slots' cost is max_loras × max_lora_rank × the wrapped widths. Gemma 4
// is not in the catalog, so the line is checked on the rows and the
// plan's linearity on another MoE model.
func TestLoRASlotsLinear(t *testing.T) {
	rows := featureRows(t)
	slots := map[string]float64{"235": 2, "241": 3, "236": 4, "239": 5}
	// Least-squares line of weights over slots.
	var n, sx, sy, sxx, sxy float64
	for id, k := range slots {
		w := rows[id].number(t, "weights_GiB")
		n, sx, sy, sxx, sxy = n+1, sx+k, sy+w, sxx+k*k, sxy+k*w
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	icept := (sy - slope*sx) / n
	for id, k := range slots {
		// The log prints two decimals: 0.005 each way, doubled for the fit.
		if r := rows[id].number(t, "weights_GiB") - (icept + slope*k); math.Abs(r) > 0.04 {
			t.Errorf("row %s: %.2f GiB at %v slots is %.3f GiB off the line (%.3f GiB a slot)", id, rows[id].number(t, "weights_GiB"), k, r, slope)
		}
	}
	if slope < 1.2 || slope > 1.35 {
		t.Errorf("the rows give %.3f GiB a slot, the author's 1.25-1.3", slope)
	}
	w := func(slots int) int64 {
		in := memory.Input{Model: spec(t, "Qwen/Qwen3-30B-A3B"), Device: device(t, "H100-80GB")}
		in.Settings = settingsOf(t, "vllm serve Qwen/Qwen3-30B-A3B --max-model-len 8192 --enable-lora --max-lora-rank 16 --max-loras "+strconv.Itoa(slots))
		return plan(t, in).PerGPU.Weights
	}
	if a, b, c := w(2), w(3), w(5); b-a != (c-b)/2 || b-a <= 0 {
		t.Errorf("slots do not cost alike: 2→3 adds %d B, 3→5 %d B", b-a, c-b)
	}
}

// The 0.5B draft on one L4 (vLLM 0.27.1, rows 203–207). Every arm runs
// --max-model-len 4096 --gpu-memory-utilization 0.90 --max-num-seqs 128.
func TestDraftModelL4(t *testing.T) {
	rows := featureRows(t)
	const line = "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --gpu-memory-utilization 0.90 --max-num-seqs 128"
	target, draft := spec(t, "Qwen/Qwen2.5-7B-Instruct"), spec(t, "Qwen/Qwen2.5-0.5B-Instruct")
	arm := func(spec string) memory.Budget {
		in := memory.Input{Model: target, Device: device(t, "L4")}
		in.Settings = settingsOf(t, line+spec)
		in.Settings.Version = vllm.MustVersion("0.27.1")
		if strings.Contains(spec, "0.5B") {
			in.Draft = &draft
		}
		return plan(t, in)
	}
	ngram := arm(` --speculative-config '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}'`)
	k1 := arm(` --speculative-config '{"method":"draft_model","model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":1,"use_heterogeneous_vocab":true}'`)

	// A token of context: 28 target layers of 4 KV heads × (128 + 128) ×
	// 2 B = 57,344 B, and 24 draft layers of 2 heads × (64 + 64) × 2 B =
	// 12,288 B, in one group (full attention of two page sizes).
	if ngram.KVBytesPerToken != 57344 || k1.KVBytesPerToken != 57344+12288 {
		t.Errorf("KV a token: %d without a draft, %d with; want 57,344 and 69,632", ngram.KVBytesPerToken, k1.KVBytesPerToken)
	}
	if g := k1.KVGroups(); len(g) != 1 {
		t.Errorf("the draft's layers form %d KV groups, want one", len(g))
	}
	if k1.SpeculativeTokens() != 1 {
		t.Errorf("k = %d", k1.SpeculativeTokens())
	}
	f, n := k1.Features().Speculative, ngram.Features().Speculative
	if f == nil || f.Method != "draft_model" || f.KVLayers != 24 || f.WeightsBytes != k1.PerGPU.Weights-ngram.PerGPU.Weights || !f.ForcesV1Runner {
		t.Errorf("the draft's features: %+v", f)
	}
	if n == nil || n.Method != "ngram" || n.Tokens != 3 || n.WeightsBytes != 0 || n.KVLayers != 0 || n.Draft != "" {
		t.Errorf("n-gram's features: %+v", n)
	}

	// Weights: the draft's own (0.494B parameters, tied, bf16), logged as
	// 15.22 − 14.29 = 0.93 GiB (two decimals each).
	measuredW := rows["205"].number(t, "weights_GiB") - rows["203"].number(t, "weights_GiB")
	if d := gibOf(k1.PerGPU.Weights - ngram.PerGPU.Weights); math.Abs(d-measuredW) > 0.011 {
		t.Errorf("the draft adds %.3f GiB of weights; the logs %.2f", d, measuredW)
	}

	// Against the n-gram arm, which runs the same (V1) runner with the same
	// graphs, the draft's cost is its weights: the KV bytes of the two
	// logs differ by 55,344 × 57,344 − 30,848 × 69,632 = 1,025,638,400 B
	// (0.955 GiB) of the same budget.
	measured := rows["204"].number(t, "kv_tokens")*57344 - rows["205"].number(t, "kv_tokens")*69632
	if measured != 1025638400 {
		t.Fatalf("rows 204/205 give %.0f B", measured)
	}
	planned := float64(ngram.PerGPU.KVCache - k1.PerGPU.KVCache)
	if math.Abs(planned-measured) > 0.05*gib {
		t.Errorf("the draft takes %.3f GiB of KV against the n-gram arm; the logs %.3f GiB", planned/gib, measured/gib)
	}

	// Rows 206 and 207 (k = 3, 5) started after k = 1 with the same target
	// and draft: a warm torch.compile cache. The plan's point is a warm
	// start, and holds them within 1% (51,552 and 51,728 tokens logged);
	// k = 1 (30,848), like the n-gram arm and the baseline, is a first
	// start, and left the cold-start allowance's worth less
	// (memory.ColdStartErr; TestStartups028 names the 0.28 rows alike). That
	// the warm arms' pool equals the no-draft baseline's bytes is a
	// coincidence of sizes: the cold start cost about what the draft weighs.
	for _, c := range []struct{ id, k string }{{"206", "3"}, {"207", "5"}} {
		b := arm(` --speculative-config '{"method":"draft_model","model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":` + c.k + `,"use_heterogeneous_vocab":true}'`)
		logged := rows[c.id].number(t, "kv_tokens")
		if e := float64(b.KVTokens)/logged - 1; math.Abs(e) > 0.01 {
			t.Errorf("row %s (k = %s, warm): KV tokens %d, logged %.0f (%+.1f%%)", c.id, c.k, b.KVTokens, logged, e*100)
		}
	}
	cold := (float64(k1.PerGPU.KVCache) - rows["205"].number(t, "kv_tokens")*69632) / gib
	if cold < 0 || cold > memory.ColdStartErr+memory.KVResidualErr || float64(k1.KVTokensBand.Low) > rows["205"].number(t, "kv_tokens") {
		t.Errorf("row 205 (k = 1, a first start): %.2f GiB below the plan, band %+v", cold, k1.KVTokensBand)
	}
}

// The n-gram arm (row 204) loads no weights and adds no KV layers, yet
// logged 62,512 − 55,344 = 7,168 tokens (0.383 GiB) less than the
// baseline (row 203). The mechanism: n-gram drafting is not one Model
// Runner V2 runs (vllm.SpeculativeForcesRunnerV1), so the V1 runner runs
// the model, and at 0.27 its CUDA-graph estimate is inside the budget
// where Model Runner V2 reserved none; its graphs are captured up to
// min(2 × 128 × (1 + 3), 512) = 512 tokens instead of 256. How large that
// estimate is, is the overhead model's: the plan reserves more than the
// 0.383 GiB these logs show, and the difference is logged.
func TestNgramRunnerAndGraphs(t *testing.T) {
	rows := featureRows(t)
	in := memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "L4")}
	const line = "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --gpu-memory-utilization 0.90 --max-num-seqs 128"
	in.Settings = settingsOf(t, line)
	in.Settings.Version = vllm.MustVersion("0.27.1")
	base := plan(t, in)
	in.Settings = settingsOf(t, line+` --speculative-config '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}'`)
	in.Settings.Version = vllm.MustVersion("0.27.1")
	ngram := plan(t, in)
	if ngram.PerGPU.Weights != base.PerGPU.Weights || ngram.KVBytesPerToken != base.KVBytesPerToken {
		t.Errorf("n-gram moved weights (%d B) or KV a token (%d B)", ngram.PerGPU.Weights-base.PerGPU.Weights, ngram.KVBytesPerToken-base.KVBytesPerToken)
	}
	if ngram.Settings.MaxCudagraphCaptureSize != 512 || base.Settings.MaxCudagraphCaptureSize != 256 {
		t.Errorf("capture sizes %d with n-gram, %d without; want 512 and 256", ngram.Settings.MaxCudagraphCaptureSize, base.Settings.MaxCudagraphCaptureSize)
	}
	if ngram.ModelRunnerV2 {
		t.Error("n-gram drafting planned on Model Runner V2")
	}
	// What moves is the profile's peak and the graph reserve, nothing else.
	graphs := func(b memory.Budget) int64 {
		if b.CUDAGraphInBudget {
			return b.PerGPU.CUDAGraph
		}
		return 0
	}
	want := (ngram.PerGPU.Activation + graphs(ngram)) - (base.PerGPU.Activation + graphs(base))
	if d := base.PerGPU.KVCache - ngram.PerGPU.KVCache; d != want {
		t.Errorf("n-gram takes %d B of KV; the peak and the graph reserve moved %d B", d, want)
	}
	measured := (rows["203"].number(t, "kv_tokens") - rows["204"].number(t, "kv_tokens")) * 57344
	t.Logf("n-gram's KV loss: logged %.3f GiB, planned %.3f GiB", measured/gib, gibOf(base.PerGPU.KVCache-ngram.PerGPU.KVCache))
	if measured <= 0 || base.PerGPU.KVCache <= ngram.PerGPU.KVCache {
		t.Error("n-gram should cost KV in the logs and the plan alike")
	}
}

// DeepSeek-V3 with its MTP layer on 8 × H200: the layer is one more MoE
// decoder layer (FP8, 128 × 128 blocks with an fp32 scale each) and the
// eh_proj that fuses the embedding with the hidden state (2H × H, bf16,
// on every rank); the embedding and the LM head are the target's. Per rank
// at TP 8:
//
//	sharded   experts 256·3·7168·2048 + shared 3·7168·2048 + q_b 1536·128·192
//	          + kv_b 512·128·256 + o 128·128·7168 = 11,490,295,808 / 8
//	replicated q_a 7168·1536 + kv_a 7168·576 = 15,138,816
//	→ 1,451,425,792 parameters · (1 + 4/16384) B, router 256·7168 · 2 B,
//	  eh_proj 2·7168·7168 · 2 B = 205,520,896 B
//
// about 1.661e9 B, and its KV layer: 62 MLA layers of 576 elements × 2 B a
// token instead of 61.
func TestMTPDeepSeekV3(t *testing.T) {
	ds := spec(t, "deepseek-ai/DeepSeek-V3")
	if ds.MTPLayers != 1 {
		t.Fatalf("DeepSeek-V3 ships %d MTP layers, its config 1", ds.MTPLayers)
	}
	in := memory.Input{Model: ds, Device: device(t, "H200"), Count: 8}
	in.Settings = settingsOf(t, "vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --max-model-len 32768")
	off := plan(t, in)
	in.Settings = settingsOf(t, `vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --max-model-len 32768 --speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":1}'`)
	on := plan(t, in)
	const want = 1451425792*(1+4.0/16384) + 256*7168*2 + 205520896
	if d := float64(on.PerGPU.Weights - off.PerGPU.Weights); math.Abs(d-want) > 0.01*want {
		t.Errorf("the MTP layer adds %.0f B a rank, want %.0f ± 1%%", d, want)
	}
	if on.KVBytesPerToken != 62*576*2 || off.KVBytesPerToken != 61*576*2 {
		t.Errorf("KV a token %d with MTP, %d without; want %d and %d", on.KVBytesPerToken, off.KVBytesPerToken, 62*576*2, 61*576*2)
	}
	if f := on.Features().Speculative; f == nil || f.Method != "mtp" || f.Draft != "deepseek-ai/DeepSeek-V3" || f.KVLayers != 1 || f.ForcesV1Runner {
		t.Errorf("MTP's features: %+v", f)
	}
	if !on.Fits || on.KVTokens >= off.KVTokens {
		t.Errorf("MTP: fits %v, %d KV tokens against %d", on.Fits, on.KVTokens, off.KVTokens)
	}
	// A model without MTP layers cannot draft with mtp.
	in = memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "H100-80GB")}
	in.Settings = settingsOf(t, `vllm serve Qwen/Qwen2.5-7B-Instruct --speculative-config '{"method":"mtp"}'`)
	if b := plan(t, in); b.Fits || b.Problems[0].Code != memory.CodeNoMTPLayers {
		t.Errorf("MTP on a model without MTP layers: %+v", b.Problems)
	}
}

// A draft that cannot be read is named, never silently dropped; a draft
// TP other than 1 or the target's is refused as vLLM refuses it.
func TestDraftFindings(t *testing.T) {
	in := memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "H100-80GB"), Count: 4}
	in.Settings = settingsOf(t, `vllm serve Qwen/Qwen2.5-7B-Instruct -tp 4 --speculative-config '{"model":"org/unknown-draft","draft_tensor_parallel_size":2}'`)
	b := plan(t, in)
	codes := map[string]bool{}
	for _, f := range append(b.Problems, b.Warnings...) {
		codes[f.Code] = true
	}
	for _, c := range []string{memory.CodeDraftNotRead, memory.CodeDraftTP, memory.CodeSpecTokensAssumed} {
		if !codes[c] {
			t.Errorf("no %s among %v", c, codes)
		}
	}
	if b.Fits {
		t.Error("draft_tensor_parallel_size 2 under TP 4 fits")
	}
}

// --limit-mm-per-prompt on gemma-3-4b-it, which takes images only, on one
// L4 (vLLM's defaults there: 2,048 batched tokens, 256 sequences). With
// images allowed the profile runs the encoder on min(2048 / 256, 256 × 4)
// = 8 images of 4,096 patches, each patch holding 3 × 1,152 encoder-wide
// values and the MLP's 2 × 4,304: 8 · 4096 · 12,064 · 2 B = 790,626,304 B.
// With {"image": 0} (0.10.1+, #22299) no encoder runs, and what the
// profile's peak loses the KV cache gains.
func TestMultimodalLimits(t *testing.T) {
	g := spec(t, "google/gemma-3-4b-it")
	at := func(flags string) memory.Budget {
		in := memory.Input{Model: g, Device: device(t, "L4")}
		in.Settings = settingsOf(t, "vllm serve google/gemma-3-4b-it --max-model-len 8192"+flags)
		return plan(t, in)
	}
	zero, four := at(` --limit-mm-per-prompt '{"image":0}'`), at(` --limit-mm-per-prompt '{"image":4}'`)
	if four.PerGPU.Activation < 790626304 {
		t.Errorf("the encoder pass peaks at %d B, want at least 790,626,304", four.PerGPU.Activation)
	}
	if m := four.Features().Multimodal; m == nil || m.TextOnly || m.EncoderItems != 8 || m.EncoderPeakBytes != 790626304 {
		t.Errorf("features with images: %+v", m)
	}
	if m := zero.Features().Multimodal; m == nil || !m.TextOnly || m.EncoderPeakBytes != 0 {
		t.Errorf("features text-only: %+v", m)
	}
	if zero.KVTokens <= four.KVTokens {
		t.Errorf("{\"image\":0} keeps %d KV tokens, {\"image\":4} %d", zero.KVTokens, four.KVTokens)
	}
	if d, a := zero.PerGPU.KVCache-four.PerGPU.KVCache, four.PerGPU.Activation-zero.PerGPU.Activation; d != a || zero.PerGPU.Weights != four.PerGPU.Weights {
		t.Errorf("the KV cache gains %d B for %d B of activation (weights %d → %d)", d, a, four.PerGPU.Weights, zero.PerGPU.Weights)
	}

	// Rows 216/217: 2, 3, 10, 100 and 999 images all gave the same KV: the
	// encoder budget, not the limit, sizes the dummy batch. Qwen2.5-VL
	// (16,384 tokens an image at the processor's 12,845,056 pixels, over
	// 2,048 batched tokens) profiles one image whatever the limit.
	qv := spec(t, "Qwen/Qwen2.5-VL-7B-Instruct")
	plans := map[string]memory.Budget{}
	for _, limit := range []string{"", `{"image":2,"video":1}`, `{"image":3}`, `{"image":10}`, `{"image":999}`, `{"image":0}`, `{"image":0,"video":0}`} {
		in := memory.Input{Model: qv, Device: device(t, "L4")}
		line := "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 8192"
		if limit != "" {
			line += " --limit-mm-per-prompt '" + limit + "'"
		}
		in.Settings = settingsOf(t, line)
		plans[limit] = plan(t, in)
	}
	for limit, b := range plans {
		if limit != `{"image":0,"video":0}` && b.KVTokens != plans[""].KVTokens {
			t.Errorf("limit %s: %d KV tokens, the default's %d", limit, b.KVTokens, plans[""].KVTokens)
		}
	}
	// {"image": 0} alone leaves video on: still profiled. Both off: text.
	if plans[`{"image":0,"video":0}`].KVTokens <= plans[""].KVTokens {
		t.Error("text-only Qwen2.5-VL keeps no more KV")
	}
	// max_pixels shrinks the profiled image: 1,003,520 pixels = 5,120
	// patches = 1,280 tokens; the budget then holds 1 image still (2048 /
	// 1280), of 5,120 patches instead of 65,536.
	in := memory.Input{Model: qv, Device: device(t, "L4")}
	in.Settings = settingsOf(t, `vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 8192 --mm-processor-kwargs '{"max_pixels":1003520}'`)
	if small := plan(t, in); small.PerGPU.Activation >= plans[""].PerGPU.Activation {
		t.Errorf("max_pixels did not shrink the profile: %d against %d B", small.PerGPU.Activation, plans[""].PerGPU.Activation)
	}
}

// Before 0.10.1 all limits 0 still profiled one item (#22299): the plan
// says so and keeps the encoder's pass.
func TestMultimodalTextOnlyBoundary(t *testing.T) {
	at := func(version string) memory.Budget {
		in := memory.Input{Model: spec(t, "google/gemma-3-4b-it"), Device: device(t, "L4")}
		in.Settings = settingsOf(t, `vllm serve google/gemma-3-4b-it --max-model-len 8192 --limit-mm-per-prompt '{"image":0}'`)
		in.Settings.Version = vllm.MustVersion(version)
		return plan(t, in)
	}
	old, now := at("0.10.0"), at("0.10.1")
	if now.PerGPU.Activation >= old.PerGPU.Activation {
		t.Errorf("text-only at 0.10.1 peaks at %d B, 0.10.0 at %d B", now.PerGPU.Activation, old.PerGPU.Activation)
	}
	found := false
	for _, w := range old.Warnings {
		found = found || w.Code == memory.CodeTextOnlyTooOld
	}
	if !found {
		t.Errorf("0.10.0 does not say the text-only mode is newer: %v", old.Warnings)
	}
}

// --lora-dtype float32 holds the same slots in four bytes an element
// instead of bf16's two: twice the bytes.
func TestLoRADtype(t *testing.T) {
	at := func(flags string) int64 {
		in := memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "H100-80GB")}
		in.Settings = settingsOf(t, "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192"+flags)
		return plan(t, in).PerGPU.Weights
	}
	base := at("")
	bf16, fp32 := at(" --enable-lora --max-lora-rank 64")-base, at(" --enable-lora --max-lora-rank 64 --lora-dtype float32")-base
	if bf16 != 5767168*28*2 || fp32 != 2*bf16 {
		t.Errorf("one rank-64 slot: %d B in bf16, %d B in float32; want %d and twice it", bf16, fp32, 5767168*28*2)
	}
}
