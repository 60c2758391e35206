package host

import (
	"encoding/csv"
	"os"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// budget plans a `vllm serve` command on count × device; " @0.26.0" at
// its end names the release.
func budget(t *testing.T, s model.Spec, device string, count int, command string) (memory.Input, memory.Budget) {
	t.Helper()
	command, release, _ := strings.Cut(command, " @")
	set, err := vllm.ParseCommand(strings.Fields(command))
	if err != nil {
		t.Fatal(err)
	}
	if release != "" {
		if set.Version, err = vllm.ParseRelease(release); err != nil {
			t.Fatal(err)
		}
	}
	sel, err := gpu.Resolve(device)
	if err != nil {
		t.Fatal(err)
	}
	in := memory.Input{Model: s, Device: sel.Device, Count: count, Settings: set, Env: set.Env}
	b, err := memory.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	return in, b
}

func lookup(t *testing.T, id string) model.Spec {
	t.Helper()
	s, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("%s not in the catalog", id)
	}
	return s
}

func build(t *testing.T, s model.Spec, device string, count int, command string) Plan {
	t.Helper()
	_, b := budget(t, s, device, count, command)
	p, err := Build(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func term(t *testing.T, p Plan, name string) Term {
	t.Helper()
	for _, x := range p.Terms {
		if x.Term == name {
			return x
		}
	}
	t.Fatalf("no %s term in %+v", name, p.Terms)
	return Term{}
}

func hasTerm(p Plan, name string) bool {
	for _, x := range p.Terms {
		if x.Term == name {
			return true
		}
	}
	return false
}

// report returns a row of testdata/host-reports.csv by id.
func report(t *testing.T, id string) map[string]string {
	t.Helper()
	f, err := os.Open("testdata/host-reports.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:] {
		if r[0] == id {
			m := map[string]string{}
			for i, h := range rows[0] {
				m[h] = r[i]
			}
			return m
		}
	}
	t.Fatalf("row %s not in host-reports.csv", id)
	return nil
}

// The pinned allocator's rounding, on #50094's probe (row 259): 6, 10
// and 12 GiB pinned took 8, 16 and 16 GiB.
func TestNextPow2OnThePinnedProbe(t *testing.T) {
	if r := report(t, "259"); !strings.Contains(r["host_rss_GiB"], "6->8.00, 10->16.00, 12->16.00") {
		t.Fatalf("row 259 reads %q", r["host_rss_GiB"])
	}
	for _, c := range []struct{ in, want int64 }{{6 * gib, 8 * gib}, {10 * gib, 16 * gib}, {12 * gib, 16 * gib}, {8 * gib, 8 * gib}, {1, 1}, {3, 4}} {
		if got := nextPow2(c.in); got != c.want {
			t.Errorf("nextPow2(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// --cpu-offload-gb on an 8B in bf16 (#56410, row 253: 1.15×). Llama-3.1-8B
// per layer: QKV 6144 × 4096 × 2 B = 48 MiB (held in 64), O 32 MiB,
// gate-up 2 × 14336 × 4096 × 2 B = 224 MiB (256), down 112 MiB (128),
// norms 2 × 4096 × 2 B = 16 KiB: 416 MiB + 16 KiB exact, 480 MiB + 16 KiB
// held. 4 GiB moves nine layers and the tenth's four projections (the
// check is before each tensor: 4160 MiB ≥ 4096 stops before the norms).
func TestCPUOffloadDenseBF16(t *testing.T) {
	p := build(t, lookup(t, "meta-llama/Llama-3.1-8B-Instruct"), "L4", 1, "vllm serve meta-llama/Llama-3.1-8B-Instruct --cpu-offload-gb 4 --max-model-len 8192")
	got := term(t, p, TermOffloadedWeights)
	const layerExact, layerHeld = 416<<20 + 16<<10, 480<<20 + 16<<10
	wantHeld := int64(9*layerHeld + 480<<20)
	wantExact := int64(9*layerExact + 416<<20)
	if got.Bytes != wantHeld || got.Kind != KindPinned || got.Basis != BasisMechanism {
		t.Fatalf("offloaded weights %d B (%s, %s), want %d", got.Bytes, got.Kind, got.Basis, wantHeld)
	}
	if r := float64(wantHeld) / float64(wantExact); r < 1.15 || r > 1.16 {
		t.Fatalf("ratio %.3f, #56410 measured 1.15", r)
	}
	if !strings.Contains(report(t, "253")["host_rss_GiB"], "an 8B fp16 1.15") {
		t.Fatal("row 253 no longer says 1.15 for the 8B")
	}
}

// Llama 3.3 70B AWQ (#56410: 1.18×): the architecture of Llama-3.1-70B,
// 4-bit weights in groups of 128 with fp16 scales and 4-bit zero points,
// three tensors a projection. Per layer (MiB, held in brackets): QKV
// 83,886,080 weights → 40 (64) + scales 1.25 (2) + zeros 0.3125 (0.5);
// O 67,108,864 → 32 (32) + 1 (1) + 0.25 (0.25); gate-up 469,762,048 →
// 224 (256) + 7 (8) + 1.75 (2); down 234,881,024 → 112 (128) + 3.5 (4) +
// 0.875 (1); norms 32 KiB: 423.9375 MiB exact, 498.75 MiB held, 1.176×.
func TestCPUOffloadAWQ(t *testing.T) {
	s := lookup(t, "meta-llama/Llama-3.1-70B-Instruct")
	s.Quant = &model.Quantization{Method: "awq", Bits: 4, GroupSize: 128}
	s.CheckpointBytes = 0
	p := build(t, s, "H100-80GB", 1, "vllm serve x --cpu-offload-gb 10 --max-model-len 4096")
	got := term(t, p, TermOffloadedWeights)
	const layerExact = 423.9375*(1<<20) + 32<<10
	const layerHeld = 498.75*(1<<20) + 32<<10
	// 10 GiB = 10,240 MiB: 24 layers are 10,175.25 MiB; the 25th's QKV
	// (three tensors, 10,216.8125) and O's packed weights (10,248.8125)
	// pass it.
	exact := 24*layerExact + (40+1.25+0.3125+32)*(1<<20)
	held := 24*layerHeld + (64+2+0.5+32)*(1<<20)
	if got.Bytes != int64(held) {
		t.Fatalf("held %d B, want %d", got.Bytes, int64(held))
	}
	if r := layerHeld / layerExact; r < 1.17 || r > 1.19 {
		t.Fatalf("per-layer ratio %.3f, #56410 measured 1.18", r)
	}
	if !strings.Contains(got.Detail, "(1.18×)") {
		t.Errorf("detail %q: %.4f of its parameters", got.Detail, held/exact)
	}
}

// VLLM_WEIGHT_OFFLOADING_DISABLE_PIN_MEMORY: plain copies, exact sizes.
func TestCPUOffloadUnpinned(t *testing.T) {
	p := build(t, lookup(t, "meta-llama/Llama-3.1-8B-Instruct"), "L4", 1, "VLLM_WEIGHT_OFFLOADING_DISABLE_PIN_MEMORY=1 vllm serve meta-llama/Llama-3.1-8B-Instruct --cpu-offload-gb 4 --max-model-len 8192")
	got := term(t, p, TermOffloadedWeights)
	if want := int64(9*(416<<20+16<<10) + 416<<20); got.Bytes != want || got.Kind != KindAnon {
		t.Fatalf("unpinned offload %d B %s, want %d anon", got.Bytes, got.Kind, want)
	}
}

// KV offloading before the /dev/shm region (#48436, rows 256–257): at
// TP 2, 64 GiB is 32 GiB a rank over 32 layers, 1 GiB a tensor, held
// exactly; 80 GiB is 40 a rank, 1.25 GiB a tensor held in 2, so 64 GiB a
// worker ("~67 GB per worker (64 + 3)"). The issue names no model: any
// whose KV tensors number a power of two rounds the same; Llama-3.1-8B
// has 32.
func TestKVOffloadPinned(t *testing.T) {
	s := lookup(t, "meta-llama/Llama-3.1-8B-Instruct")
	for _, c := range []struct {
		size, perWorker int64
		row, says       string
	}{{64, 32, "256", "~35 GB per worker (32 + 3)"}, {80, 64, "257", "~67 GB per worker (64 + 3)"}} {
		if r := report(t, c.row); r["host_rss_GiB"] != c.says {
			t.Fatalf("row %s reads %q", c.row, r["host_rss_GiB"])
		}
		p := build(t, s, "A100-80GB", 2, "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --max-model-len 8192 --kv-offloading-size "+strconv.FormatInt(c.size, 10)+" @0.26.0")
		kv := term(t, p, TermOffloadedKV)
		if kv.Bytes != 2*c.perWorker*gib || kv.Kind != KindPinned || kv.Shm {
			t.Errorf("--kv-offloading-size %d: %d B (%s), want %d GiB pinned", c.size, kv.Bytes, kv.Kind, 2*c.perWorker)
		}
		if w := term(t, p, TermWorkerProcesses); w.Bytes != 2*3*gib {
			t.Errorf("workers %d B, want 2 × 3 GiB (the reports' + 3)", w.Bytes)
		}
	}
}

// After #50094 (row 258: "~43 GB per worker (40 + 3)" for 80 GiB at TP 2)
// the region is exactly the size, and lives in /dev/shm.
func TestKVOffloadSharedRegion(t *testing.T) {
	if r := report(t, "258"); r["host_rss_GiB"] != "~43 GB per worker (40 + 3)" {
		t.Fatalf("row 258 reads %q", r["host_rss_GiB"])
	}
	p := build(t, lookup(t, "meta-llama/Llama-3.1-8B-Instruct"), "A100-80GB", 2, "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --max-model-len 8192 --kv-offloading-size 80 @0.27.0")
	kv := term(t, p, TermOffloadedKV)
	if kv.Bytes != 80*gib || kv.Kind != KindShared || !kv.Shm {
		t.Fatalf("shared region %d B %s shm=%v, want 80 GiB in /dev/shm", kv.Bytes, kv.Kind, kv.Shm)
	}
	if !p.ShmNeeded || p.ShmBytes < 80*gib {
		t.Fatalf("/dev/shm %d B, needed %v: the region lives there", p.ShmBytes, p.ShmNeeded)
	}
}

// The long form: an OffloadingConnector's cpu_bytes_to_use, inside a
// MultiConnector too; #51080's 600e9 bytes pass cudaHostRegister's bound.
func TestKVTransferConfigOffload(t *testing.T) {
	s := lookup(t, "meta-llama/Llama-3.1-8B-Instruct")
	cfg := `{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector"},{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"block_size":256,"cpu_bytes_to_use":600000000000}}]}}`
	set, err := vllm.ParseFlags([]string{"meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--kv-transfer-config", cfg})
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := gpu.Resolve("H200")
	in := memory.Input{Model: s, Device: sel.Device, Settings: set}
	b, err := memory.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(b, Options{Env: in.Env})
	if err != nil {
		t.Fatal(err)
	}
	if kv := term(t, p, TermOffloadedKV); kv.Bytes != 600000000000 {
		t.Fatalf("offloaded KV %d B, want 600e9", kv.Bytes)
	}
	if len(p.Warnings) != 1 || p.Warnings[0].Code != CodeHostRegisterLimit {
		t.Fatalf("warnings %+v, want the 512 GiB cudaHostRegister bound (549.7e9 registered, 549.9e9 failed)", p.Warnings)
	}
	if r := report(t, "260"); !strings.Contains(r["error"], "549.7e9 ok, 549.9e9 fails") {
		t.Fatalf("row 260 reads %q", r["error"])
	}
}

// The rings of one TP 4 engine (vllm-features §4.4): 160 + 4 × 100 + 24 =
// 584 MiB, and NCCL's 12 ordered pairs × 9,637,888 B; at TP 1 none.
func TestShmRings(t *testing.T) {
	s := lookup(t, "meta-llama/Llama-3.1-70B-Instruct")
	p := build(t, s, "H100-80GB", 4, "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192")
	if r := term(t, p, TermShmRings); r.Bytes != 584*mib {
		t.Fatalf("rings %d MiB, want 584", r.Bytes/mib)
	}
	if n := term(t, p, TermNCCLShm); n.Bytes != 12*9637888 || n.Basis != BasisReport {
		t.Fatalf("NCCL %d B (%s), want 12 × 9,637,888 from a report", n.Bytes, n.Basis)
	}
	if want := int64(584*mib + 12*9637888); p.ShmBytes != want || !p.ShmNeeded || p.ShmSizeLimit != "1Gi" {
		t.Fatalf("/dev/shm %d B needed=%v sizeLimit %q, want %d, true, 1Gi", p.ShmBytes, p.ShmNeeded, p.ShmSizeLimit, want)
	}
	one := build(t, lookup(t, "meta-llama/Llama-3.1-8B-Instruct"), "H100-80GB", 1, "vllm serve meta-llama/Llama-3.1-8B-Instruct")
	if hasTerm(one, TermShmRings) || one.ShmNeeded {
		t.Fatalf("a one-GPU server has no rings: %+v", one.Terms)
	}
}

// production-stack #276 (row 262): TP 2 in a pod whose /dev/shm was 64M.
// Its rings alone are 160 + 2 × 100 + 24 MiB, past the default.
func TestShmTP2PastTheDefault(t *testing.T) {
	r := report(t, "262")
	if !strings.Contains(r["host_rss_GiB"], "/dev/shm in pod 64M") || !strings.Contains(r["error"], "size 9637888") {
		t.Fatalf("row 262 reads %q / %q", r["host_rss_GiB"], r["error"])
	}
	// The report's model (opt-125m) is not in the catalog; the rings do
	// not depend on the model.
	p := build(t, lookup(t, "Qwen/Qwen2.5-7B-Instruct"), "L4", 2, "vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 --max-model-len 200")
	if want := int64(384*mib + 2*9637888); p.ShmBytes != want || !p.ShmNeeded {
		t.Fatalf("/dev/shm %d B, want %d, more than %d", p.ShmBytes, want, DefaultShmBytes)
	}
}

// The request buffers: 5 B per slot and token per worker; 1024 × 131,072
// is 640 MiB (vllm-features §4.5).
func TestRequestBuffers(t *testing.T) {
	p := build(t, lookup(t, "meta-llama/Llama-3.1-8B-Instruct"), "H100-80GB", 1, "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 1024 --max-model-len 131072")
	if r := term(t, p, TermRequestBuffers); r.Bytes != 640*mib {
		t.Fatalf("request buffers %d MiB, want 640", r.Bytes/mib)
	}
}

// Loading: mmapped safetensors pass through the page cache, which the
// limit need not hold; eager reads a shard a worker into process memory.
func TestWeightLoading(t *testing.T) {
	s := lookup(t, "meta-llama/Llama-3.1-8B-Instruct")
	lazy := build(t, s, "H100-80GB", 1, "vllm serve meta-llama/Llama-3.1-8B-Instruct")
	w := term(t, lazy, TermWeightLoading)
	if !w.Reclaimable || w.Kind != KindPageCache || w.Bytes != s.CheckpointBytes || lazy.PageCacheBytes != s.CheckpointBytes {
		t.Fatalf("lazy loading %+v, want the checkpoint's %d B of page cache", w, s.CheckpointBytes)
	}
	if lazy.LoadingBytes >= lazy.ServingBytes+w.Bytes {
		t.Fatalf("page cache counted in the limit: loading %d", lazy.LoadingBytes)
	}
	eager := build(t, s, "H100-80GB", 2, "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --safetensors-load-strategy eager")
	if e := term(t, eager, TermWeightLoading); e.Bytes != 2*5_000_000_000 || e.Reclaimable || e.Basis != BasisAssumption {
		t.Fatalf("eager %+v, want 2 workers × one 5 GB shard, unreclaimable, an assumption", e)
	}
	fast := build(t, s, "H100-80GB", 1, "vllm serve meta-llama/Llama-3.1-8B-Instruct --load-format fastsafetensors")
	if hasTerm(fast, TermWeightLoading) {
		t.Fatal("fastsafetensors stages nothing in host memory")
	}
}

// The pod of the end-to-end example: Llama-3.1-70B on 4 × L40S, TP 4,
// --kv-offloading-size 64 on the newest release. Required: 1 API server
// + 1 engine core × 1 GiB, 4 workers × 3 GiB, request buffers 4 × 5 B ×
// 256 × 32,768, the 64 GiB region, 584 MiB of rings and NCCL's 12
// segments; the limit is the upper end (2 + 4 × 8.75 GiB of processes)
// rounded up to a GiB.
func TestDoneWhenPod(t *testing.T) {
	p := build(t, lookup(t, "meta-llama/Llama-3.1-70B-Instruct"), "L40S", 4, "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 32768 --kv-offloading-size 64")
	seqs := int64(term(t, p, TermRequestBuffers).Bytes / (4 * 5 * 32768))
	if seqs != 256 {
		t.Fatalf("max-num-seqs %d; the arithmetic below takes 256", seqs)
	}
	buffers := int64(4 * 5 * 256 * 32768)
	shm := int64(584*mib + 12*9637888)
	want := 2*gib + 4*3*gib + buffers + 64*gib + shm
	if p.RequiredBytes != want {
		t.Fatalf("required %d B, want %d", p.RequiredBytes, want)
	}
	high := 2*2*gib + 4*35*gib/4 + buffers + 64*gib + shm
	if p.RequiredHighBytes != high || p.MemoryLimitBytes != roundUp(high, gib) || p.MemoryLimit != "104Gi" {
		t.Fatalf("high %d, limit %d %q, want %d and 104Gi", p.RequiredHighBytes, p.MemoryLimitBytes, p.MemoryLimit, high)
	}
	if p.ShmBytes != 64*gib+shm || p.ShmSizeLimit != "65Gi" {
		t.Fatalf("/dev/shm %d B %q, want 64 GiB + rings, 65Gi", p.ShmBytes, p.ShmSizeLimit)
	}
	if p.Processes != (Processes{APIServers: 1, EngineCores: 1, Workers: 4}) {
		t.Fatalf("processes %+v", p.Processes)
	}
}

// Every term names how it is known and where from.
func TestEveryTermHasABasis(t *testing.T) {
	p := build(t, lookup(t, "meta-llama/Llama-3.1-70B-Instruct"), "H100-80GB", 4, "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --cpu-offload-gb 2 --kv-offloading-size 64 @0.26.0")
	for _, x := range p.Terms {
		switch x.Basis {
		case BasisMechanism, BasisReport, BasisAssumption:
		default:
			t.Errorf("%s: basis %q", x.Term, x.Basis)
		}
		if x.Source == "" || x.Detail == "" || x.Bytes <= 0 || x.HighBytes < x.Bytes {
			t.Errorf("%s: %+v", x.Term, x)
		}
	}
}

func TestQuantity(t *testing.T) {
	for _, c := range []struct {
		b    int64
		want string
	}{{104 * gib, "104Gi"}, {1536 * mib, "1536Mi"}, {1000, "1000"}} {
		if got := Quantity(c.b); got != c.want {
			t.Errorf("Quantity(%d) = %q, want %q", c.b, got, c.want)
		}
	}
}

// The Run:ai streamer's buffer: memory_limit when given, else a worker's
// whole share (an assumption, warned about).
func TestStreamerBuffer(t *testing.T) {
	s := lookup(t, "meta-llama/Llama-3.1-8B-Instruct")
	limited := build(t, s, "H100-80GB", 2, `vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --load-format runai_streamer --model-loader-extra-config {"memory_limit":2147483648}`)
	if w := term(t, limited, TermWeightLoading); w.Bytes != 2*2*gib || w.Basis != BasisMechanism {
		t.Fatalf("memory_limit 2 GiB on 2 workers: %+v", w)
	}
	open := build(t, s, "H100-80GB", 1, "vllm serve meta-llama/Llama-3.1-8B-Instruct --load-format runai_streamer")
	if w := term(t, open, TermWeightLoading); w.Basis != BasisAssumption || len(open.Warnings) != 1 || open.Warnings[0].Code != CodeNotModelled {
		t.Fatalf("no memory_limit: %+v, warnings %+v", w, open.Warnings)
	}
}

// LoRA adapters in host memory: Qwen2.5-7B-Instruct at max_lora_rank 64
// in bf16 is 322,961,408 B an adapter (vllm-features §1.4); each of 2
// workers keeps --max-cpu-loras 4 of them.
func TestLoRAAdapters(t *testing.T) {
	p := build(t, lookup(t, "Qwen/Qwen2.5-7B-Instruct"), "L4", 2, "vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 --max-model-len 4096 --enable-lora --max-loras 2 --max-lora-rank 64 --max-cpu-loras 4")
	if l := term(t, p, TermLoRAAdapters); l.Bytes != 2*4*322961408 || l.Kind != KindPinned {
		t.Fatalf("LoRA adapters %+v, want 2 × 4 × 322,961,408 B pinned", l)
	}
}
