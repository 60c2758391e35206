package probe

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// Record is what one launch that started measured, kept so that later
// plans for the same model, GPU and settings use measured numbers
// (docs/architecture.md: "measure over guess"). Records are JSON lines in the
// calibration file (CalibrationPath). Byte figures are per GPU worker, as
// vLLM logs them; 0 = the log did not give it.
type Record struct {
	Time                 time.Time    `json:"time"`
	Model                string       `json:"model"`
	GPU                  string       `json:"gpu"`
	GPUTotalBytes        int64        `json:"gpu_total_bytes"`
	VLLMVersion          vllm.Version `json:"vllm_version"`
	TensorParallelSize   int          `json:"tensor_parallel_size"`
	PipelineParallelSize int          `json:"pipeline_parallel_size"`
	MaxNumBatchedTokens  int          `json:"max_num_batched_tokens"`
	MaxNumSeqs           int          `json:"max_num_seqs"`
	Dtype                string       `json:"dtype"`
	KVCacheDtype         string       `json:"kv_cache_dtype"`
	Quantization         string       `json:"quantization"`
	GPUMemoryUtilization float64      `json:"gpu_memory_utilization"`
	MaxModelLen          int          `json:"max_model_len"`

	WeightsBytes     int64 `json:"weights_bytes"`
	ActivationBytes  int64 `json:"activation_bytes"`
	NonTorchBytes    int64 `json:"non_torch_bytes"`
	CUDAGraphBytes   int64 `json:"cudagraph_bytes"`
	AvailableKVBytes int64 `json:"available_kv_cache_bytes"`
	KVTokens         int64 `json:"kv_cache_tokens"`
	NumGPUBlocks     int64 `json:"num_gpu_blocks"`
	// Source is empty for a probe's launch; "live server POD" for a
	// record of a running server's vllm:cache_config_info (audit --live
	// --learn), which measured the KV cache alone.
	Source string `json:"source,omitempty"`
}

// Key is what a record must share with a plan to stand in for its
// prediction: the weights depend on model, dtype, quantization and
// parallelism; the activation peak on the batch (max_num_batched_tokens,
// max_num_seqs) and the release (vllm-memory.md §2.3, §2.5); non-torch
// memory on the parallelism; all of them on the GPU. Utilization and
// max-model-len change none of them.
type Key struct {
	Model                string
	GPU                  string
	Version              vllm.Version
	TensorParallelSize   int
	PipelineParallelSize int
	MaxNumBatchedTokens  int
	MaxNumSeqs           int
	Dtype                string
	Quantization         string
}

// KeyFor is the key of a plan; settings get the release's defaults for the
// device first, as the planner does, so that a flag left out and the same
// value written out match.
func KeyFor(spec model.Spec, dev gpu.Device, s vllm.Settings) Key {
	e := s.WithDefaults(s.Version, dev.Name, dev.TotalBytes, spec.MaxPositions)
	return Key{
		Model:                spec.ID,
		GPU:                  dev.Name,
		Version:              e.Version,
		TensorParallelSize:   e.TensorParallelSize,
		PipelineParallelSize: e.PipelineParallelSize,
		MaxNumBatchedTokens:  e.MaxNumBatchedTokens,
		MaxNumSeqs:           e.MaxNumSeqs,
		Dtype:                e.Dtype,
		Quantization:         e.Quantization,
	}
}

// Matches reports whether the record was measured under the key. Model
// ids compare without case (the Hub treats them so); releases by
// major.minor.patch.
func (r Record) Matches(k Key) bool {
	return strings.EqualFold(r.Model, k.Model) && r.GPU == k.GPU &&
		r.VLLMVersion.Compare(k.Version) == 0 &&
		r.TensorParallelSize == k.TensorParallelSize && r.PipelineParallelSize == k.PipelineParallelSize &&
		r.MaxNumBatchedTokens == k.MaxNumBatchedTokens && r.MaxNumSeqs == k.MaxNumSeqs &&
		strings.EqualFold(r.Dtype, k.Dtype) && strings.EqualFold(r.Quantization, k.Quantization)
}

// Measured is the record as the planner takes it; it is nil when the
// record measured none of the parts.
func (r Record) Measured() *memory.Measured {
	m := memory.Measured{
		Weights:    r.WeightsBytes,
		Activation: r.ActivationBytes,
		NonTorch:   r.NonTorchBytes,
		CUDAGraph:  r.CUDAGraphBytes,
		Source:     fmt.Sprintf("probe of %s on %s, vLLM %s, %s", r.Model, r.GPU, r.VLLMVersion, r.Time.Format(time.RFC3339)),
	}
	if r.Source != "" {
		m.Source = fmt.Sprintf("%s of %s on %s, vLLM %s, %s", r.Source, r.Model, r.GPU, r.VLLMVersion, r.Time.Format(time.RFC3339))
	}
	// A record of a running server (audit --live --learn) measured the KV
	// cache alone: its blocks, at its utilization.
	if m.Weights == 0 && m.Activation == 0 && m.NonTorch == 0 && m.CUDAGraph == 0 {
		if r.Source == "" || r.AvailableKVBytes <= 0 {
			return nil
		}
		m.AvailableKV, m.KVTokens, m.Utilization = r.AvailableKVBytes, r.KVTokens, r.GPUMemoryUtilization
	}
	return &m
}

// valid reports whether a record read from the file is usable.
func (r Record) valid() bool {
	if r.Model == "" || r.GPU == "" || r.VLLMVersion.IsZero() {
		return false
	}
	for _, b := range []int64{r.GPUTotalBytes, r.WeightsBytes, r.ActivationBytes, r.NonTorchBytes, r.CUDAGraphBytes, r.AvailableKVBytes, r.KVTokens, r.NumGPUBlocks} {
		if b < 0 || b > 1<<50 {
			return false
		}
	}
	return r.TensorParallelSize >= 0 && r.PipelineParallelSize >= 0 && r.MaxNumBatchedTokens >= 0 && r.MaxNumSeqs >= 0
}

// CalibrationPath is the calibration file: $XDG_CACHE_HOME/headroom/
// calibration.jsonl, else ~/.cache/headroom/calibration.jsonl (the XDG
// base-directory default), with HOME read through getenv.
func CalibrationPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "headroom", "calibration.jsonl"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither XDG_CACHE_HOME nor HOME is set: no place for calibration records")
	}
	return filepath.Join(home, ".cache", "headroom", "calibration.jsonl"), nil
}

// AppendRecord adds one record to the file, creating it and its directory.
// telemetry.LineFile writes the line whole, so records of probes running at
// the same time do not interleave and a line cut short by a crash stays
// alone on its line.
func AppendRecord(path string, r Record) error { return telemetry.AppendJSON(path, r) }

// maxRecordLine bounds one line of the calibration file.
const maxRecordLine = 64 << 10

// ReadRecords reads a calibration file's records, in file order. Lines
// that are not a usable record (cut short by a crash, written by hand) are
// skipped and counted in skipped.
func ReadRecords(r io.Reader) (records []Record, skipped int, err error) {
	br := bufio.NewReader(r)
	for {
		line, long, rerr := readLine(br, maxRecordLine)
		if t := strings.TrimSpace(line); t != "" || long {
			var rec Record
			if long || json.Unmarshal([]byte(t), &rec) != nil || !rec.valid() {
				skipped++
			} else {
				records = append(records, rec)
			}
		}
		if rerr == io.EOF {
			return records, skipped, nil
		}
		if rerr != nil {
			return records, skipped, rerr
		}
	}
}

// readLine reads one line of at most limit bytes; long reports a line cut
// at the limit (the rest of it is read and dropped).
func readLine(br *bufio.Reader, limit int) (line string, long bool, err error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(b)+len(chunk) > limit {
			long = true
		} else {
			b = append(b, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return string(b), long, err
	}
}

// LatestMatch is the newest record (by time, then by file order) that
// matches the key.
func LatestMatch(records []Record, k Key) (Record, bool) {
	var best Record
	found := false
	for _, r := range records {
		if r.Matches(k) && (!found || !r.Time.Before(best.Time)) {
			best, found = r, true
		}
	}
	return best, found
}
