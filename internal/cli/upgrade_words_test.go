package cli

import (
	"strings"
	"testing"
)

// The upgrade preflight in a user's words: the verdict says the loss and
// the threshold, the remedies come with the flags, the terms are named in
// words (it printed settings.model_runner_v2 and per_gpu.cudagraph_in_budget),
// and -o args, with --pin-kv too, writes the flags to run the release moved
// to with (it was refused).
func TestUpgradeInWords(t *testing.T) {
	base := []string{"plan", "--gpu", "H100-80GB", "--model", "Qwen/Qwen3-30B-A3B", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192",
		"--vllm-version", "0.18.0", "--upgrade-to", "0.21.0"}
	code, out, errs := run(t, offline, base...)
	if code != ExitFits {
		t.Fatalf("exit %d: %s", code, errs)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"OK, 13.1% LESS KV CACHE", "113,504 KV-cache tokens instead of 130,688", "within the 20% --max-kv-loss allows"} {
		if !strings.Contains(first, want) {
			t.Errorf("first line lacks %q: %s", want, first)
		}
	}
	for _, want := range []string{"keep it: --kv-cache-memory-bytes ", "keep it: --gpu-memory-utilization 0.92 (-o args)", "CUDA graphs held back inside the budget: false -> true"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, internal := range []string{"settings.", "per_gpu."} {
		if strings.Contains(out, internal) {
			t.Errorf("the table prints a JSON field name (%s):\n%s", internal, out)
		}
	}
	code, args, errs := run(t, offline, append(base, "-o", "args")...)
	if code != ExitFits || strings.TrimSpace(args) != "--gpu-memory-utilization 0.92 --max-model-len 8192" {
		t.Errorf("-o args: exit %d %q %s", code, args, errs)
	}
	code, args, errs = run(t, offline, append(base, "-o", "args", "--pin-kv")...)
	if code != ExitFits || !strings.Contains(args, "--kv-cache-memory-bytes ") {
		t.Errorf("-o args --pin-kv: exit %d %q %s", code, args, errs)
	}
	// Past a threshold of 10% it is blocked, with the same remedies.
	code, out, _ = run(t, offline, append(base, "--max-kv-loss", "10%")...)
	if code != ExitNoFit || !strings.HasPrefix(out, "Upgrade vLLM 0.18.0 -> 0.21.0: BLOCKED") || !strings.Contains(out, "more than the 10% --max-kv-loss allows") || !strings.Contains(out, "keep it:") {
		t.Errorf("10%%: exit %d:\n%s", code, out)
	}
}
