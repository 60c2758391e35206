package cli

import (
	"encoding/json"
	"fmt"
	"headroom.dev/headroom/internal/report"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var capBase = []string{"capacity", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--offline"}

// Bad input is one line and exit 2; an SLO no GPU meets is exit 1 naming
// the closest option.
func TestCapacityBadInput(t *testing.T) {
	empty := writeFile(t, "empty.jsonl", "\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--price", "H999=2"}, 2, "not a GPU of the catalog"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--price", "H100-80GB=x"}, 2, "GPU=USD_PER_HOUR"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s"}, 2, "needs --slo"},
		{[]string{"--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s"}, 2, "give the GPU options"},
		{[]string{"--gpu", "H100-80GB", "--requests", empty, "--slo", "ttft_p99=1s"}, 2, "no request records"},
		{[]string{"--gpu", "H100-80GB", "--rate", "0.001", "--duration", "10s", "--slo", "ttft_p99=1s"}, 2, "no requests"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--router", "random"}, 2, "--router"},
		{[]string{"--gpu", "H100-80GB,L40S", "--rate", "5", "--duration", "60s", "--prompt-tokens", "2000", "--output-tokens", "100", "--slo", "ttft_p99=5ms"}, 1, "the closest is H100-80GB"},
		// Objects for a cluster are checked as the cluster takes them,
		// before any simulation.
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "-o", "keda", "--target", "vllm\nkind: Secret"}, 2, "not a Kubernetes object name"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "-o", "hpa", "--target", ""}, 2, "not a Kubernetes object name"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "-o", "keda", "--target", strings.Repeat("a", 300)}, 2, "not a Kubernetes object name"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "-o", "keda", "--target", "../../etc/passwd"}, 2, "not a Kubernetes object name"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--keda", "k.yaml", "--namespace", "UPPER_case"}, 2, "not a Kubernetes namespace"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--hpa", "h.yaml", "--namespace", "kube-system; rm -rf /"}, 2, "not a Kubernetes namespace"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "-o", "keda", "--prometheus", "javascript:alert(1)"}, 2, "not an http or https URL"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "-o", "keda", "--prometheus", "http://user:pw@prom:9090"}, 2, "credentials"},
		// Traffic capacity cannot size.
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--prompt-tokens", "0", "--output-tokens", "0"}, 2, "vLLM refuses max_tokens below 1"},
		{[]string{"--gpu", "L4", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s"}, 1, "vLLM would not start on any of them (L4: "},
		// A closed loop has no arrival rate to size for: refused, as a
		// bench command's --max-concurrency is, not replayed as a burst.
		{[]string{"--gpu", "H100-80GB", "--concurrency", "32", "--num-requests", "2000", "--slo", "ttft_p99=2s"}, 2, "a closed loop of 32 clients"},
		{[]string{"--gpu", "H100-80GB", "--bench", "vllm bench serve --model meta-llama/Llama-3.1-8B-Instruct --max-concurrency 32 --num-prompts 2000", "--slo", "ttft_p99=2s"}, 2, "a closed loop of 32 clients"},
		// An output that cannot be written is said before the run, with
		// its path.
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--hpa", "/nonexistent/h.yaml"}, 2, "--hpa /nonexistent/h.yaml: no such file or directory"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--keda", "/nonexistent/k.yaml"}, 2, "--keda /nonexistent/k.yaml: no such file or directory"},
		{[]string{"--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--plot", "/nonexistent/p.svg"}, 2, "--plot /nonexistent/p.svg: no such file or directory"},
	} {
		code, _, errs := run(t, offline, append(capBase, c.args...)...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		last := lines[len(lines)-1]
		if code != c.code || !strings.Contains(last, c.want) || (c.code == 2 && len(lines) != 1) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	code, _, errs := run(t, offline, append(simBase, "--rate", "5", "--replicas", "0")...)
	if code != 2 || !strings.Contains(errs, "at least 1 replica") {
		t.Errorf("--replicas 0: exit %d, %q", code, errs)
	}
}

// A replica of --data-parallel-size 2 is one server of two engines:
// capacity sizes it on two GPUs, and simulate --replicas 2 lists its four
// engines by replica.
func TestCapacityAndFleetOfDataParallelServers(t *testing.T) {
	code, out, errs := run(t, offline, append(capBase, "--gpu", "H100-80GB", "--rate", "5", "--duration", "60s", "--slo", "ttft_p99=1s", "--data-parallel-size", "2", "-o", "json")...)
	var cr struct {
		Options []struct {
			GPUsPerReplica int     `json:"gpus_per_replica"`
			Capacity       float64 `json:"slo_capacity_per_s"`
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &cr); code != 0 || err != nil || len(cr.Options) != 1 || cr.Options[0].GPUsPerReplica != 2 || cr.Options[0].Capacity <= 0 {
		t.Errorf("capacity of a server of two engines: exit %d %s, %+v %v", code, errs, cr, err)
	}
	code, out, errs = run(t, offline, append(simBase, "--rate", "5", "--replicas", "2", "--data-parallel-size", "2")...)
	if code != 0 || !strings.Contains(out, "a fleet of 2 such replicas") || !strings.Contains(out, "\nREPLICA.ENGINE ") || !strings.Contains(out, "\n1.1 ") {
		t.Errorf("--replicas 2 of --data-parallel-size 2: exit %d %s\n%s", code, errs, out)
	}
}

// Two windows of Poisson traffic at 10 req/s on one GPU, the GPU named
// twice: one option; the JSON contract, the plot and the KEDA and HPA
// manifests written in the same run, and -o keda printing the bytes
// --keda wrote.
func TestCapacityOutputs(t *testing.T) {
	args := append(capBase, "--gpu", "H100-80GB,h100-80gb", "--rate", "10", "--duration", "20m", "--prompt-tokens", "uniform:100-3000",
		"--output-tokens", "uniform:20-500", "--slo", "ttft_p99=1s,tpot_p99=40ms", "--price", "H100-80GB=2.5", "--target", "llama", "--namespace", "llm")
	dir := t.TempDir()
	plot, keda, hpa := filepath.Join(dir, "cap.svg"), filepath.Join(dir, "keda.yaml"), filepath.Join(dir, "hpa.yaml")
	code, out, errs := run(t, offline, append(args, "-o", "json", "--plot", plot, "--keda", keda, "--hpa", hpa)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if n := len(m["options"].([]any)); n != 1 {
		t.Fatalf("%d options for one GPU named twice", n)
	}
	opt := m["options"].([]any)[0].(map[string]any)
	for _, k := range []string{"gpu", "gpus_per_replica", "settings", "slo_capacity_per_s", "windows", "peak_replicas", "mean_replicas", "gpu_hours", "usd_per_gpu_hour", "cost_usd", "autoscaler", "static"} {
		if _, ok := opt[k]; !ok {
			t.Errorf("%s missing from the option", k)
		}
	}
	// The per-window fleet, two windows of 2 replicas: 2 × 2 × 10 min =
	// 0.667 GPU-hours at $2.5. Every window needs 2, so the autoscaler
	// capped there never moves: its replay is the static fleet of 2's, a
	// replayed run (0.667 GPU-hours and the last requests' drain).
	static := opt["static"].(map[string]any)
	if m["best"] != "H100-80GB" || opt["usd_per_gpu_hour"].(float64) != 2.5 || opt["gpu_hours"].(float64) != 0.667 || opt["cost_usd"].(float64) != 1.67 ||
		static["gpu_hours"].(float64) < 0.667 || static["gpu_hours"].(float64) > 0.7 || static["replayed"] != true || static["windows_met"].(float64) != 2 ||
		opt["autoscaler"].(map[string]any)["policy"] != report.PolicyStatic {
		t.Errorf("best %v, price %v, GPU-hours %v, cost %v, static %v", m["best"], opt["usd_per_gpu_hour"], opt["gpu_hours"], opt["cost_usd"], static)
	}
	// The answer is the autoscaler's replay: its cost is its GPU-hours at
	// the price, to the cent.
	replay := opt["autoscaler"].(map[string]any)["replay"].(map[string]any)
	if h, c := replay["gpu_hours"].(float64), replay["cost_usd"].(float64); replay["replayed"] != true || math.Abs(h*2.5-c) > 0.005 || h < 0.667 {
		t.Errorf("replay: %v", replay)
	}
	if b, err := os.ReadFile(plot); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("plot: %v", err)
	}
	for _, k := range []struct{ file, kind string }{{keda, "ScaledObject"}, {hpa, "HorizontalPodAutoscaler"}} {
		b, err := os.ReadFile(k.file)
		var obj map[string]any
		if err == nil {
			err = yaml.Unmarshal(b, &obj)
		}
		if err != nil || obj["kind"] != k.kind || obj["metadata"].(map[string]any)["namespace"] != "llm" {
			t.Errorf("%s: %v %v\n%s", k.file, err, obj["kind"], b)
		}
	}
	code, out, errs = run(t, offline, append(args, "-o", "keda")...)
	if b, _ := os.ReadFile(keda); code != 0 || out != string(b) {
		t.Errorf("-o keda: exit %d (%s), and not what --keda wrote:\n%s", code, errs, out)
	}
	// One answer, one cost: the table's first lines say the replay's
	// GPU-hours and cost, as the JSON has them, and the per-window fleet's
	// beside them; a price is said to the cent, as a cost is.
	_, table, _ := run(t, offline, args...)
	head := fmt.Sprintf("cheapest that meets the SLO: H100-80GB, 1 GPU(s) a replica, a static fleet of %v replicas: SLO met in %v of %v windows, %.1f GPU-hours, $%.2f\n",
		opt["autoscaler"].(map[string]any)["min_replicas"], replay["windows_met"], replay["windows"], replay["gpu_hours"], replay["cost_usd"])
	beside := fmt.Sprintf("  beside it: each window sized alone, 2 replicas at the peak, 2.0 on average, 0.7 GPU-hours, $1.67; a static fleet of 2: 0.7 GPU-hours, $%.2f (replayed: SLO met in 2 of 2 windows)\n", static["cost_usd"])
	if !strings.Contains(table, head) || !strings.Contains(table, beside) || !strings.Contains(table, "  H100-80GB: $2.50 a GPU-hour (--price)\n") {
		t.Errorf("the table's headline is not the JSON's:\n%s\nwant\n%s%s", table, head, beside)
	}
}

// FuzzParsePrices: --price never panics, and what it accepts is a
// catalog GPU at a price between 0 and 1000 USD an hour.
func FuzzParsePrices(f *testing.F) {
	for _, s := range []string{"H100-80GB=2.49", "l40s=1.86", "A100 80GB=1.79", "H999=2", "=", "L4=-1", "L4=NaN", "L4=1e309", "p5.48xlarge=98"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parsePrices([]string{s})
		if err != nil {
			return
		}
		for name, usd := range m {
			if name == "" || !(usd > 0) || usd > 1000 {
				t.Errorf("%q accepted as %s=%g", s, name, usd)
			}
		}
	})
}

// A bench command that names its model is read by capacity as simulate
// reads it: the model is the bench's, without --model.
func TestCapacityTakesTheBenchModel(t *testing.T) {
	bench := "vllm bench serve --model meta-llama/Llama-3.1-8B-Instruct --request-rate 5 --num-prompts 500 --random-input-len 1024 --random-output-len 128"
	code, out, errs := run(t, offline, "capacity", "--offline", "--gpu", "H100-80GB", "--bench", bench, "--slo", "ttft_p99=2s")
	if code != 0 || !strings.HasPrefix(out, "meta-llama/Llama-3.1-8B-Instruct, SLO ttft_p99=2s") {
		t.Errorf("exit %d: %s%s", code, out, errs)
	}
	code, _, errs = run(t, offline, "simulate", "--offline", "--gpu", "H100-80GB", "--bench", bench)
	if code != 0 {
		t.Errorf("simulate: exit %d: %s", code, errs)
	}
}
