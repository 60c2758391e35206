#!/usr/bin/env python3
"""The reduction-length sweep: dense GEMMs (torch.mm) and batched GEMMs
(torch.bmm, the experts' stand-in) at fixed M and N with K from 64 to 8192,
each replayed in a CUDA graph as gpu_kernels.py times them. A GEMM's tiles
walk K behind a pipeline whose fill and drain do no math, so its share of
the peak is about plateau x K / (K + k_half); sim's TestReductionLengthMeasured
reads the table this writes (kernel-table format) and compares k_half with
the serving fit's (Roofline.expertTime):

    python3 bench/gpu-kernels/reduction_sweep.py > reduction.csv
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_kernels as g  # noqa: E402

torch = g.require_torch("reduction_sweep")
dev = "cuda"; bf16 = torch.bfloat16
l2 = torch.cuda.get_device_properties(0).L2_cache_size
print(g.MAGIC); print("# gpu:", torch.cuda.get_device_name(0)); print("# driver:", g.driver_version())
print("# torch:", torch.__version__); print("# cuda:", torch.version.cuda); print(g.COLUMNS)
for m, n in [(4096, 4096), (8192, 8192), (1024, 4096)]:
    for k in [64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 8192]:
        c = g.copies(2 * (m * k + k * n), l2)
        a = [torch.randn(m, k, device=dev, dtype=bf16) for _ in range(c)]
        w = [torch.randn(k, n, device=dev, dtype=bf16) for _ in range(c)]
        s = g.timed(torch, [lambda a=a[i], w=w[i]: a @ w for i in range(c)], 20)
        print(f"gemm,bf16,m={m} n={n} k={k},,{s:.9e},{2*m*n*k:.9e},{2*(m*k+k*n+m*n):.9e}", flush=True)
        del a, w
for e, t, n in [(64, 512, 4096), (128, 256, 4096), (32, 1024, 2880)]:
    for k in [96, 192, 384, 768, 1536, 2880, 4096]:
        a = torch.randn(e, t, k, device=dev, dtype=bf16); w = torch.randn(e, k, n, device=dev, dtype=bf16)
        s = g.timed(torch, [lambda: torch.bmm(a, w)], 20)
        print(f"grouped_gemm,bf16,experts={e} m={t} n={n} k={k},{t},{s:.9e},{2*e*t*n*k:.9e},{2*e*(t*k+k*n+t*n):.9e}", flush=True)
        del a, w
