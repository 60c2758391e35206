package doctor

import (
	"slices"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/vllm"
)

// describe-oomkilled.txt is the pod of host.TestDoneWhenPod (Llama-3.1-70B
// at TP 4 on L40S, --kv-offloading-size 64, vLLM 0.33.0) with its
// /dev/shm mounted and a 32Gi limit, OOMKilled. The doctor names the host
// side, with the host plan's numbers: 78.83 GiB held, of which the
// offloaded KV cache is 64 GiB, so the rest is 14.83 GiB, and the 32 GiB
// limit leaves 32 − 14.83 = 17.17 GiB: 17 GiB of KV cache fit it.
func TestOOMKilledIsHostMemory(t *testing.T) {
	d := Diagnose(readCorpus(t, "describe-oomkilled.txt"), Options{ResolveModel: catalogModel})
	if len(d.Findings) == 0 || d.Findings[0].Code != CodeHostMemory {
		t.Fatalf("findings %v, want %s first", codes(d), CodeHostMemory)
	}
	f := d.Findings[0]
	if !slices.ContainsFunc(f.Reasons, func(r string) bool {
		return strings.Contains(r, "the memory limit 32.00 GiB is below the 78.83 GiB this vLLM holds in host memory: offloaded kv cache 64.00 GiB (mechanism")
	}) {
		t.Errorf("reasons %q", f.Reasons)
	}
	if !hasRemedy(f, "resources.limits.memory", "104Gi", "resources.requests.memory", "104Gi") || !hasRemedy(f, "--kv-offloading-size", "17") {
		t.Errorf("remedies %v", remedyArgs(f))
	}
	if strings.Contains(d.Command, "--kv-offloading-size 17") {
		t.Errorf("the suggested command cuts the offload the limit is the answer to: %s", d.Command)
	}
	if _, ok := finding(d, CodeTensorParallel); ok {
		t.Errorf("the pod's 4 GPUs (its limit) are taken for 1: %v", codes(d))
	}
	if h := d.Memory.Host; h == nil || h.MemoryLimit != "104Gi" {
		t.Errorf("memory.host %+v, want the host plan (104Gi)", h)
	}
	if d.Deployment.GPU != "L40S" || d.Deployment.GPUCount != 4 {
		t.Errorf("GPU %s × %d, want 4 × L40S from the node selector and the limit", d.Deployment.GPU, d.Deployment.GPUCount)
	}
}

// Exit code 137 alone is a SIGKILL (here the liveness probe's, reason
// Error), not the memory limit's: no host finding.
func TestExit137WithoutOOMKilled(t *testing.T) {
	d := Diagnose(readCorpus(t, "describe-pod.txt"), Options{ResolveModel: catalogModel})
	if _, ok := finding(d, CodeHostMemory); ok {
		t.Fatalf("findings %v: a liveness kill is taken for the memory limit", codes(d))
	}
}

// NCCL's segment failing in a 64M /dev/shm at TP 2 (production-stack
// #276, its log line verbatim): the /dev/shm finding, sized by the host
// plan (Qwen2.5-7B for the report's opt-125m, which the catalog lacks: the
// rings do not depend on the model): 160 + 2 × 100 + 24 MiB of rings and
// 2 × 9,637,888 B of NCCL, 0.39 GiB, mounted as 1Gi.
func TestSharedMemoryLog(t *testing.T) {
	l4, _ := gpu.Resolve("L4")
	set, err := vllm.ParseCommand(strings.Fields("vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 --max-model-len 200"))
	if err != nil {
		t.Fatal(err)
	}
	l4.Count = 2
	d := Diagnose(readCorpus(t, "nccl-shm.log"), Options{ResolveModel: catalogModel, GPU: l4, HasGPU: true, Settings: set, HasSettings: true})
	f, ok := finding(d, CodeSharedMemory)
	if !ok {
		t.Fatalf("findings %v", codes(d))
	}
	if !hasRemedy(f, "volumes[].emptyDir.medium", "Memory", "volumes[].emptyDir.sizeLimit", "1Gi", "volumeMounts[].mountPath", "/dev/shm") || !strings.Contains(f.Reasons[0], "writes 0.39 GiB there") {
		t.Errorf("reasons %q, remedies %v", f.Reasons, remedyArgs(f))
	}
}

// The kernel's cgroup OOM line (#57469) is the host's too.
func TestCgroupOOMLine(t *testing.T) {
	ev := readCorpus(t)
	if err := ev.Read(t.Context(), "dmesg", strings.NewReader("[81234.5] Memory cgroup out of memory: Killed process 4242 (VLLM::Worker_TP) total-vm:612345678kB, anon-rss:3131928kB, file-rss:0kB, shmem-rss:150143716kB\n")); err != nil {
		t.Fatal(err)
	}
	d := Diagnose(ev, Options{ResolveModel: catalogModel})
	if len(d.Findings) == 0 || d.Findings[0].Code != CodeHostMemory {
		t.Fatalf("findings %v", codes(d))
	}
}
