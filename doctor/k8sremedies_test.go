package doctor

import (
	"strings"
	"testing"
)

// pending.txt: a Llama-3.1-70B-Instruct pod asking for 8 H100s that no
// node has free ("2 Insufficient nvidia.com/gpu"). It never started, so
// the answer is the scheduler's: the fewest GPUs the plan serves the
// model's 131,072 tokens on. bf16 weights are 131.4 GiB: at TP 2, 65.7
// GiB a GPU leave about 3 GiB of a 71.27 GiB budget, short of one
// request's 131,072 × 320 KiB / 2 = 20 GiB of KV; TP 3 does not divide
// the 64 heads; at TP 4, 32.89 GiB of weights leave 36.28 GiB of KV.
func TestSchedulingAsksForFewerGPUs(t *testing.T) {
	d := Diagnose(readCorpus(t, "pending.txt"), Options{ResolveModel: catalogModel})
	f, ok := finding(d, CodeK8sScheduling)
	if !ok || len(f.Remedies) != 2 {
		t.Fatalf("k8s_scheduling %+v", f)
	}
	if !strings.Contains(f.Reasons[0], "never scheduled") || f.Level != labelHigh {
		t.Errorf("reasons %q at %s", f.Reasons, f.Level)
	}
	r := f.Remedies[0]
	if r.Action != ActionEditManifest || !slicesEqual(r.Args, "resources.limits.nvidia.com/gpu", "4", "args", "--tensor-parallel-size 4") {
		t.Errorf("first remedy %+v, want 4 GPUs at --tensor-parallel-size 4", r)
	}
	if hw := f.Remedies[1]; hw.Action != ActionHardware || !slicesEqual(hw.Args, "8xH100-80GB") {
		t.Errorf("second remedy %+v, want 8 free H100s on a node", hw)
	}
	for _, r := range f.Remedies {
		if strings.Contains(r.Why, "restarts before vLLM is up") {
			t.Errorf("a pod that never started is not restarting: %q", r.Why)
		}
	}
}

// A crash loop is the failure beside it repeating, or, where nothing says
// why the container dies, the log of its last run is what to read.
func TestCrashLoopRemedies(t *testing.T) {
	d := Diagnose(readCorpus(t, "describe2.txt"), Options{ResolveModel: catalogModel})
	f, _ := finding(d, CodeK8sScheduling)
	if len(f.Remedies) != 1 || f.Remedies[0].Action != ActionAdvice || !strings.Contains(f.Remedies[0].Why, CodeHostMemory) {
		t.Errorf("OOMKilled crash loop: remedies %+v, want the OOMKill named as what repeats", f.Remedies)
	}
	d = Diagnose(readCorpus(t, "describe-crashloop.txt"), Options{ResolveModel: catalogModel})
	f, _ = finding(d, CodeK8sScheduling)
	noEmptyFlags(t, d)
	if len(f.Remedies) != 1 || f.Remedies[0].Action != ActionGiveInput ||
		f.Remedies[0].Paste() != "kubectl logs vllm-qwen-7d9f8b6c5-x2k4p -c vllm --previous" {
		t.Errorf("unexplained crash loop: remedies %+v, want the previous run's log", f.Remedies)
	}
}

// describe2.txt: OOMKilled at an 8Gi limit, Qwen2.5-7B-Instruct on an L4
// at --gpu-memory-utilization 0.95 with vLLM 0.10.1. The limit leads
// (the host plan: 10.79 GiB at the sources' upper end, 11Gi); the
// planner also predicts that CUDA-graph capture outside the 0.95 budget
// runs past the card (20.93 + 0.80 + 0.51 = 22.24 > 22.03 GiB), which
// nothing in the evidence shows: that finding says it is a prediction,
// cites the line that sets 0.95 (27), not the "Args:" header (22), and
// the suggested command says the limit's fix comes first.
func TestOOMKilledLeadsPredictionsFollow(t *testing.T) {
	d := Diagnose(readCorpus(t, "describe2.txt"), Options{ResolveModel: catalogModel})
	if got := codes(d); got[0] != CodeHostMemory {
		t.Fatalf("findings %v, want %s first", got, CodeHostMemory)
	}
	if !hasRemedy(d.Findings[0], "resources.limits.memory", "11Gi", "resources.requests.memory", "11Gi") {
		t.Errorf("host remedies %v", remedyArgs(d.Findings[0]))
	}
	f, ok := finding(d, CodeOutsideBudget)
	if !ok || !f.Predicted || !strings.HasPrefix(f.Reasons[0], "the planner predicts") {
		t.Fatalf("outside_budget %+v: want a prediction, said so", f)
	}
	if len(f.Evidence) != 1 || f.Evidence[0].Line != 27 || f.Evidence[0].Text != "0.95" {
		t.Errorf("evidence %v, want line 27, the value 0.95", f.Evidence)
	}
	if !strings.Contains(d.CommandWhen, "host_memory_limit's fix comes first: resources.limits.memory: 11Gi") {
		t.Errorf("suggested command %q when %q", d.Command, d.CommandWhen)
	}
	if host, _ := finding(d, CodeHostMemory); host.Predicted {
		t.Error("the OOMKill is in the evidence, not a prediction")
	}
}

// describe-probe.txt: the pod's liveness probe gives up after 30 + 3 × 10
// = 60 s, with no startup probe. The window is check's (memory.StartupOf,
// package startup): 30 s pod start + 15 s reading 15 GB from local
// storage + 60 s engine start = 1m45s, twice that 3m30s; a startup probe
// of the liveness probe's 10 s period needs 210 / 10 = 21 failures.
func TestProbeWindowIsChecks(t *testing.T) {
	d := Diagnose(readCorpus(t, "describe-probe.txt"), Options{ResolveModel: catalogModel})
	f, _ := finding(d, CodeK8sScheduling)
	if len(f.Remedies) == 0 || !slicesEqual(f.Remedies[0].Args, "startupProbe.httpGet.path", "/health", "startupProbe.periodSeconds", "10", "startupProbe.failureThreshold", "21") {
		t.Fatalf("remedies %v, want a startup probe of 21 × 10 s", remedyArgs(f))
	}
	if !strings.Contains(f.Remedies[0].Why, "1m45s") {
		t.Errorf("why %q: want the estimate it rests on", f.Remedies[0].Why)
	}
}

// A Deployment that selects its GPU by GKE's accelerator label: the GPU is
// an L4, read from that label's line (11), and the time-shared node pool
// counts as a shared GPU, cited at its own line (12).
func TestGKELabels(t *testing.T) {
	ev := readCorpus(t, "gke-deployment.yaml")
	d := Diagnose(ev, Options{ResolveModel: catalogModel})
	if d.Deployment.GPU != "L4" || !strings.HasSuffix(d.Deployment.GPUSource, "gke-deployment.yaml:11") {
		t.Errorf("GPU %q from %q, want L4 from the accelerator label's line", d.Deployment.GPU, d.Deployment.GPUSource)
	}
	if len(ev.K8s.Sharing) != 1 || ev.K8s.Sharing[0].Line != 12 {
		t.Errorf("sharing %+v, want the GKE sharing label's line", ev.K8s.Sharing)
	}
}
