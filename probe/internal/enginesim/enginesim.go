// Package enginesim writes what a vLLM start-up prints, for a hidden KV
// capacity, without a GPU. It stands in for the GPU in the probe's tests and
// benchmark: the engine stand-in binary (probe/testdata/fakevllm) prints its
// script, and the in-process simulated engine of the benchmark feeds the
// same lines to the log parser. The texts follow docs/vllm-memory.md (§2.2,
// §3.4, §4) and the v0.19.0 logs behind memory/testdata/vllm-0.19.0-h100.csv; the rule deciding
// what fits is vLLM's own for full-attention models: one request of L tokens
// needs ceil(L / block_size) blocks (§4), and the estimate in the error is
// the largest length that needs no more blocks than there are.
package enginesim

import (
	"fmt"
	"strconv"
	"strings"

	"headroom.dev/headroom/vllm"
)

// Failure modes a script can act out besides vLLM's own length checks.
const (
	// FailHang prints the first lines and then neither progresses nor exits.
	FailHang = "hang"
	// FailSilent exits 1 before printing anything.
	FailSilent = "silent"
	// FailCrash prints CrashAfter lines and exits 1 without an error text.
	FailCrash = "crash"
	// FailOOM runs out of CUDA memory in the profile run.
	FailOOM = "oom"
	// FailFreeMemory stops at the start-up free-memory check.
	FailFreeMemory = "free-memory"
)

// Config is the hidden state of the simulated engine.
type Config struct {
	// Version is the release acted out (log texts, `auto` support, V0/V1).
	Version vllm.Version
	// KVTokens is the hidden KV capacity in tokens for the launched
	// settings; it is rounded down to whole blocks.
	KVTokens int64
	// ModelMaxLen is the model's maximum context (max_position_embeddings).
	ModelMaxLen int
	// KVBytesPerToken turns blocks into the GiB figures of the log
	// (default 131072: Llama-3.1-8B in bf16, vllm-memory.md §3.1).
	KVBytesPerToken int64
	// WeightsGiB is the "Model loading took" figure (default 14.99, the
	// v0.19.0 Llama-3.1-8B row).
	WeightsGiB float64
	// Fail selects a failure mode (Fail* constants); "" = none.
	Fail string
	// CrashAfter is the number of lines FailCrash prints first.
	CrashAfter int
	// PID is printed in the process tags.
	PID int
}

// Script is what one launch prints and how it ends.
type Script struct {
	// Lines are printed in order; Err marks the ones vLLM writes to stderr.
	Lines []Line
	// Ready: after the lines the server answers /health (until stopped).
	Ready bool
	// Hang: after the lines nothing more happens until the process is killed.
	Hang bool
	// ExitCode is the exit status when neither Ready nor Hang.
	ExitCode int
}

// Line is one line of output.
type Line struct {
	Text string
	Err  bool
	// Loading marks the line after which the weights are loaded (where a
	// stand-in waits its load delay).
	Loading bool
}

// Version boundaries of the texts below (not of the memory rules, which
// live in package vllm).
var (
	// The estimate in the "To serve at least one request" error: vllm
	// #19407 (June 2025, a 0.9 build) shows it; the release it came in is
	// not verified, 0.9.0 is assumed.
	estimateSince = vllm.Version{Major: 0, Minor: 9}
	// "models's" became "model's" in a later release (vllm-memory.md §4:
	// "older builds spell it models's"); 0.10.0 is assumed.
	modelsSpellingUntil = vllm.Version{Major: 0, Minor: 10}
	// V0 printed "Memory profiling results: ..." from 0.6.4 (§3.4).
	v0ProfileSince = vllm.Version{Major: 0, Minor: 6, Patch: 4}
)

// Run writes the script of one launch with settings s (as parsed from the
// command line) listening on port.
func Run(c Config, s vllm.Settings, port int) Script {
	if c.KVBytesPerToken <= 0 {
		c.KVBytesPerToken = 128 << 10
	}
	if c.WeightsGiB <= 0 {
		c.WeightsGiB = 14.99
	}
	if c.PID <= 0 {
		c.PID = 4242
	}
	w := writer{c: c}
	if c.Fail == FailSilent {
		return Script{ExitCode: 1}
	}
	bs := s.BlockSize
	if bs <= 0 {
		bs = vllm.DefaultBlockSize(c.Version)
	}
	blocks := max(c.KVTokens, 0) / int64(bs)
	v1 := vllm.UsesV1(c.Version, s.Env)
	auto := s.MaxModelLen == vllm.AutoMaxModelLen
	if auto && !vllm.SupportsAutoMaxModelLen(c.Version) {
		// argparse's int type refuses the word (exit status 2).
		w.err("usage: vllm serve [model_tag] [options]")
		w.err("vllm serve: error: argument --max-model-len: invalid int value: 'auto'")
		return w.exit(2)
	}
	length := s.MaxModelLen
	if length == 0 || auto {
		length = c.ModelMaxLen
	}
	w.api("INFO", "api_server.py:1805", "vLLM API server version "+c.Version.String())
	if length > c.ModelMaxLen {
		w.err(fmt.Sprintf("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n  Value error, User-specified max_model_len (%d) is greater than the derived max_model_len (max_position_embeddings=%d or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.", length, c.ModelMaxLen))
		return w.exit(1)
	}
	if !v1 {
		return w.v0(s, length, blocks, bs, port)
	}
	w.core("INFO", "core.py:90", fmt.Sprintf("Initializing a V1 LLM engine (v%s) with config: model='%s', max_seq_len=%d", c.Version, s.Model, length))
	if c.Fail == FailFreeMemory {
		w.coreErr("ValueError: Free memory on device cuda:0 (60.85/79.19 GiB) on startup is less than desired GPU memory utilization (0.95, 75.23 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
		w.coreErr("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return w.exit(1)
	}
	w.core("INFO", "gpu_model_runner.py:2338", fmt.Sprintf("Starting to load model %s...", s.Model))
	w.loaded()
	w.core("INFO", "gpu_model_runner.py:2392", fmt.Sprintf("Model loading took %.2f GiB memory and 4.830211 seconds", c.WeightsGiB))
	if c.Fail == FailHang {
		return Script{Lines: w.lines, Hang: true}
	}
	if c.Fail == FailCrash {
		return w.crash()
	}
	if c.Fail == FailOOM {
		w.coreErr("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.23 GiB is free. Process 4242 has 77.95 GiB memory in use. Of the allocated memory 75.60 GiB is allocated by PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
		w.coreErr("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return w.exit(1)
	}
	availGiB := w.gib(blocks * int64(bs))
	w.core("INFO", "gpu_worker.py:298", fmt.Sprintf("Available KV cache memory: %.2f GiB", availGiB))
	if blocks <= 0 {
		w.coreErr("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
		w.coreErr("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return w.exit(1)
	}
	fit := blocks * int64(bs) // the longest request whose ceil(L/bs) ≤ blocks
	if auto {
		if fit < int64(c.ModelMaxLen) {
			length = int(fit)
			w.core("INFO", "kv_cache_utils.py:1255", fmt.Sprintf("Auto-fit max_model_len: reduced from %d to %d to fit in available GPU memory (%.2f GiB available for KV cache)", c.ModelMaxLen, length, availGiB))
		} else {
			w.core("INFO", "kv_cache_utils.py:1262", fmt.Sprintf("Auto-fit max_model_len: using the full model context length %d, which fits in available GPU memory (%.2f GiB available for KV cache)", c.ModelMaxLen, availGiB))
		}
	}
	if need := (int64(length) + int64(bs) - 1) / int64(bs); need > blocks {
		spelling := "model's"
		if !c.Version.AtLeast(modelsSpellingUntil) {
			spelling = "models's"
		}
		msg := fmt.Sprintf("ValueError: To serve at least one request with the %s max seq len (%d), (%.2f GiB KV cache is needed, which is larger than the available KV cache memory (%.2f GiB).", spelling, length, w.gib(need*int64(bs)), availGiB)
		if c.Version.AtLeast(estimateSince) {
			msg += fmt.Sprintf(" Based on the available memory, the estimated maximum model length is %d.", fit)
		}
		w.coreErr(msg + " Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
		w.coreErr("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return w.exit(1)
	}
	tokens := blocks * int64(bs)
	if vllm.LogsKVCacheTokens(c.Version, s.Env) {
		w.core("INFO", "kv_cache_utils.py:1087", "GPU KV cache size: "+vllm.Thousands(tokens)+" tokens")
	} else {
		w.core("INFO", "gpu_executor.py:113", fmt.Sprintf("# GPU blocks: %d", blocks))
	}
	w.core("INFO", "kv_cache_utils.py:1091", fmt.Sprintf("Maximum concurrency for %s tokens per request: %.2fx", vllm.Thousands(int64(length)), float64(tokens)/float64(length)))
	w.core("INFO", "gpu_model_runner.py:3118", "Graph capturing finished in 7 secs, took 0.91 GiB")
	w.api("INFO", "api_server.py:1880", fmt.Sprintf("Starting vLLM API server 0 on http://127.0.0.1:%d", port))
	return w.ready(port)
}

// v0 acts out the V0 engine (before 0.8, or VLLM_USE_V1=0 until 0.11).
func (w *writer) v0(s vllm.Settings, length int, blocks int64, bs, port int) Script {
	c := w.c
	w.plain("INFO", "llm_engine.py:249", fmt.Sprintf("Initializing an LLM engine (v%s) with config: model='%s', max_seq_len=%d", c.Version, s.Model, length))
	if c.Fail == FailFreeMemory {
		// V0 had no start-up free-memory check; it runs out of memory instead.
		c.Fail = FailOOM
	}
	w.loaded()
	w.plain("INFO", "model_runner.py:1077", fmt.Sprintf("Loading model weights took %.4f GB", c.WeightsGiB))
	switch c.Fail {
	case FailHang:
		return Script{Lines: w.lines, Hang: true}
	case FailCrash:
		return w.crash()
	case FailOOM:
		w.err("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 78.68 GiB memory in use.")
		return w.exit(1)
	}
	avail := w.gib(blocks * int64(bs))
	if c.Version.AtLeast(v0ProfileSince) {
		w.plain("INFO", "worker.py:232", fmt.Sprintf("Memory profiling results: total_gpu_memory=79.19GiB initial_memory_usage=%.2fGiB peak_torch_memory=%.2fGiB memory_usage_post_profile=%.2fGiB non_torch_memory=0.79GiB kv_cache_size=%.2fGiB gpu_memory_utilization=0.90", c.WeightsGiB+0.5, c.WeightsGiB+1.9, c.WeightsGiB+0.8, avail))
	}
	w.plain("INFO", "gpu_executor.py:113", fmt.Sprintf("# GPU blocks: %d, # CPU blocks: 2048", blocks))
	if blocks <= 0 {
		w.err("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
		return w.exit(1)
	}
	if capacity := blocks * int64(bs); int64(length) > capacity {
		w.err(fmt.Sprintf("ValueError: The model's max seq len (%d) is larger than the maximum number of tokens that can be stored in KV cache (%d). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", length, capacity))
		return w.exit(1)
	}
	w.plain("INFO", "gpu_executor.py:117", fmt.Sprintf("Maximum concurrency for %d tokens per request: %.2fx", length, float64(blocks*int64(bs))/float64(length)))
	w.plain("INFO", "model_runner.py:1530", "Graph capturing finished in 14 secs, took 0.31 GiB")
	w.uvicorn(port)
	return Script{Lines: w.lines, Ready: true}
}

type writer struct {
	c     Config
	lines []Line
}

const stamp = "11-22 10:00:00"

func (w *writer) api(level, file, msg string) {
	w.add(fmt.Sprintf("(APIServer pid=%d) %s %s [%s] %s", w.c.PID, level, stamp, file, msg), false)
}

func (w *writer) core(level, file, msg string) {
	w.add(fmt.Sprintf("(EngineCore_DP0 pid=%d) %s %s [%s] %s", w.c.PID+1, level, stamp, file, msg), false)
}

func (w *writer) coreErr(msg string) {
	w.add(fmt.Sprintf("(EngineCore_DP0 pid=%d) ERROR %s [core.py:708] %s", w.c.PID+1, stamp, msg), true)
}

// plain is V0's prefix: "INFO 11-22 10:00:00 file.py:12] msg".
func (w *writer) plain(level, file, msg string) {
	w.add(fmt.Sprintf("%s %s %s] %s", level, stamp, file, msg), false)
}

func (w *writer) err(msg string) { w.add(msg, true) }

func (w *writer) add(text string, stderr bool) {
	for _, l := range strings.Split(text, "\n") {
		w.lines = append(w.lines, Line{Text: l, Err: stderr})
	}
}

// loaded marks the last line as the one after which loading takes time.
func (w *writer) loaded() {
	if n := len(w.lines); n > 0 {
		w.lines[n-1].Loading = true
	}
}

func (w *writer) exit(code int) Script { return Script{Lines: w.lines, ExitCode: code} }

func (w *writer) crash() Script {
	n := min(max(w.c.CrashAfter, 0), len(w.lines))
	return Script{Lines: w.lines[:n], ExitCode: 1}
}

func (w *writer) uvicorn(port int) {
	w.add("INFO:     Started server process ["+strconv.Itoa(w.c.PID)+"]", false)
	w.add("INFO:     Waiting for application startup.", false)
	w.add("INFO:     Application startup complete.", false)
	w.add(fmt.Sprintf("INFO:     Uvicorn running on http://127.0.0.1:%d (Press CTRL+C to quit)", port), false)
}

func (w *writer) ready(port int) Script {
	w.uvicorn(port)
	// V1 prints the API server's tag; the port line is the API server's.
	for i := len(w.lines) - 4; i < len(w.lines); i++ {
		w.lines[i].Text = fmt.Sprintf("(APIServer pid=%d) %s", w.c.PID, w.lines[i].Text)
	}
	return Script{Lines: w.lines, Ready: true}
}

// gib converts tokens of KV to the GiB vLLM prints.
func (w *writer) gib(tokens int64) float64 {
	return float64(tokens*w.c.KVBytesPerToken) / (1 << 30)
}
