package doctor

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/vllm"
)

// The preemption corpus is a vLLM 0.6.3 log of Llama-3.1-8B (its last
// warning reads total_num_cumulative_preemption=51; "# GPU blocks: 27215"),
// the server's /metrics (vllm:num_preemptions_total 51) and its request
// log. Its KV cache, 27,215 blocks of 16 tokens = 435,440 tokens at 128
// KiB a token (2 × 8 KV heads × 128 × 32 layers × 2 bytes) = 53.15 GiB,
// cannot be an L40S's (44.39 GiB in all): the log comes from an 80 GB card.
func TestDoctorTrustsTheLog(t *testing.T) {
	diag := func(opt Options, names ...string) Diagnosis {
		opt.ResolveModel = catalogModel
		return Diagnose(readCorpus(t, names...), opt)
	}
	h100, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	d := diag(Options{GPU: h100, HasGPU: true}, "preemption")
	if len(d.Disagreements) != 0 {
		t.Errorf("on an H100 the inputs agree; disagreements %+v", d.Disagreements)
	}
	f, ok := finding(d, CodeKVCachePressure)
	if !ok {
		t.Fatalf("no %s: %v", CodeKVCachePressure, codes(d))
	}
	// The cause says what the dead end beside it says: the KV cache is
	// allocated once, at start-up, and the traffic fills it (it does not
	// "outgrow" a cache that would grow).
	if !strings.Contains(f.Title, "allocated at start-up") || !slices.Contains(deadEndCodes(d), DeadMoreGPUs) {
		t.Errorf("title %q, dead ends %v", f.Title, deadEndCodes(d))
	}
	// Counts: the log's own total, 51, not the 2 warnings it kept.
	if !slices.Contains(f.Reasons, "vLLM preempted requests 51 times for lack of KV cache space") {
		t.Errorf("reasons %q, want the log's 51 preemptions", f.Reasons)
	}
	if p := d.Memory.Preemptions; p == nil || *p != 51 {
		t.Errorf("preemptions %v, want 51", p)
	}
	// Capacities: the logged blocks are the KV tokens, 27,215 × 16.
	if d.Memory.StartupKVTokens != 435440 || d.Memory.StartupKVTokensFrom != SourceLog {
		t.Errorf("start-up KV tokens %d from %q, want 435440 from the log", d.Memory.StartupKVTokens, d.Memory.StartupKVTokensFrom)
	}
	// The reason about max-num-seqs cites the line that sets it
	// (vllm.log:2, the args Namespace with max_num_seqs=256).
	cited := false
	for _, l := range f.Evidence {
		cited = cited || (l.Source == "testdata/corpus/preemption/vllm.log" && l.Line == 2)
	}
	if !cited {
		t.Errorf("evidence %v, want vllm.log:2 where max_num_seqs=256 is set", f.Evidence)
	}
	// One max-num-seqs in the report: the remedies for this deployment,
	// the suggested command and the recommendation.
	seqs := map[string]bool{}
	re := regexp.MustCompile(`--max-num-seqs[ =](\d+)`)
	for _, f := range d.Findings {
		for _, r := range f.Remedies {
			if r.Action != ActionSetFlag {
				continue // a split into pools is two other deployments
			}
			for _, m := range re.FindAllStringSubmatch(strings.Join(r.Args, " "), -1) {
				seqs[m[1]] = true
			}
		}
	}
	for _, m := range re.FindAllStringSubmatch(d.Command, -1) {
		seqs[m[1]] = true
	}
	if r := d.Memory.Recommended; r != nil {
		seqs[strconv.Itoa(r.MaxNumSeqs)] = true
	}
	if len(seqs) != 1 {
		t.Errorf("max-num-seqs values %v in one report, want one; command %q", seqs, d.Command)
	}

	// --gpu L40S: the log's KV cache does not fit that card; doctor says
	// so and plans without the log's figures.
	l40s, err := gpu.Resolve("L40S")
	if err != nil {
		t.Fatal(err)
	}
	d = diag(Options{GPU: l40s, HasGPU: true}, "preemption")
	if len(d.Disagreements) != 1 || d.Disagreements[0].Code != DisagreeKVCache || !strings.Contains(d.Disagreements[0].Message, "435,440 tokens (53.15 GiB") {
		t.Errorf("disagreements %+v, want the log's KV cache too big for an L40S", d.Disagreements)
	}
	if d.Memory.Plan == nil || d.Memory.Plan.Sources.KVCache != SourcePlan {
		t.Errorf("plan %+v: want the planner's own KV cache once the log is set aside", d.Memory.Plan)
	}
	// nvidia-smi shows A100-SXM4-80GB cards: --gpu L40S disagrees with it,
	// and without --gpu the screen names the GPU and nothing disagrees.
	d = diag(Options{GPU: l40s, HasGPU: true}, "idle-gpus")
	if len(d.Disagreements) == 0 || d.Disagreements[0].Code != DisagreeGPU || !strings.Contains(d.Disagreements[0].Message, "A100-SXM4-80GB") {
		t.Errorf("idle-gpus with --gpu L40S: disagreements %+v", d.Disagreements)
	}
	if d = diag(Options{}, "idle-gpus"); len(d.Disagreements) != 0 {
		t.Errorf("idle-gpus: disagreements %+v, want none", d.Disagreements)
	}
	// Another model on the command line than the log and /metrics name.
	set, err := vllm.ParseCommand([]string{"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"})
	if err != nil {
		t.Fatal(err)
	}
	d = diag(Options{Settings: set, HasSettings: true}, "preemption")
	found := false
	for _, x := range d.Disagreements {
		found = found || (x.Code == DisagreeModel && strings.Contains(x.Message, "Qwen/Qwen2.5-7B-Instruct") && strings.Contains(x.Message, "meta-llama/Llama-3.1-8B-Instruct"))
	}
	if !found {
		t.Errorf("disagreements %+v, want the two models named", d.Disagreements)
	}
}

// A model whose weights leave no KV cache: no remedy may size
// max-num-seqs against it ("0.42 GiB fits in 0.00 GiB").
func TestNoSeqsRemedyWithoutCache(t *testing.T) {
	l4, err := gpu.Resolve("L4")
	if err != nil {
		t.Fatal(err)
	}
	set, err := vllm.ParseCommand([]string{"vllm", "serve", "Qwen/Qwen2.5-14B-Instruct", "--max-model-len", "8192"})
	if err != nil {
		t.Fatal(err)
	}
	d := Diagnose(readCorpus(t, "preemption/requests.log"), Options{ResolveModel: catalogModel, GPU: l4, HasGPU: true, Settings: set, HasSettings: true})
	for _, f := range d.Findings {
		for _, r := range f.Remedies {
			if strings.Contains(r.Why, "fits in 0.00 GiB") || (len(r.Args) > 1 && r.Args[len(r.Args)-2] == "--max-num-seqs" && strings.Contains(r.Why, " 0.00 GiB")) {
				t.Errorf("%s: remedy %v: %s", f.Code, r.Args, r.Why)
			}
		}
	}
}

// No report both advises a change and calls it a dead end: where adding
// GPUs without lowering max-num-seqs or max-model-len is a dead end, no
// remedy adds shards alone; where raising the utilization is one, no
// remedy raises it.
func TestNoDeadEndContradictsARemedy(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		d := Diagnose(readCorpus(t, e.Name()), Options{ResolveModel: catalogModel})
		dead := deadEndCodes(d)
		for _, f := range d.Findings {
			for _, r := range f.Remedies {
				args := strings.Join(r.Args, " ")
				if slices.Contains(dead, DeadMoreGPUs) && strings.Contains(args, "--tensor-parallel-size") &&
					!strings.Contains(args, "--max-num-seqs") && !strings.Contains(args, "--max-model-len") && r.Action == ActionSetFlag {
					t.Errorf("%s: %s remedy %q, and a dead end says adding GPUs alone will not help", e.Name(), f.Code, args)
				}
				if slices.Contains(dead, DeadRaiseUtilRetry) && len(r.Args) == 2 && r.Args[0] == "--gpu-memory-utilization" {
					if u, err := strconv.ParseFloat(r.Args[1], 64); err == nil && d.Memory.Plan != nil && u > d.Memory.Plan.Utilization {
						t.Errorf("%s: %s remedy raises the utilization to %s, and a dead end says raising it will not help", e.Name(), f.Code, r.Args[1])
					}
				}
			}
		}
	}
}
