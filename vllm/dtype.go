package vllm

import (
	"fmt"
	"strings"
)

// kvCacheDtypes are the --kv-cache-dtype values headroom knows, with the
// bytes of one cached element (vllm/config/cache.py CacheDType;
// vllm-memory.md §3.1: "fp8/fp8_e4m3/fp8_e5m2 → 1"). fp8_ds_mla
// (DeepSeek-V3.2 FlashMLA-sparse) stores fp8 data with scales and a bf16
// rope part, 656 bytes per token per layer in all (§3.1): its element size
// is 1, and the planner must treat its page specially. Newer releases add
// packed modes (NVFP4, INT4) whose element is not a whole byte; they are
// not here yet. "auto" is listed with 0: the model's dtype.
var kvCacheDtypes = []struct {
	name  string
	bytes int
}{
	{"auto", 0},
	{"bfloat16", 2}, {"float16", 2}, {"half", 2},
	{"float32", 4},
	{"fp8", 1}, {"fp8_e4m3", 1}, {"fp8_e5m2", 1}, {"fp8_inc", 1}, {"fp8_ds_mla", 1},
}

// KVCacheDtypeBytes is the size in bytes of one KV-cache element for a
// --kv-cache-dtype value; "auto" (or "") uses the model's dtype, whose size
// is modelDtypeBytes (see DtypeBytes). The v0.19.0 calibration rows agree:
// Llama-3.1-8B with 58.11 GiB for KV holds 476016 tokens with auto (bf16)
// and 952032 with fp8, twice as many.
func KVCacheDtypeBytes(kvCacheDtype string, modelDtypeBytes int) (int, error) {
	name := strings.ToLower(strings.TrimSpace(kvCacheDtype))
	if name == "" {
		name = "auto"
	}
	for _, d := range kvCacheDtypes {
		if d.name != name {
			continue
		}
		if d.bytes > 0 {
			return d.bytes, nil
		}
		if modelDtypeBytes <= 0 {
			return 0, fmt.Errorf("--kv-cache-dtype auto follows the model's dtype, whose size is not known (%d bytes): resolve --dtype first", modelDtypeBytes)
		}
		return modelDtypeBytes, nil
	}
	names := make([]string, len(kvCacheDtypes))
	for i, d := range kvCacheDtypes {
		names[i] = d.name
	}
	return 0, fmt.Errorf("--kv-cache-dtype: %q is not a KV cache dtype headroom knows; use one of %s", clip(kvCacheDtype), strings.Join(names, ", "))
}

// ResolveDtype is the dtype vLLM runs the model in: --dtype (dtype) as
// given, or for "auto" (and "") the checkpoint's torch_dtype
// (checkpointDtype, as config.json writes it; "torch." prefix allowed).
//
// Under auto vLLM does not run float32 checkpoints in float32
// (_get_and_verify_dtype in vllm/config/model.py): older releases downcast
// them to float16 ("Following the common practice, we use float16 for
// float32 models"), newer ones (_resolve_auto_dtype) to the platform's
// preferred dtype, bfloat16 on GPUs that support it (float16 on older GPUs
// and for pooling models). We return bfloat16, the newest behaviour on
// current GPUs; the byte size is 2 either way, so the release boundary
// (unverified) does not matter for memory. A config.json without
// torch_dtype counts as float32, as in vLLM (gpt-oss ships none).
func ResolveDtype(dtype, checkpointDtype string) (string, error) {
	d := normDtype(dtype)
	switch d {
	case "half", "float16":
		return "float16", nil
	case "bfloat16":
		return "bfloat16", nil
	case "float", "float32":
		return "float32", nil
	case "", "auto":
	default:
		return "", fmt.Errorf("--dtype: %q is not one of %s", clip(dtype), strings.Join(dtypeChoices, ", "))
	}
	switch c := normDtype(checkpointDtype); {
	case c == "bfloat16" || c == "bf16":
		return "bfloat16", nil
	case c == "float16" || c == "fp16" || c == "half":
		return "float16", nil
	case c == "" || c == "float32" || c == "fp32" || c == "float" || c == "float64" || strings.HasPrefix(c, "float8"):
		// float32 (and the rarer float64 / float8 torch_dtype) are not run
		// as such under auto: vLLM picks its preferred 16-bit dtype.
		return "bfloat16", nil
	}
	return "", fmt.Errorf("checkpoint torch_dtype %q is not a dtype headroom knows (bfloat16, float16, float32)", clip(checkpointDtype))
}

// BF16MinCapability is the compute capability (major × 10 + minor) from
// which vLLM runs bfloat16 (CudaPlatform's supported dtypes; below it an
// explicit --dtype bfloat16 is refused).
const BF16MinCapability = 80

// ResolveDtypeOn is ResolveDtype on a GPU of compute capability cc (major
// × 10 + minor, 0 when unknown): under auto vLLM takes float16 where the
// GPU has no bfloat16 (_resolve_auto_dtype), the same two bytes.
func ResolveDtypeOn(dtype, checkpointDtype string, cc int) (string, error) {
	d, err := ResolveDtype(dtype, checkpointDtype)
	if err == nil && d == "bfloat16" && cc > 0 && cc < BF16MinCapability && (dtype == "" || normDtype(dtype) == "auto") {
		return "float16", nil
	}
	return d, err
}

// DtypeBytes is the size in bytes of one model element under --dtype
// (dtype) for a checkpoint whose torch_dtype is checkpointDtype; see
// ResolveDtype. The v0.19.0 calibration rows for Llama-3.1-8B show why
// explicit float32 matters: 29.98 GiB of weights against 14.99 GiB in
// bfloat16 or float16, twice as many bytes per parameter.
func DtypeBytes(dtype string, checkpointDtype string) (int, error) {
	d, err := ResolveDtype(dtype, checkpointDtype)
	if err != nil {
		return 0, err
	}
	if d == "float32" {
		return 4, nil
	}
	return 2, nil
}

func normDtype(s string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "torch.")
}
