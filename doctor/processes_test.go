package doctor

import (
	"strings"
	"testing"

	"headroom.dev/headroom/vllm"
)

// nvidia-smi lists two compute processes on an L4: PID 4123
// /usr/bin/python3 at 20,890 MiB and PID 5877 python at 1,550 MiB. With
// the deployment given (Qwen2.5-7B-Instruct, --max-model-len 8192, the
// default utilization), the plan's footprint is 20.78 GiB, and 20,890 MiB
// = 20.40 GiB is 1.8% from it: PID 4123 is vLLM, and only PID 5877 is
// named. Sharing the card beside its 1,550 MiB (1,625,292,800 B):
//
//	L4 total 23,654,825,984 B; reserve 150 MiB + 1% = 393,834,659 B; CUDA context ≈ 0.51 GiB
//	(23,654,825,984 − 1,625,292,800 − 0.51 GiB − 393,834,659) / 23,654,825,984 = 0.891 → 0.89
func TestOtherProcessesSparesVLLM(t *testing.T) {
	set, err := vllm.ParseCommand(strings.Fields("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192"))
	if err != nil {
		t.Fatal(err)
	}
	d := Diagnose(readCorpus(t, "nvsmi-two-processes.txt"), Options{ResolveModel: catalogModel, Settings: set, HasSettings: true})
	f, ok := finding(d, CodeOtherProcesses)
	if !ok || len(f.Remedies) != 2 {
		t.Fatalf("other_processes %+v", f)
	}
	free := f.Remedies[0]
	if free.Action != ActionFreeGPU || !strings.Contains(free.Why, "PID 5877") || strings.Contains(free.Why, "PID 4123") {
		t.Errorf("free the GPU of %q: want PID 5877 alone, never vLLM's PID 4123", free.Why)
	}
	if !strings.Contains(f.Reasons[0], "vLLM is PID 4123") || !strings.Contains(f.Reasons[0], "footprint") {
		t.Errorf("reasons %q: want vLLM told apart by the plan's footprint", f.Reasons)
	}
	if !slicesEqual(f.Remedies[1].Args, "--gpu-memory-utilization", "0.89") || !strings.Contains(d.Command, "--gpu-memory-utilization 0.89") || d.CommandWhen != "" {
		t.Errorf("share remedy %v, command %q (when %q): want 0.89, at once", f.Remedies[1].Args, d.Command, d.CommandWhen)
	}

	// The screen alone names no vLLM: the largest is taken to be it, and
	// the report says so and how to tell.
	d = Diagnose(readCorpus(t, "nvsmi-two-processes.txt"), Options{ResolveModel: catalogModel})
	f, _ = finding(d, CodeOtherProcesses)
	if len(f.Remedies) == 0 || strings.Contains(f.Remedies[0].Why, "PID 4123") || !strings.Contains(f.Reasons[0], "taken to be vLLM's") {
		t.Errorf("screen alone: reasons %q, remedies %+v", f.Reasons, f.Remedies)
	}

	// shared-gpu: the engine's log lines carry pid=21407, the small
	// process; the 14 GiB one (PID 20931) is the other.
	d = Diagnose(readCorpus(t, "shared-gpu"), Options{ResolveModel: catalogModel})
	f, _ = finding(d, CodeOtherProcesses)
	if len(f.Remedies) == 0 || !strings.Contains(f.Remedies[0].Why, "PID 20931") || strings.Contains(f.Remedies[0].Why, "PID 21407") {
		t.Errorf("shared-gpu remedies %+v: want PID 20931 named, not the engine's 21407", f.Remedies)
	}
}

// freemem.log: vLLM 0.10.1 found 12.41 of 22.03 GiB free at start-up, so
// others hold 9.62 GiB. Beside them it may ask for at most
//
//	(22.03 − 9.62 − 0.51 CUDA context − 0.37 reserve) / 22.03 = 0.523 → 0.52
//
// a 11.46 GiB budget, less than the 14.19 GiB of weights: no utilization
// shares the card. The finding offers no flag, and the suggested command
// (the planner's 0.89 for the thin margin) says it applies once the card
// is freed: at 0.89 it would fail the same way.
func TestCardMustBeFreed(t *testing.T) {
	d := Diagnose(readCorpus(t, "freemem.log"), Options{ResolveModel: catalogModel})
	f, ok := finding(d, CodeOtherProcesses)
	if !ok || len(f.Remedies) != 1 || f.Remedies[0].Action != ActionFreeGPU {
		t.Fatalf("other_processes remedies %+v, want freeing the GPU alone", f.Remedies)
	}
	if !strings.Contains(f.Remedies[0].Why, "at most 0.52 of 22.03 GiB") {
		t.Errorf("why %q", f.Remedies[0].Why)
	}
	if d.Command == "" || !strings.HasPrefix(d.CommandWhen, "once the other processes have left the GPU") {
		t.Errorf("command %q when %q: want it to apply once the GPU is freed", d.Command, d.CommandWhen)
	}
}
