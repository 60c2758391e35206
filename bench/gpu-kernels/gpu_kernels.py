#!/usr/bin/env python3
"""Times the kernels headroom's simulated clock prices, on one GPU with
PyTorch and no vLLM, and writes them as a kernel table that
`headroom simulate --calibration FILE` reads (package sim, KernelTable).

    python3 bench/gpu-kernels/gpu_kernels.py [--catalog model/catalog] [--out FILE] [--quick]

What it times, each kernel after warm-up, as the median of CUDA-event timed
replays of a CUDA graph (as vLLM replays its decode steps, so the CPU's
launches leave no gaps), the graph cycling through distinct operands four
times the L2 (as a model's layers each read their own weights):
  - gemm: dense BF16 GEMMs of the catalog's shapes (each model's QKV, output,
    gate-up and down projections) at 1 to 8192 token rows, and on FP8
    tensor cores the same shapes in FP8 (torch._scaled_mm, per-tensor
    scales, a BF16 result);
  - grouped_gemm: the routed experts' GEMMs of the catalog's MoE shapes at 1
    to 4096 tokens per expert, as one batched matmul over the experts
    (torch.bmm: what a grouped GEMM must at least do; vLLM's fused_moe is a
    Triton kernel of its own that pads each expert's tokens to its tile, so
    these rows are a reference, not the clock's curve);
  - small_kernel: one elementwise kernel over 1 to 256 rows (add, mul,
    silu), the least a kernel of almost no work holds the GPU;
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


def require_torch(name):
    """PyTorch with a CUDA device, or one line of why not and exit 2."""
    try:
        import torch
    except ImportError:
        print(f"{name}: PyTorch is not installed (pip install torch)", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print(f"{name}: no CUDA device visible to PyTorch", file=sys.stderr)
        sys.exit(2)
    return torch


def timed(torch, fns, reps):
    """Median seconds of one call, over reps replays of fns run back to back.

    fns are calls on distinct operands, so a kernel reads its weights from
    memory and not from the L2 left by the call before (a model's layers
    each have their own); they are captured in one CUDA graph, as vLLM's
    decode steps are, so the CPU's launches leave no gaps between them.
    Where capture fails the calls run eagerly."""
    for _ in range(2):
        for fn in fns:
            fn()
    torch.cuda.synchronize()
    run = None
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for fn in fns:
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for fn in fns:
                fn()
        run = g.replay
    except Exception:
        torch.cuda.synchronize()

        def run():
            for fn in fns:
                fn()
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / len(fns))
    times.sort()
    return times[len(times) // 2]


def copies(nbytes, l2):
    """Distinct operand sets to cycle through so that together they are
    four times the L2 (at most 64)."""
    return max(1, min(64, -(-4 * l2 // max(nbytes, 1))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", default=os.path.join(os.path.dirname(__file__), "..", "..", "model", "catalog"))
    ap.add_argument("--out", default="-")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions (a smoke run)")
    args = ap.parse_args()
    torch = require_torch("gpu-kernels")
    F = torch.nn.functional
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    reps = 5 if args.quick else 20
    dense, moe = catalog_shapes(args.catalog)
    if not dense:
        print(f"gpu-kernels: no model configs under {args.catalog}/configs", file=sys.stderr)
        return 2
    if args.quick:
        dense, moe = dense[:4], moe[:2]
    out = sys.stdout if args.out == "-" else open(args.out, "w")
    props = torch.cuda.get_device_properties(0)
    print(MAGIC, file=out)
    print(f"# gpu: {props.name}", file=out)
    print(f"# driver: {driver_version()}", file=out)
    print(f"# torch: {torch.__version__}", file=out)
    print(f"# cuda: {torch.version.cuda}", file=out)
    print(f"# date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}", file=out)
    print(COLUMNS, file=out)
    out.flush()

    class Rows(list):
        """Written as they are timed, so a run cut short keeps what it did."""

        def append(self, r):
            super().append(r)
            kind, dtype, shape, tpe, s, flops, nbytes = r
            print(f"{kind},{dtype},{shape},{tpe},{s:.9e},{flops:.9e},{nbytes:.9e}", file=out, flush=True)

    rows = Rows()
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or 64 << 20
    fp8 = getattr(torch, "float8_e4m3fn", None) is not None and hasattr(torch, "_scaled_mm") \
        and torch.cuda.get_device_capability(0) >= (8, 9)

    def note(what, err):
        print(f"gpu-kernels: skipped {what}: {err}", file=sys.stderr)

    for i, (k, n) in enumerate(dense):
        print(f"gpu-kernels: gemm {i + 1}/{len(dense)} n={n} k={k}", file=sys.stderr, flush=True)
        for m in ([1, 16, 256, 8192] if args.quick else [1, 8, 16, 64, 256, 1024, 4096, 8192]):
            try:
                c = copies(2 * (m * k + k * n), l2)
                a = [torch.randn(m, k, device=dev, dtype=bf16) for _ in range(c)]
                w = [torch.randn(k, n, device=dev, dtype=bf16) for _ in range(c)]
                s = timed(torch, [lambda a=a[i], w=w[i]: a @ w for i in range(c)], reps)
                rows.append(("gemm", "bf16", f"m={m} n={n} k={k}", "", s, 2 * m * n * k, 2 * (m * k + k * n + m * n)))
                if fp8 and k % 16 == 0 and n % 16 == 0:
                    # per-tensor scaled FP8 (what vLLM's FP8 checkpoints run on
                    # Hopper): operands of one byte, a BF16 result
                    a8 = [x.to(torch.float8_e4m3fn) for x in a]
                    w8 = [x.t().contiguous().to(torch.float8_e4m3fn).t() for x in w]
                    one = torch.ones((), device=dev, dtype=torch.float32)
                    s = timed(torch, [lambda a=a8[i], w=w8[i]: torch._scaled_mm(a, w, scale_a=one, scale_b=one, out_dtype=bf16)
                                      for i in range(c)], reps)
                    rows.append(("gemm", "fp8", f"m={m} n={n} k={k}", "", s, 2 * m * n * k, m * k + k * n + 2 * m * n))
                    del a8, w8
                del a, w
            except Exception as e:  # one shape's failure leaves the others
                note(f"gemm m={m} n={n} k={k}", e)
            torch.cuda.empty_cache()

    for experts, k, n in moe:
        print(f"gpu-kernels: grouped_gemm experts={experts} n={n} k={k}", file=sys.stderr, flush=True)
        for t in [1, 2, 4, 8, 16, 64, 256, 1024, 4096]:
            try:
                e = experts
                # keep a batch of experts within memory: the curve is per expert
                while e > 1 and e * (t * k + k * n + t * n) * 2 > 8 << 30:
                    e //= 2
                a = torch.randn(e, t, k, device=dev, dtype=bf16)
                w = torch.randn(e, k, n, device=dev, dtype=bf16)
                s = timed(torch, [lambda: torch.bmm(a, w)], reps)
                rows.append(("grouped_gemm", "bf16", f"experts={e} m={t} n={n} k={k}", t, s,
                             2 * e * t * n * k, 2 * e * (t * k + k * n + t * n)))
                del a, w
            except Exception as e:
                note(f"grouped_gemm experts={experts} m={t} n={n} k={k}", e)
            torch.cuda.empty_cache()

    # kernels of almost no work (a decode step's norms, activations, cache
    # writes): what one holds the GPU inside a CUDA graph, one elementwise
    # kernel over a few rows
    for rows_, h in [(1, 4096), (1, 8192), (16, 4096), (256, 8192)]:
        try:
            x, y = torch.randn(rows_, h, device=dev, dtype=bf16), torch.randn(rows_, h, device=dev, dtype=bf16)
            z = torch.empty_like(x)
            ops = {"add": lambda: torch.add(x, y, out=z), "mul": lambda: torch.mul(x, y, out=z),
                   "silu": lambda: torch.nn.functional.silu(x, inplace=True)}
            for op, fn in ops.items():
                s = timed(torch, [fn] * 64, reps)
                moved = (3 if op != "silu" else 2) * rows_ * h * 2
                rows.append(("small_kernel", "bf16", f"op={op} rows={rows_} hidden={h}", "", s, rows_ * h, moved))
            del x, y, z
        except Exception as e:
            note(f"small_kernel rows={rows_} hidden={h}", e)

    heads, kv_heads, hd = 32, 8, 128
    for seq in [512, 2048, 8192]:
        try:
            q = torch.randn(1, heads, seq, hd, device=dev, dtype=bf16)
            kk = torch.randn(1, kv_heads, seq, hd, device=dev, dtype=bf16)
            v = torch.randn(1, kv_heads, seq, hd, device=dev, dtype=bf16)
            s = timed(torch, [lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True)], reps)
            pairs = seq * (seq + 1) / 2
            rows.append(("attention_prefill", "bf16", f"batch=1 heads={heads} kv_heads={kv_heads} head_dim={hd} seq={seq} causal", "", s,
                         4 * heads * hd * pairs, 2 * (2 * heads + 2 * kv_heads) * seq * hd))
            del q, kk, v
        except Exception as e:
            note(f"attention_prefill seq={seq}", e)
    for batch, ctx in [(1, 4096), (8, 4096), (64, 4096), (256, 2048)]:
        try:
            q = torch.randn(batch, heads, 1, hd, device=dev, dtype=bf16)
            kk = torch.randn(batch, kv_heads, ctx, hd, device=dev, dtype=bf16)
            v = torch.randn(batch, kv_heads, ctx, hd, device=dev, dtype=bf16)
            s = timed(torch, [lambda: F.scaled_dot_product_attention(q, kk, v, enable_gqa=True)], reps)
            # the bytes a paged decode must read: the kv heads' keys and values
            rows.append(("attention_decode", "bf16", f"batch={batch} context={ctx} kv_heads={kv_heads} head_dim={hd}", "", s,
                         4 * batch * heads * hd * ctx, 2 * 2 * batch * kv_heads * ctx * hd))
            del q, kk, v
        except Exception as e:
            note(f"attention_decode batch={batch} context={ctx}", e)

    if out is not sys.stdout:
        out.close()
    print(f"gpu-kernels: {len(rows)} kernels", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
