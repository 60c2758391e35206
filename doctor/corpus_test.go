package doctor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/traffic"
)

// catalogModel resolves models from the embedded catalog only: tests
// never reach the Hugging Face Hub.
func catalogModel(ref string) (model.Spec, error) {
	return model.Resolve(context.Background(), ref, model.ResolveOptions{Catalog: catalog.Lookup})
}

// readCorpus reads files or directories of testdata/corpus.
func readCorpus(t *testing.T, names ...string) *Evidence {
	t.Helper()
	ev, err := NewEvidence(traffic.Options{Window: traffic.DefaultWindow})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := filepath.Join("testdata", "corpus", n)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		files := []string{p}
		if st.IsDir() {
			ents, err := os.ReadDir(p)
			if err != nil {
				t.Fatal(err)
			}
			files = files[:0]
			for _, e := range ents {
				files = append(files, filepath.Join(p, e.Name()))
			}
			sort.Strings(files)
		}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			err = ev.Read(context.Background(), f, fh)
			fh.Close()
			if err != nil {
				t.Fatalf("reading %s: %v", f, err)
			}
		}
	}
	return ev
}

func codes(d Diagnosis) []string {
	var out []string
	for _, f := range d.Findings {
		out = append(out, f.Code)
	}
	return out
}

func finding(d Diagnosis, code string) (Finding, bool) {
	for _, f := range d.Findings {
		if f.Code == code {
			return f, true
		}
	}
	return Finding{}, false
}

func remedyArgs(f Finding) [][]string {
	var out [][]string
	for _, r := range f.Remedies {
		out = append(out, r.Args)
	}
	return out
}

func hasRemedy(f Finding, args ...string) bool {
	for _, r := range f.Remedies {
		if slices.Equal(r.Args, args) {
			return true
		}
	}
	return false
}

func deadEndCodes(d Diagnosis) []string {
	var out []string
	for _, de := range d.DeadEnds {
		out = append(out, de.Code)
	}
	return out
}

// TestCorpus runs every case of testdata/corpus: the first (most likely)
// finding, the findings that must be there, and those that must not.
func TestCorpus(t *testing.T) {
	h100, _ := gpu.Resolve("H100-80GB")
	tests := []struct {
		name   string
		inputs []string
		opt    Options
		first  string
		want   []string
		absent []string
		dead   []string
	}{
		{name: "seed OOM alone", inputs: []string{"seed001-oom.txt"},
			first: CodeKVCachePressure, absent: []string{CodeWeightsTooLarge},
			dead: []string{DeadEmptyCache, DeadMoreGPUs, DeadBlameWeights}},
		{name: "CUDA-graph capture at 0.98", inputs: []string{"capture-oom.log"},
			first: CodeOutsideBudget, want: []string{CodeUtilizationEdge}, absent: []string{CodeFragmentation, CodeWeightsTooLarge},
			dead: []string{DeadEmptyCache, DeadRaiseUtilRetry}},
		{name: "max-model-len on a small budget", inputs: []string{"maxlen.log"},
			first: CodeMaxModelLen},
		{name: "70B on one H100", inputs: []string{"loading-oom.log"},
			opt: Options{GPU: h100, HasGPU: true}, first: CodeWeightsTooLarge},
		// A run-time OOM is a step's allocation beside the budget, not a
		// full KV cache (71.8% here, nothing waiting): vLLM preempts when
		// the cache is full, it does not allocate. 4.12 GiB reserved but
		// unallocated against 2.00 GiB tried puts fragmentation first.
		{name: "fragmented at run time", inputs: []string{"fragmentation-runtime.log"},
			first: CodeFragmentation, want: []string{CodeOutsideBudget}, absent: []string{CodeOtherProcesses, CodeKVCachePressure}},
		{name: "another process on the card", inputs: []string{"shared-gpu"},
			first: CodeOtherProcesses},
		{name: "preemption under long traffic", inputs: []string{"preemption"},
			first: CodeKVCachePressure, absent: []string{CodeWeightsTooLarge},
			dead: []string{DeadMoreGPUs, DeadBlameWeights}},
		{name: "deployment, HPA and pod status", inputs: []string{"k8s-deployment.yaml", "k8s-pod-status.yaml"},
			first: CodeK8sScheduling},
		{name: "kubectl describe in a crash loop", inputs: []string{"describe-pod.txt"},
			first: CodeK8sScheduling},
		{name: "time-sliced GPU", inputs: []string{"timeslicing.yaml"},
			first: CodeK8sScheduling, want: []string{CodeOtherProcesses}},
		{name: "MIG slice too small", inputs: []string{"mig.yaml"},
			first: CodeK8sScheduling},
		{name: "three GPUs idle", inputs: []string{"idle-gpus"},
			want: []string{CodeTensorParallel, CodeWeightsTooLarge}},
		{name: "upgrade 0.20 to 0.21", inputs: []string{"version-drift"},
			first: CodeVersionDrift},
		{name: "utilization 0.99 at run time", inputs: []string{"utilization-edge.log"},
			first: CodeUtilizationEdge, want: []string{CodeOutsideBudget}, absent: []string{CodeKVCachePressure}},
		// (13.90 reserved − 11.20 allocated) = 2.70 GiB > the 1.50 GiB tried.
		{name: "PyTorch 2.0 message, fragmented", inputs: []string{"oom-pytorch-2.0-fragmented.txt"},
			first: CodeFragmentation},
		{name: "healthy start-up", inputs: []string{"healthy.log"}},
		{name: "OOM while serving, KV cache full", inputs: []string{"runtime-oom.log"},
			first: CodeOutsideBudget, want: []string{CodeKVCachePressure}},
		{name: "two processes on an L4", inputs: []string{"nvsmi-two-processes.txt"},
			first: CodeOtherProcesses},
		{name: "others hold the card at start-up", inputs: []string{"freemem.log"},
			first: CodeOtherProcesses},
		{name: "/metrics with cache_config_info", inputs: []string{"metrics-cache-config.txt"},
			first: CodeKVCachePressure},
		{name: "Pending, short of GPUs", inputs: []string{"pending.txt"},
			first: CodeK8sScheduling},
		{name: "OOMKilled in a crash loop", inputs: []string{"describe2.txt"},
			first: CodeHostMemory, want: []string{CodeK8sScheduling}},
		{name: "a crash loop nothing explains", inputs: []string{"describe-crashloop.txt"},
			want: []string{CodeK8sScheduling}},
		{name: "restarted by its liveness probe", inputs: []string{"describe-probe.txt"},
			first: CodeK8sScheduling},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := readCorpus(t, tt.inputs...)
			opt := tt.opt
			opt.ResolveModel = catalogModel
			d := Diagnose(ev, opt)
			got := codes(d)
			if tt.first == "" && len(tt.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("findings %v, want none; reasons: %+v", got, d.Findings)
				}
				return
			}
			if tt.first != "" && (len(got) == 0 || got[0] != tt.first) {
				t.Errorf("findings %v, want %s first", got, tt.first)
			}
			for _, c := range tt.want {
				if !slices.Contains(got, c) {
					t.Errorf("findings %v, want %s among them", got, c)
				}
			}
			for _, c := range tt.absent {
				if slices.Contains(got, c) {
					t.Errorf("findings %v, must not hold %s", got, c)
				}
			}
			for _, c := range tt.dead {
				if !slices.Contains(deadEndCodes(d), c) {
					t.Errorf("dead ends %v, want %s", deadEndCodes(d), c)
				}
			}
			noEmptyFlags(t, d)
			for _, f := range d.Findings {
				if f.Confidence <= 0 || f.Confidence > confidenceCap || len(f.Reasons) == 0 {
					t.Errorf("%s: confidence %v, reasons %v", f.Code, f.Confidence, f.Reasons)
				}
				if f.Confidence >= 0.45 && len(f.Remedies) == 0 {
					t.Errorf("%s: no remedy", f.Code)
				}
			}
			if t.Failed() {
				for _, f := range d.Findings {
					t.Logf("%s %.2f %v\n  %v", f.Code, f.Confidence, f.Reasons, remedyArgs(f))
				}
				t.Logf("notes %v", d.Notes)
			}
		})
	}
}

// TestCorpusRemedies checks the remedies of the cases whose values are
// fixed by the evidence itself (vLLM's own estimate, the OOM's figures) or
// whose direction is certain.
func TestCorpusRemedies(t *testing.T) {
	diag := func(names ...string) Diagnosis {
		return Diagnose(readCorpus(t, names...), Options{ResolveModel: catalogModel})
	}

	// maxlen.log names no GPU total, so vLLM's own estimate is the value.
	f, ok := finding(diag("maxlen.log"), CodeMaxModelLen)
	if !ok || !hasRemedy(f, "--max-model-len", "20224") {
		t.Errorf("max-model-len remedies %v", remedyArgs(f))
	}

	f, ok = finding(diag("fragmentation-runtime.log"), CodeFragmentation)
	if !ok || !hasRemedy(f, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") || !strings.Contains(f.Remedies[0].Why, "4.12 GiB") {
		t.Errorf("fragmentation remedies %+v", f.Remedies)
	}

	// Capture ran past the card at 0.98: every utilization offered is
	// lower, and eager mode is among the remedies.
	f, _ = finding(diag("capture-oom.log"), CodeOutsideBudget)
	if len(f.Remedies) == 0 || f.Remedies[0].Args[0] != "--gpu-memory-utilization" || f.Remedies[0].Args[1] >= "0.98" || !hasRemedy(f, "--enforce-eager") {
		t.Errorf("outside-budget remedies %v", remedyArgs(f))
	}

	// The two processes on the card are named.
	f, _ = finding(diag("shared-gpu"), CodeOtherProcesses)
	if len(f.Remedies) == 0 || f.Remedies[0].Action != ActionFreeGPU || !strings.Contains(f.Remedies[0].Why, "PID 20931") {
		t.Errorf("other-process remedies %+v", f.Remedies)
	}

	// The pod's limits: a startup probe and the HPA; the OOMKill is the
	// host memory's: Qwen2.5-7B on one L4 plans 10.77 GiB at the sources'
	// upper end, within the 16Gi limit, so the limit is doubled and the
	// remedy says that is not a computed value.
	f, _ = finding(diag("k8s-deployment.yaml", "k8s-pod-status.yaml"), CodeK8sScheduling)
	if len(f.Remedies) < 2 {
		t.Errorf("k8s remedies %v", remedyArgs(f))
	}
	f, _ = finding(diag("k8s-deployment.yaml", "k8s-pod-status.yaml"), CodeHostMemory)
	if !hasRemedy(f, "resources.limits.memory", "32Gi") || !strings.Contains(f.Remedies[0].Why, "not a computed value") {
		t.Errorf("host remedies %+v", f.Remedies)
	}

	// A bigger MIG slice of the same A100 that fits an 8B model.
	f, _ = finding(diag("mig.yaml"), CodeK8sScheduling)
	if len(f.Remedies) == 0 || !strings.HasPrefix(f.Remedies[0].Args[1], "nvidia.com/mig-") {
		t.Errorf("MIG remedies %v", remedyArgs(f))
	}
}
