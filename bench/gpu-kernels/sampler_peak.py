#!/usr/bin/env python3
"""The peak memory of the sort path of vLLM's top-k/top-p sampler (0.11.1-0.16,
vllm/v1/sample/ops/topk_topp_sampler.py's apply_top_k_top_p and random_sample),
run as the profile run's dummy sampler runs it: a float32 copy of the bf16
logits, temperature 0.5, top-p 0.9, top-k V - 1, then the random sample. It
prints, per vocabulary and row count, the CUDA caching allocator's peak beyond
the bf16 logits, in bytes and per logit (memory's sortBytesPerLogit):

    python3 bench/gpu-kernels/sampler_peak.py > sampler-sort.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_kernels  # noqa: E402

torch = gpu_kernels.require_torch("sampler_peak")

def apply_top_k_top_p(logits, k, p):
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort.masked_fill_(top_k_mask, -float("inf"))
    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return logits_sort.scatter(dim=-1, index=logits_idx, src=logits_sort)
def random_sample(probs):
    q = torch.empty_like(probs)
    q.exponential_()
    return probs.div_(q).argmax(dim=-1).view(-1)
out = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0), "runs": []}
for vocab in [128256, 151936, 201088]:
    for rows in [256, 1024]:
        torch.cuda.empty_cache()
        logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)
        k = torch.full((rows,), vocab - 1, device="cuda", dtype=torch.int32)
        p = torch.full((rows,), 0.9, device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        x = logits.to(torch.float32)
        x.div_(torch.full((rows, 1), 0.5, device="cuda"))
        x = apply_top_k_top_p(x, k, p)
        torch.cuda.synchronize()
        topk_peak = torch.cuda.max_memory_allocated() - base
        probs = x.softmax(dim=-1, dtype=torch.float32)
        ids = random_sample(probs)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        n = rows * vocab
        out["runs"].append({"vocab": vocab, "rows": rows, "logits_bf16_bytes": 2 * n,
                            "peak_beyond_logits_bytes": peak, "topk_topp_peak_bytes": topk_peak,
                            "bytes_per_logit": round(peak / n, 3), "topk_topp_bytes_per_logit": round(topk_peak / n, 3)})
        del logits, k, p, x, probs, ids
print(json.dumps(out, indent=1))
