package probe

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/probe/internal/enginesim"
	"headroom.dev/headroom/startup"
	"headroom.dev/headroom/vllm"
)

// simEngine is an Engine without processes: it stands in for vLLM on a GPU
// (there is none where these tests run) by printing enginesim's script for
// its hidden KV capacity into vLLM's log parser, so every decision of the
// probe is taken from parsed log text, as with the real engine. One test
// file (process_test.go) drives the real stand-in process instead.
type simEngine struct {
	cfg        enginesim.Config
	versionErr error
	// lengths records the --max-model-len of every launch, timeouts its
	// time limit.
	lengths  []int
	timeouts []time.Duration
}

func (e *simEngine) Version(context.Context) (vllm.Version, error) {
	if e.versionErr != nil {
		return vllm.Version{}, e.versionErr
	}
	return e.cfg.Version, nil
}

func (e *simEngine) Launch(ctx context.Context, l Launch) (Attempt, error) {
	if err := ctx.Err(); err != nil {
		return Attempt{}, err
	}
	e.lengths = append(e.lengths, l.Settings.MaxModelLen)
	e.timeouts = append(e.timeouts, l.Timeout)
	script := enginesim.Run(e.cfg, l.Settings, 8000)
	var sc vllm.LogScanner
	var tail []string
	for _, line := range script.Lines {
		sc.Line(line.Text)
		tail = append(tail, line.Text)
	}
	a := Attempt{Args: ServeArgs(l.Settings, 8000), Report: sc.Report(), Tail: tail, ExitCode: -1, Duration: time.Second}
	switch {
	case script.Ready && a.Report.Ready:
		a.Outcome = Started
	case script.Hang:
		a.Outcome = TimedOut
	default:
		a.Outcome = Failed
		a.ExitCode = script.ExitCode
	}
	if l.Observe != nil {
		l.Observe(PhaseReady, a.Report)
	}
	return a, nil
}

func spec(t testing.TB, id string) model.Spec {
	t.Helper()
	s, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("%s not in the catalog", id)
	}
	return s
}

func device(t testing.TB, name string) gpu.Device {
	t.Helper()
	sel, err := gpu.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Device
}

func probeSim(t *testing.T, e *simEngine, modelID, gpuName string, mod func(*Config)) (Result, error) {
	t.Helper()
	c := Config{
		Engine:   e,
		Settings: vllm.Settings{Model: modelID},
		Model:    spec(t, modelID),
		Device:   device(t, gpuName),
	}
	if mod != nil {
		mod(&c)
	}
	return Run(context.Background(), c)
}

var (
	v019 = vllm.MustVersion("0.19.0") // has --max-model-len auto (from 0.14.0)
	v010 = vllm.MustVersion("0.10.0") // V1, no auto, the error names the estimate
	v085 = vllm.MustVersion("0.8.5")  // V1, no auto, the error names no estimate
	v064 = vllm.MustVersion("0.6.4")  // V0
)

func TestAutoOneLaunch(t *testing.T) {
	// Llama-3.1-8B allows 131072 tokens; the hidden cache holds 30000
	// (1875 blocks of 16), so auto-fit reduces to 30000.
	e := &simEngine{cfg: enginesim.Config{Version: v019, KVTokens: 30000, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxModelLen != 30000 || r.Launches != 1 || e.lengths[0] != vllm.AutoMaxModelLen {
		t.Errorf("got %d in %d launches %v; want 30000 in 1 launch with auto", r.MaxModelLen, r.Launches, e.lengths)
	}
	if r.KVCacheTokens != 30000 || r.Version != v019 || r.History[0].Outcome != Started {
		t.Errorf("result %+v", r)
	}
	// 30000 tokens × 128 KiB = 3.662 GiB, printed as 3.66 GiB.
	if want := gibBytes(3.66); r.AvailableKVBytes < want-1<<20 || r.AvailableKVBytes > want+1<<20 {
		t.Errorf("available KV %d, want about %d", r.AvailableKVBytes, want)
	}
}

func TestAutoFullContext(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v019, KVTokens: 476016, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB", nil)
	if err != nil || r.MaxModelLen != 131072 || r.Launches != 1 {
		t.Errorf("got %d in %d launches, %v; want the full 131072 in 1", r.MaxModelLen, r.Launches, err)
	}
}

// TestAutoAboveUserCap: auto fits 30000, the user asked for at most 20000:
// one more launch proves 20000.
func TestAutoAboveUserCap(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v019, KVTokens: 30000, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", func(c *Config) { c.Settings.MaxModelLen = 20000 })
	if err != nil || r.MaxModelLen != 20000 || r.Launches != 2 || e.lengths[1] != 20000 {
		t.Errorf("got %d in %d launches %v, %v", r.MaxModelLen, r.Launches, e.lengths, err)
	}
}

// TestGuidedFailThenEstimate: without auto, the first launch is at the
// prediction; a hidden capacity below it fails with vLLM's estimate, and
// the second launch at the estimate starts.
func TestGuidedFailThenEstimate(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 20000, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Predicted <= 20000 {
		t.Fatalf("prediction %d: the test needs one above 20000", r.Predicted)
	}
	if r.MaxModelLen != 20000 || r.Launches != 2 || e.lengths[0] != r.Predicted/16*16 || e.lengths[1] != 20000 {
		t.Errorf("got %d via %v; want 20000 via [prediction, 20000]", r.MaxModelLen, e.lengths)
	}
	if r.History[0].Outcome != Failed || r.History[0].Report.EstimatedMaxLen != 20000 {
		t.Errorf("first launch %+v", r.History[0])
	}
}

// TestGuidedStartThenTokens: a hidden capacity above the prediction starts
// at once and logs its size; the second launch proves it.
func TestGuidedStartThenTokens(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 40000, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Predicted >= 40000 {
		t.Fatalf("prediction %d: the test needs one below 40000", r.Predicted)
	}
	if r.MaxModelLen != 40000 || r.Launches != 2 || e.lengths[1] != 40000 || r.KVCacheTokens != 40000 {
		t.Errorf("got %d via %v", r.MaxModelLen, e.lengths)
	}
}

// TestGuidedExactPrediction: the capacity is the prediction: one launch.
func TestGuidedExactPrediction(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, ModelMaxLen: 131072}}
	c := Config{Engine: e, Settings: vllm.Settings{Model: "m"}, Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4")}
	pre, err := Run(context.Background(), Config{Engine: &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 1, ModelMaxLen: 131072}}, Model: c.Model, Device: c.Device, Settings: c.Settings})
	if !errors.Is(err, ErrNothingStarts) {
		t.Fatalf("one token of cache: %v", err)
	}
	e.cfg.KVTokens = int64(pre.Predicted / 16 * 16)
	r, err := Run(context.Background(), c)
	if err != nil || r.MaxModelLen != pre.Predicted/16*16 || r.Launches != 1 {
		t.Errorf("got %d in %d launches, %v", r.MaxModelLen, r.Launches, err)
	}
}

func TestGuidedFullContextFits(t *testing.T) {
	// Qwen2.5-7B allows 32768; 90000 tokens of cache hold it.
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 90000, ModelMaxLen: 32768}}
	r, err := probeSim(t, e, "Qwen/Qwen2.5-7B-Instruct", "L4", nil)
	if err != nil || r.MaxModelLen != 32768 || r.Launches > 2 {
		t.Errorf("got %d in %d launches %v, %v", r.MaxModelLen, r.Launches, e.lengths, err)
	}
}

// TestV0 reads V0's "# GPU blocks" and its max-seq-len error.
func TestV0(t *testing.T) {
	for _, kv := range []int64{20000, 45008} {
		e := &simEngine{cfg: enginesim.Config{Version: v064, KVTokens: kv, ModelMaxLen: 131072}}
		r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", nil)
		if err != nil || int64(r.MaxModelLen) != kv || r.Launches != 2 {
			t.Errorf("capacity %d: got %d via %v, %v", kv, r.MaxModelLen, e.lengths, err)
		}
	}
}

// TestNoEstimateBisects: vLLM 0.8.5's error names no estimate, so the probe
// bisects between what started and what failed, down to one block.
func TestNoEstimateBisects(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v085, KVTokens: 20000, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", func(c *Config) { c.MaxLaunches = 20 })
	if err != nil || r.MaxModelLen != 20000 {
		t.Fatalf("got %d via %v, %v", r.MaxModelLen, e.lengths, err)
	}
	// The first start (below 20000) logs 20000 tokens: the next launch
	// proves it. So: prediction (fails), bisect steps down to a start,
	// then 20000.
	if e.lengths[len(e.lengths)-1] != 20000 || r.Launches > 6 {
		t.Errorf("launches %v", e.lengths)
	}
}

func TestUnknownVersion(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v019, KVTokens: 20000, ModelMaxLen: 131072}, versionErr: errors.New("`vllm --version` printed no version number")}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", nil)
	if err != nil || r.MaxModelLen != 20000 || r.Launches != 2 || e.lengths[0] == vllm.AutoMaxModelLen {
		t.Errorf("got %d via %v, %v", r.MaxModelLen, e.lengths, err)
	}
	if len(r.Notes) == 0 || !contains(r.Notes[0], "vLLM version unknown") {
		t.Errorf("notes %q", r.Notes)
	}
}

// TestAutoRefused: a build that claims a release with auto but refuses
// the word falls back to the numbers.
func TestAutoRefused(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 20000, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", func(c *Config) { c.Version = v019 })
	if err != nil || r.MaxModelLen != 20000 || r.Launches != 3 || e.lengths[0] != vllm.AutoMaxModelLen {
		t.Errorf("got %d via %v, %v", r.MaxModelLen, e.lengths, err)
	}
}

func TestNothingStarts(t *testing.T) {
	tests := []struct {
		name string
		cfg  enginesim.Config
		want string
	}{
		{"no cache memory", enginesim.Config{Version: v019, KVTokens: 0}, "No available memory for the cache blocks"},
		{"oom in profiling", enginesim.Config{Version: v010, KVTokens: 20000, Fail: enginesim.FailOOM}, "CUDA out of memory"},
		{"free memory", enginesim.Config{Version: v019, KVTokens: 20000, Fail: enginesim.FailFreeMemory}, "is less than desired GPU memory utilization"},
		{"exits silently", enginesim.Config{Version: v019, KVTokens: 20000, Fail: enginesim.FailSilent}, "before logging anything"},
		{"crash", enginesim.Config{Version: v019, KVTokens: 20000, Fail: enginesim.FailCrash, CrashAfter: 2}, "without an error vLLM is known to print"},
		{"hang", enginesim.Config{Version: v019, KVTokens: 20000, Fail: enginesim.FailHang}, "not ready after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.ModelMaxLen = 131072
			e := &simEngine{cfg: tt.cfg}
			r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", nil)
			if !errors.Is(err, ErrNothingStarts) || !contains(err.Error(), tt.want) {
				t.Fatalf("err %v; want one naming %q", err, tt.want)
			}
			if r.Launches != 1 || r.MaxModelLen != 0 {
				t.Errorf("a failure that a shorter context does not cure takes one launch: %v", e.lengths)
			}
		})
	}
}

// TestHybridModel: Gemma-2 alternates sliding-window and full layers, so
// the KV tokens figure is not a length limit; the probe asks vLLM at the
// top and takes its estimate.
func TestHybridModel(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 5008, ModelMaxLen: 8192}}
	r, err := probeSim(t, e, "google/gemma-2-9b-it", "L4", nil)
	if err != nil || r.MaxModelLen != 5008 || r.Launches != 2 || e.lengths[0] != 8192 {
		t.Errorf("got %d via %v, %v", r.MaxModelLen, e.lengths, err)
	}
}

// TestAboveModelMax: the catalog says 131072 but vLLM derives less (a
// smaller model_max_length): the probe learns vLLM's maximum.
func TestAboveModelMax(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 476016, ModelMaxLen: 65536}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB", nil)
	if err != nil || r.MaxModelLen != 65536 || r.ModelMaxLen != 65536 {
		t.Errorf("got %d (max %d) via %v, %v", r.MaxModelLen, r.ModelMaxLen, e.lengths, err)
	}
}

func TestCancelledBeforeLaunch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 20000, ModelMaxLen: 131072}}
	_, err := Run(ctx, Config{Engine: e, Settings: vllm.Settings{Model: "m"}, Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Version: v010})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}

// TestKAITOSearchFacts reproduces the unit-test facts of KAITO's
// binary_search_with_limited_steps (docs/kaito.md §5).
func TestKAITOSearchFacts(t *testing.T) {
	upTo := func(n int) func(int) (bool, error) { return func(x int) (bool, error) { return x <= n, nil } }
	tests := []struct {
		upper, steps int
		valid        func(int) (bool, error)
		want         int
	}{
		{10, 1, upTo(10), 10},
		{20, 3, upTo(10), 10},
		{30, 6, upTo(10), 10},
		{30, 3, upTo(10), 7},
		{30, 6, func(int) (bool, error) { return false, nil }, 0},
	}
	for _, tt := range tests {
		got, err := KAITOSearch(tt.upper, tt.steps, tt.valid)
		if err != nil || got != tt.want {
			t.Errorf("KAITOSearch(%d, %d) = %d, %v; want %d", tt.upper, tt.steps, got, err, tt.want)
		}
	}
	// 131072 with 6 steps: the probes are U, U/2, then halving; the last
	// step is U/32 = 4096 tokens (kaito.md §5), and 3000 tokens fit nowhere.
	var probes []int
	got, _ := KAITOSearch(131072, 6, func(x int) (bool, error) { probes = append(probes, x); return x <= 3000, nil })
	want := []int{131072, 65536, 32768, 16384, 8192, 4096}
	if got != 0 || len(probes) != 6 || probes[5] != want[5] || probes[1] != want[1] {
		t.Errorf("got %d with probes %v; want 0 with %v", got, probes, want)
	}
}

func TestBisectStrategy(t *testing.T) {
	// 40000 tokens of cache, U = 131072: probes 131072 (fail), 65536
	// (fail), 32768 (ok), 49152 (fail), 40960 (fail), 36864 (ok) → 36864.
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 40000, ModelMaxLen: 131072}}
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", func(c *Config) { c.Strategy = StrategyBisect })
	want := []int{131072, 65536, 32768, 49152, 40960, 36864}
	if err != nil || r.MaxModelLen != 36864 || len(e.lengths) != 6 {
		t.Fatalf("got %d via %v, %v", r.MaxModelLen, e.lengths, err)
	}
	for i := range want {
		if e.lengths[i] != want[i] {
			t.Errorf("probes %v; want %v", e.lengths, want)
			break
		}
	}
}

func TestCalibrationHook(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 20000, ModelMaxLen: 131072}}
	var recs []Record
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", func(c *Config) {
		c.Calibration = func(r Record) error { recs = append(recs, r); return nil }
		c.Now = func() time.Time { return at }
	})
	if err != nil || r.MaxModelLen != 20000 {
		t.Fatal(r, err)
	}
	// One launch started (the second); the L4's V1 defaults are 2048
	// batched tokens and 256 sequences (vllm-memory.md §2.3).
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	rec := recs[0]
	if rec.Model != "meta-llama/Llama-3.1-8B-Instruct" || rec.GPU != "L4" || rec.VLLMVersion != v010 || rec.MaxModelLen != 20000 ||
		rec.MaxNumBatchedTokens != 2048 || rec.MaxNumSeqs != 256 || rec.TensorParallelSize != 1 || rec.KVTokens != 20000 ||
		rec.WeightsBytes != gibBytes(14.99) || !rec.Time.Equal(at) {
		t.Errorf("record %+v", rec)
	}
}

func TestProgress(t *testing.T) {
	e := &simEngine{cfg: enginesim.Config{Version: v010, KVTokens: 20000, ModelMaxLen: 131072}}
	var phases []Phase
	var done int
	_, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "L4", func(c *Config) {
		c.Progress = func(p Progress) {
			phases = append(phases, p.Phase)
			if p.Done != nil {
				done++
			}
		}
	})
	if err != nil || done != 2 || phases[0] != PhaseLaunching {
		t.Errorf("phases %v, %d done, %v", phases, done, err)
	}
}

// A launch's time limit is the start-up model's probe window (package
// startup), the one check and capacity use. Llama-3.1-8B's checkpoint is
// 16,060,522,496 bytes: from local storage 16.06 GB at 1 GB/s -> 16 s, so
// 30 + 16 + 60 = 106 s expected and 212 s allowed; from a network volume
// at 125 MiB/s 122.5 s -> 123 s, 213 s expected and 426 s allowed.
func TestLaunchTimeoutFromStartupModel(t *testing.T) {
	for st, want := range map[startup.Storage]time.Duration{"": 212 * time.Second, startup.Network: 426 * time.Second} {
		e := &simEngine{cfg: enginesim.Config{Version: v019, KVTokens: 30000, ModelMaxLen: 131072}}
		r, err := probeSim(t, e, "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB", func(c *Config) { c.Storage = st })
		if err != nil {
			t.Fatal(err)
		}
		if len(e.timeouts) == 0 || e.timeouts[0] != want {
			t.Errorf("storage %q: timeouts %v, want %s", st, e.timeouts, want)
		}
		if !strings.Contains(strings.Join(r.Notes, "\n"), "each launch may take up to "+want.String()) {
			t.Errorf("storage %q: notes %q", st, r.Notes)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// gibBytes is a GiB figure as vLLM prints it, in bytes: round(x × 2^30).
func gibBytes(x float64) int64 { return int64(math.Round(x * (1 << 30))) }
