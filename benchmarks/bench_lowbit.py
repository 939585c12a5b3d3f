"""Benchmark the CPU kernel of torchao::_linear_fp_act_{n}bit_weight (parakeet_executorch.lowbit).

Compares, at Parakeet shapes, the low-bit op against fp32 ``torch.nn.functional.linear`` and
against "dequantize the whole weight, then matmul".  Prints a table: milliseconds per call,
GB/s of weight bytes read at M = 1 (packed bytes + scales/zeros for the op; fp32 bytes for
F.linear; packed bytes for dequantize-then-matmul) and GFLOP/s (2*M*N*K) at M = 625.

Usage: PYTHONPATH=src python benchmarks/bench_lowbit.py [--bits 4] [--group-size 32] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import torch

from parakeet_executorch.lowbit import choose_qparams, dequantize_packed, linear_op, pack_lowbit

SHAPES = [(1024, 1024), (1024, 4096), (4096, 1024), (640, 8198)]


def _time(fn, rounds=5, min_time=0.05, min_iter=2):
    """Best (minimum) mean time per call over ``rounds`` rounds; robust to a busy machine."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        n = 0
        while True:
            fn()
            n += 1
            el = time.perf_counter() - t0
            if n >= min_iter and el >= min_time:
                break
        best = min(best, el / n)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--ms", type=str, default="1,625")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    nb, g = args.bits, args.group_size
    op = linear_op(nb)
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, {nb}-bit, group {g}")
    hdr = (f"{'M':>4} {'K':>5} {'N':>5} | {'lowbit ms':>9} {'fp32 ms':>8} {'deq+mm ms':>9} | "
           f"{'lowbit':>8} {'fp32':>8} {'deq+mm':>8} {'unit':>7} | {'vs deq':>6} {'vs fp32':>7}")
    print(hdr)
    print("-" * len(hdr))
    for m in [int(x) for x in args.ms.split(",")]:
        for k, n in SHAPES:
            w = torch.randn(n, k)
            q, s, z = choose_qparams(w, nb, g, "min_max")
            b = pack_lowbit(q, nb)
            a = torch.randn(m, k)
            t_op = _time(lambda: op(a, b, g, s, z))
            t_fp = _time(lambda: torch.nn.functional.linear(a, w))
            t_dq = _time(lambda: torch.nn.functional.linear(a, dequantize_packed(b, s, z, nb, g)))
            if m == 1:
                qbytes = b.numel() + s.numel() * 4 * 2
                vals = (qbytes / t_op / 1e9, w.numel() * 4 / t_fp / 1e9, qbytes / t_dq / 1e9)
                unit = "GB/s"
            else:
                fl = 2 * m * n * k
                vals = (fl / t_op / 1e9, fl / t_fp / 1e9, fl / t_dq / 1e9)
                unit = "GFLOP/s"
            print(f"{m:>4} {k:>5} {n:>5} | {t_op*1e3:>9.3f} {t_fp*1e3:>8.3f} {t_dq*1e3:>9.3f} | "
                  f"{vals[0]:>8.2f} {vals[1]:>8.2f} {vals[2]:>8.2f} {unit:>7} | "
                  f"{t_dq / t_op:>5.2f}x {t_op / t_fp:>6.2f}x")
    print("vs deq = (dequantize-then-matmul time) / (lowbit time): goal >= 2 at M = 1")
    print("vs fp32 = (lowbit time) / (fp32 F.linear time): goal <= 2 at M = 625")


if __name__ == "__main__":
    main()
