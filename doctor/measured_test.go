package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// testdata/corpus/maxlen-l4.log is vLLM 0.19.0 refusing Llama-3.1-8B-Instruct
// at its full 131072 tokens on an L4 (default utilization 0.90): "Model
// loading took 14.99 GiB", "Available KV cache memory: 3.50 GiB", and the
// error's estimate 28672. The planner alone predicts a larger KV cache
// (4.12 GiB, 33,760 tokens): the engine's numbers must win.
//
//	L4: 22559 MiB = 23,654,825,984 B; at 0.90 requested = ceil(× 0.90) = 21,289,343,386 B
//	non-KV the engine kept = 21,289,343,386 − 3.50 GiB (3,758,096,384) = 17,531,247,002 B
//	one block = 16 tokens × 32 layers × 8 KV heads × (128 + 128) × 2 B = 2 MiB
//	3,758,096,384 / 2,097,152 = 1792 blocks × 16 = 28,672 tokens = vLLM's estimate
//	activation (not logged) = 17,531,247,002 − 14.99 GiB (16,095,389,942) − non-torch as planned
func TestMeasuredOutranksPlan(t *testing.T) {
	sel, err := gpu.Resolve("L4")
	if err != nil {
		t.Fatal(err)
	}
	d := Diagnose(readCorpus(t, "maxlen-l4.log"), Options{ResolveModel: catalogModel, GPU: sel, HasGPU: true})
	f, ok := finding(d, CodeMaxModelLen)
	if !ok || len(f.Remedies) == 0 || !slicesEqual(f.Remedies[0].Args, "--max-model-len", "28672") {
		t.Fatalf("first max-model-len remedy %v, want --max-model-len 28672", remedyArgs(f))
	}
	p := d.Memory.Plan
	if p == nil {
		t.Fatal("no plan")
	}
	if p.KVCacheBytes != 3758096384 || p.KVTokens != 28672 || p.MaxFitLen != 28672 {
		t.Errorf("plan KV %d B, %d tokens, fit %d; want 3758096384, 28672, 28672", p.KVCacheBytes, p.KVTokens, p.MaxFitLen)
	}
	if got := p.ActivationBytes + p.NonTorchBytes; got != 17531247002-16095389942 {
		t.Errorf("activation + non-torch %d, want %d", got, 17531247002-16095389942)
	}
	want := memory.Origins{Weights: SourceLog, Activation: SourceDerived, NonTorch: SourcePlan, CUDAGraph: SourcePlan,
		KVCache: SourceLog, KVTokens: SourceDerived, MaxFitLen: SourceDerived}
	if p.Sources != want {
		t.Errorf("sources %+v, want %+v", p.Sources, want)
	}
	if d.Memory.StartupKVTokens != 28672 || d.Memory.StartupKVTokensFrom != SourceDerived {
		t.Errorf("start-up KV tokens %d from %q, want 28672 derived", d.Memory.StartupKVTokens, d.Memory.StartupKVTokensFrom)
	}

	// The suggested command lowers the utilization to 0.89 (the
	// utilization_edge finding) and so must shorten the context further:
	//	requested = ceil(23,654,825,984 × 0.89) = 21,052,795,126 B
	//	KV = 21,052,795,126 − 17,531,247,002 = 3,521,548,124 B = 1679 blocks = 26,864 tokens
	words, err := vllm.SplitCommandLine(d.Command)
	if err != nil {
		t.Fatal(err)
	}
	set, err := vllm.ParseCommand(words)
	if err != nil {
		t.Fatalf("suggested command %q: %v", d.Command, err)
	}
	if set.GPUMemoryUtilization != 0.89 || set.MaxModelLen != 26864 {
		t.Errorf("suggested command %q: want --gpu-memory-utilization 0.89 --max-model-len 26864", d.Command)
	}
	if r := d.Memory.Recommended; r == nil || r.MaxModelLen != 26864 {
		t.Errorf("recommended %+v, want max-model-len 26864", r)
	}
	if !strings.Contains(strings.Join(f.Reasons, " "), "3.50 GiB available") {
		t.Errorf("reasons %q should cite the measured 3.50 GiB", f.Reasons)
	}
}

func slicesEqual(got []string, want ...string) bool {
	return strings.Join(got, " ") == strings.Join(want, " ")
}

// vllm/testdata/logs/v0.19.0-llama-3.1-8b-h100.log carries the figures of a
// real launch (calibration row Llama-3.1-8B-Instruct, H100, util 0.95):
// "Available KV cache memory: 58.11 GiB" and "GPU KV cache size: 476,016
// tokens". 58.11 GiB = 62,395,137,392 B would be 29,752 blocks of 2 MiB
// (62,395,137,392 / 2,097,152 = 29,752.3); the logged tokens say 476,016 /
// 16 = 29,751, and the plan keeps the engine's count.
func TestMeasuredTokensFromRealLog(t *testing.T) {
	ev, err := NewEvidence(traffic.Options{Window: traffic.DefaultWindow})
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join("..", "vllm", "testdata", "logs", "v0.19.0-llama-3.1-8b-h100.log")
	fh, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := ev.Read(context.Background(), name, fh); err != nil {
		t.Fatal(err)
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	d := Diagnose(ev, Options{ResolveModel: catalogModel, GPU: sel, HasGPU: true})
	p := d.Memory.Plan
	if p == nil || p.KVTokens != 476016 || p.Sources.KVTokens != SourceLog || p.Sources.KVCache != SourceLog ||
		p.KVCacheBytes < 29751*2097152 || p.KVCacheBytes >= 29752*2097152 {
		t.Errorf("plan %+v, want 476,016 tokens in 29,751 blocks, both from the log", p)
	}
}
