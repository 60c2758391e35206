#!/usr/bin/env python3
"""Causal prefill and decode attention through each of PyTorch's
scaled-dot-product backends (flash: FlashAttention-2; cudnn: cuDNN's fused
attention, FlashAttention-3-class on Hopper; efficient), 32 query heads over
8 KV heads expanded, head dim 128, each replayed in a CUDA graph as
gpu_kernels.py times kernels. Prefill at 512 to 32,768 tokens a prompt
(batches that fill the GPU, and one prompt alone), decode at 1 to 256
sequences. Prints JSON: TFLOP/s a prefill, TB/s a decode (the bytes of
every head's keys and values):

    python3 bench/gpu-kernels/attention_sweep.py > attention.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_kernels as g  # noqa: E402

torch = g.require_torch("attention_sweep")
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

F = torch.nn.functional
dev, bf16 = "cuda", torch.bfloat16
heads, kvh, hd = 32, 8, 128
out={"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "prefill": [], "decode": []}
backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}
for name, be in backends.items():
    for batch, seq in [(64, 512), (16, 2048), (4, 8192), (1, 32768), (1, 2048), (1, 8192)]:
        try:
            q = torch.randn(batch, heads, seq, hd, device=dev, dtype=bf16)
            k = torch.randn(batch, kvh, seq, hd, device=dev, dtype=bf16).repeat_interleave(heads // kvh, 1)
            v = torch.randn(batch, kvh, seq, hd, device=dev, dtype=bf16).repeat_interleave(heads // kvh, 1)
            with sdpa_kernel([be]):
                s = g.timed(torch, [lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)], 10)
            flops = 4 * batch * heads * hd * seq * (seq + 1) / 2
            out["prefill"].append({"backend": name, "batch": batch, "seq": seq, "seconds": s, "tflops": flops / s / 1e12})
            del q, k, v
        except Exception as e:
            out["prefill"].append({"backend": name, "batch": batch, "seq": seq, "error": str(e)[:120]})
        torch.cuda.empty_cache()
    for batch, ctx in [(1, 4096), (8, 4096), (64, 4096), (256, 2048), (32, 32768)]:
        try:
            q = torch.randn(batch, heads, 1, hd, device=dev, dtype=bf16)
            k = torch.randn(batch, kvh, ctx, hd, device=dev, dtype=bf16).repeat_interleave(heads // kvh, 1)
            v = torch.randn(batch, kvh, ctx, hd, device=dev, dtype=bf16).repeat_interleave(heads // kvh, 1)
            with sdpa_kernel([be]):
                s = g.timed(torch, [lambda: F.scaled_dot_product_attention(q, k, v)], 10)
            nbytes = 2 * 2 * batch * heads * ctx * hd
            out["decode"].append({"backend": name, "batch": batch, "context": ctx, "seconds": s, "tb_per_s_read_all_heads": nbytes / s / 1e12})
            del q, k, v
        except Exception as e:
            out["decode"].append({"backend": name, "batch": batch, "context": ctx, "error": str(e)[:120]})
        torch.cuda.empty_cache()
print(json.dumps(out, indent=1))
