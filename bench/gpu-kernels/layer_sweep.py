#!/usr/bin/env python3
"""One dense decoder layer of Qwen3 (QK-norm, grouped KV heads, gated
SiLU MLP) in BF16, run forward over a prefill batch the way vLLM's chunked
prefill fills a step (8,192 tokens: 2 prompts of 4,096, 64 of 128, 1 of
8,192), to say what share of the BF16 peak a whole prefill layer reaches,
kernels around the GEMMs included, against the GEMMs alone. Eager PyTorch
(as vLLM runs a step too large for its CUDA graphs) and the same layer in a
CUDA graph; norms and activations are unfused PyTorch, slower than vLLM's
compiled ones, so the whole layer's share is a lower bound. Prints JSON:

    python3 bench/gpu-kernels/layer_sweep.py > layer.json
    python3 bench/gpu-kernels/layer_sweep.py --sustain 90 > sustained.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_kernels as g  # noqa: E402

torch = g.require_torch("layer_sweep")
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

F = torch.nn.functional
dev, bf16 = "cuda", torch.bfloat16
PEAK = 989e12  # H100 and H200 SXM, BF16 dense

MODELS = {
    # config.json: hidden_size, num_attention_heads, num_key_value_heads, head_dim, intermediate_size
    "Qwen3-14B": (5120, 40, 8, 128, 17408),
    "Qwen3-8B": (4096, 32, 8, 128, 12288),
}
BATCHES = [(2, 4096), (64, 128), (1, 8192)]


def rms(x, w, eps=1e-6):
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + eps)).to(x.dtype) * w


def rope(x, cos, sin):
    a, b = x.chunk(2, -1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), -1)


def build(hidden, nq, nkv, hd, inter, batch, seq):
    t = batch * seq
    w = {
        "qkv": torch.randn((nq + 2 * nkv) * hd, hidden, device=dev, dtype=bf16) * 0.02,
        "o": torch.randn(hidden, nq * hd, device=dev, dtype=bf16) * 0.02,
        "gu": torch.randn(2 * inter, hidden, device=dev, dtype=bf16) * 0.02,
        "d": torch.randn(hidden, inter, device=dev, dtype=bf16) * 0.02,
        "n1": torch.ones(hidden, device=dev, dtype=bf16),
        "n2": torch.ones(hidden, device=dev, dtype=bf16),
        "qn": torch.ones(hd, device=dev, dtype=bf16),
        "kn": torch.ones(hd, device=dev, dtype=bf16),
    }
    x = torch.randn(t, hidden, device=dev, dtype=bf16)
    pos = torch.arange(seq, device=dev, dtype=torch.float32).repeat(batch)
    inv = 1.0 / (1e6 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    ang = pos[:, None] * inv[None, :]
    cos, sin = ang.cos().to(bf16)[:, None, :], ang.sin().to(bf16)[:, None, :]

    def gemms():
        h = x @ w["qkv"].t()
        a = torch.empty(t, nq * hd, device=dev, dtype=bf16)
        y = a @ w["o"].t()
        gu = x @ w["gu"].t()
        return y + gu[:, :inter] @ w["d"].t()

    def attention(q, k, v):
        q = q.view(batch, seq, nq, hd).transpose(1, 2)
        k = k.view(batch, seq, nkv, hd).transpose(1, 2).repeat_interleave(nq // nkv, 1)
        v = v.view(batch, seq, nkv, hd).transpose(1, 2).repeat_interleave(nq // nkv, 1)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(t, nq * hd)

    def layer():
        h = rms(x, w["n1"])
        qkv = h @ w["qkv"].t()
        q, k, v = qkv.split([nq * hd, nkv * hd, nkv * hd], -1)
        q = rope(rms(q.view(t, nq, hd), w["qn"]), cos, sin)
        k = rope(rms(k.reshape(t, nkv, hd), w["kn"]), cos, sin)
        o = attention(q.reshape(t, nq * hd), k.reshape(t, nkv * hd), v.contiguous())
        r = x + o @ w["o"].t()
        h = rms(r, w["n2"])
        gu = h @ w["gu"].t()
        a = F.silu(gu[:, :inter]) * gu[:, inter:]
        return r + a @ w["d"].t()

    gemm_flops = 2 * t * hidden * ((nq + 2 * nkv) * hd + nq * hd + 3 * inter)
    attn_flops = 4 * batch * nq * hd * seq * (seq + 1) / 2
    return gemms, layer, gemm_flops, attn_flops


def eager(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / reps


def sustain(seconds):
    """The Qwen3-14B layer at 2 × 4,096 tokens replayed back to back for
    seconds, one line a window of about 2 s: a serving benchmark keeps the
    GPU busy for minutes, at the clocks its power limit allows, where each
    figure above is a fraction of a second at the boost clock."""
    import time
    _, layer, gf, _ = build(*MODELS["Qwen3-14B"], 2, 4096)
    layer()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(g):
        layer()
    start, rows = time.time(), []
    while time.time() - start < seconds:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(160):
            g.replay()
        b.record()
        b.synchronize()
        s = a.elapsed_time(b) / 1e3 / 160
        rows.append({"t_s": round(time.time() - start, 2), "layer_s": s, "layer_share": gf / s / PEAK})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


if len(sys.argv) > 2 and sys.argv[1] == "--sustain":
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "sustained": sustain(float(sys.argv[2]))}, indent=1))
    sys.exit(0)

out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "peak_flops": PEAK, "layers": []}
for name, shape in MODELS.items():
    for batch, seq in BATCHES:
        try:
            gemms, layer, gf, af = build(*shape, batch, seq)
            row = {"model": name, "prompts": batch, "tokens_each": seq, "gemm_flops": gf, "attention_flops": af}
            row["gemms_s"] = eager(gemms)
            row["layer_eager_s"] = eager(layer)
            row["layer_graph_s"] = g.timed(torch, [layer], 20)
            row["gemms_share"] = gf / row["gemms_s"] / PEAK
            row["layer_share_eager"] = gf / row["layer_eager_s"] / PEAK
            row["layer_share_graph"] = gf / row["layer_graph_s"] / PEAK
            out["layers"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        except Exception as e:
            out["layers"].append({"model": name, "prompts": batch, "tokens_each": seq, "error": str(e)[:160]})
        torch.cuda.empty_cache()
print(json.dumps(out, indent=1))
