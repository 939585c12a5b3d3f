"""The GEMM's last micro-panel of A: one thread, 1024 x 1024, 4-bit, M = 120, 125 and 132 (10, 10 + 5/12 and 11
micro-panels of 12 rows at AVX-512), best of 15 rounds of 0.1 s each, interleaved. With the last panel padded to 12
rows, t(125) / t(120) follows 132 / 120 = 1.10; computing only its valid rows, 125 / 120 = 1.04.

    python tail_rows.py new                 # the installed library
    python tail_rows.py old OLD/libfpa_lowbit_cpu.so
"""

import sys
import time
from pathlib import Path

import torch
from fpa_lowbit import _native, choose_qparams, pack_lowbit

if len(sys.argv) > 2:
    _native.library_path = lambda: Path(sys.argv[2])  # another build of the library
g = torch.Generator().manual_seed(0)
K = N = 1024
q, s, z = choose_qparams(torch.randn(N, K, generator=g), 4, 32)[:3]
packed = pack_lowbit(q, 4)


def product(rows: int):
    a, y = torch.randn(rows, K, generator=g), torch.empty(rows, N)
    return lambda: _native.linear(a, packed, 32, s, z, 4, out=y, num_threads=1)


calls = {rows: product(rows) for rows in (120, 125, 132)}
best = dict.fromkeys(calls, float("inf"))
for _ in range(15):
    for rows, call in calls.items():
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.1:
            call()
            n += 1
        best[rows] = min(best[rows], (time.perf_counter() - t0) / n)
ms = {rows: round(t * 1e3, 3) for rows, t in best.items()}
print(sys.argv[1], ms, f"t125/t120 = {best[125] / best[120]:.3f}, t132/t120 = {best[132] / best[120]:.3f}")
