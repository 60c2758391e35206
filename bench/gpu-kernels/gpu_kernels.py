#!/usr/bin/env python3
"""Times the kernels headroom's simulated clock prices, on one GPU with
PyTorch and no vLLM, and writes them as a kernel table that
`headroom simulate --calibration FILE` reads (package sim, KernelTable).

    python3 bench/gpu-kernels/gpu_kernels.py [--catalog model/catalog] [--out FILE] [--quick]

What it times, each kernel after warm-up, as the median of CUDA-event timed
repetitions:
  - gemm: dense BF16 GEMMs of the catalog's shapes (each model's QKV, output,
    gate-up and down projections) at 1 to 8192 token rows;
  - grouped_gemm: the routed experts' GEMMs of the catalog's MoE shapes at 1
    to 4096 tokens per expert, as one batched matmul over the experts
    (torch.bmm: what a grouped GEMM must at least do; vLLM's fused_moe is a
    Triton kernel of its own, so this is the shape of the curve, not its
    level);
  - attention_prefill and attention_decode: scaled dot-product attention
    (torch.nn.functional.scaled_dot_product_attention, which takes
    FlashAttention where PyTorch has it, or flash_attn's kernels when that
    package is installed) for a causal prompt and for a batch of decodes
    over a context.

Every row carries the FLOPs and bytes the kernel must compute and move at
least, so the reader divides them by the seconds; the header names the GPU,
the driver, torch and CUDA (the table's source).
"""
import argparse
import datetime
import glob
import json
import os
import subprocess
import sys

COLUMNS = "kind,dtype,shape,tokens_per_expert,seconds,flops,bytes"
MAGIC = "# headroom gpu-kernels 1"


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return "unknown"


def catalog_shapes(root):
    """Dense and MoE shapes from the catalog's config.json copies."""
    dense, moe = set(), set()
    for path in sorted(glob.glob(os.path.join(root, "configs", "*.json"))):
        try:
            with open(path) as f:
                c = json.load(f)
        except (OSError, ValueError):
            continue
        c = c.get("text_config", c)
        h = c.get("hidden_size")
        heads = c.get("num_attention_heads")
        if not h or not heads:
            continue
        hd = c.get("head_dim") or h // heads
        kv = c.get("num_key_value_heads") or heads
        dense.add((h, (heads + 2 * kv) * hd))  # QKV
        dense.add((heads * hd, h))             # output
        inter = c.get("intermediate_size")
        if inter:
            dense.add((h, 2 * inter))          # gate-up
            dense.add((inter, h))              # down
        experts = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts")
        einter = c.get("moe_intermediate_size") or (inter if experts else None)
        if experts and einter:
            moe.add((int(experts), h, 2 * einter))
    return sorted(dense), sorted(moe)


def timed(torch, fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", default=os.path.join(os.path.dirname(__file__), "..", "..", "model", "catalog"))
    ap.add_argument("--out", default="-")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions (a smoke run)")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("gpu-kernels: PyTorch is not installed (pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu-kernels: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    reps = 5 if args.quick else 20
    dense, moe = catalog_shapes(args.catalog)
    if not dense:
        print(f"gpu-kernels: no model configs under {args.catalog}/configs", file=sys.stderr)
        return 2
    if args.quick:
        dense, moe = dense[:4], moe[:2]
    rows = []

    for k, n in dense:
        for m in ([1, 16, 256, 8192] if args.quick else [1, 8, 16, 64, 256, 1024, 4096, 8192]):
            a = torch.randn(m, k, device=dev, dtype=bf16)
            w = torch.randn(k, n, device=dev, dtype=bf16)
            s = timed(torch, lambda: a @ w, reps)
            rows.append(("gemm", "bf16", f"m={m} n={n} k={k}", "", s, 2 * m * n * k, 2 * (m * k + k * n + m * n)))
            del a, w

    for experts, k, n in moe:
        for t in [1, 4, 16, 64, 256, 1024, 4096]:
            e = experts
            # keep a batch of experts within memory: the curve is per expert
            while e > 1 and e * (t * k + k * n + t * n) * 2 > 8 << 30:
                e //= 2
            a = torch.randn(e, t, k, device=dev, dtype=bf16)
            w = torch.randn(e, k, n, device=dev, dtype=bf16)
            s = timed(torch, lambda: torch.bmm(a, w), reps)
            rows.append(("grouped_gemm", "bf16", f"experts={e} m={t} n={n} k={k}", t, s,
                         2 * e * t * n * k, 2 * e * (t * k + k * n + t * n)))
            del a, w

    heads, kv_heads, hd = 32, 8, 128
    for seq in [512, 2048, 8192]:
        q = torch.randn(1, heads, seq, hd, device=dev, dtype=bf16)
        kk = torch.randn(1, heads, seq, hd, device=dev, dtype=bf16)
        v = torch.randn(1, heads, seq, hd, device=dev, dtype=bf16)
        s = timed(torch, lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=True), reps)
        pairs = seq * (seq + 1) / 2
        rows.append(("attention_prefill", "bf16", f"batch=1 heads={heads} head_dim={hd} seq={seq} causal", "", s,
                     4 * heads * hd * pairs, 2 * 4 * heads * seq * hd))
        del q, kk, v
    for batch, ctx in [(1, 4096), (64, 4096), (256, 2048)]:
        q = torch.randn(batch, heads, 1, hd, device=dev, dtype=bf16)
        kk = torch.randn(batch, kv_heads, ctx, hd, device=dev, dtype=bf16).repeat_interleave(heads // kv_heads, 1)
        v = torch.randn(batch, kv_heads, ctx, hd, device=dev, dtype=bf16).repeat_interleave(heads // kv_heads, 1)
        s = timed(torch, lambda: F.scaled_dot_product_attention(q, kk, v), reps)
        # the bytes a paged decode must read: the kv heads' keys and values
        rows.append(("attention_decode", "bf16", f"batch={batch} context={ctx} kv_heads={kv_heads} head_dim={hd}", "", s,
                     4 * batch * heads * hd * ctx, 2 * 2 * batch * kv_heads * ctx * hd))
        del q, kk, v

    out = sys.stdout if args.out == "-" else open(args.out, "w")
    props = torch.cuda.get_device_properties(0)
    print(MAGIC, file=out)
    print(f"# gpu: {props.name}", file=out)
    print(f"# driver: {driver_version()}", file=out)
    print(f"# torch: {torch.__version__}", file=out)
    print(f"# cuda: {torch.version.cuda}", file=out)
    print(f"# date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}", file=out)
    print(COLUMNS, file=out)
    for kind, dtype, shape, tpe, s, flops, nbytes in rows:
        print(f"{kind},{dtype},{shape},{tpe},{s:.9e},{flops:.9e},{nbytes:.9e}", file=out)
    if out is not sys.stdout:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
