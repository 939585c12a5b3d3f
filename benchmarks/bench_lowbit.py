"""Benchmark the CPU kernel of torchao::_linear_fp_act_{n}bit_weight (fpa_lowbit).

Compares, at Parakeet shapes, the low-bit op against fp32 ``torch.nn.functional.linear`` and
against "dequantize the whole weight, then matmul".  Prints a table: milliseconds per call,
GB/s of weight bytes read at M = 1 (packed bytes + scales/zeros for the op; fp32 bytes for
F.linear; packed bytes for dequantize-then-matmul) and GFLOP/s (2*M*N*K) at M = 625.

With ``--executorch`` it also times the C++ ExecuTorch kernel (``torchao::_linear_fp_act_{n}bit_weight.out``,
built and loaded by ``fpa_lowbit.executorch_kernels``) through a one-layer .pte in the
Python runtime (portable, no delegate).

Usage: PYTHONPATH=src python benchmarks/bench_lowbit.py [--bits 4] [--group-size 32] [--threads N] [--executorch]
"""

from __future__ import annotations

import argparse
import time

import torch
from fpa_lowbit import choose_qparams, dequantize_packed, linear_op, pack_lowbit

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


def _time_executorch(w, nb, g, a):
    """Time one quantized linear exported to a portable .pte and run by the Python runtime."""
    import tempfile

    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from fpa_lowbit import UIntxWeightOnlyConfig
    from torchao.quantization import quantize_

    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    lin.weight.data.copy_(w)
    quantize_(lin, UIntxWeightOnlyConfig(bitwidth=nb, group_size=g, uintx_choose_qparams_algorithm="min_max"))
    ep = torch.export.export(lin, (a,))
    et = to_edge_transform_and_lower(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch()
    with tempfile.NamedTemporaryFile(suffix=".pte") as f:
        f.write(et.buffer)
        f.flush()
        method = Runtime.get().load_program(f.name).load_method("forward")
        return _time(lambda: method.execute([a]), rounds=3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--ms", type=str, default="1,625")
    ap.add_argument("--executorch", action="store_true", help="also time the ExecuTorch C++ kernel via a .pte")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    nb, g = args.bits, args.group_size
    op = linear_op(nb)
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, {nb}-bit, group {g}")
    hdr = (
        f"{'M':>4} {'K':>5} {'N':>5} | {'lowbit ms':>9} {'fp32 ms':>8} {'deq+mm ms':>9} | "
        f"{'lowbit':>8} {'fp32':>8} {'deq+mm':>8} {'unit':>7} | {'vs deq':>6} {'vs fp32':>7}"
    )
    if args.executorch:
        from fpa_lowbit import executorch_kernels

        executorch_kernels.load()
        hdr += f" | {'ET ms':>8} {'ET':>8}"
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
            print(
                f"{m:>4} {k:>5} {n:>5} | {t_op * 1e3:>9.3f} {t_fp * 1e3:>8.3f} {t_dq * 1e3:>9.3f} | "
                f"{vals[0]:>8.2f} {vals[1]:>8.2f} {vals[2]:>8.2f} {unit:>7} | "
                f"{t_dq / t_op:>5.2f}x {t_op / t_fp:>6.2f}x",
                end="",
            )
            if args.executorch:
                t_et = _time_executorch(w, nb, g, a)
                v = (b.numel() + s.numel() * 8) / t_et / 1e9 if m == 1 else 2 * m * n * k / t_et / 1e9
                print(f" | {t_et * 1e3:>8.3f} {v:>8.2f}", end="")
            print()
    print("vs deq = (dequantize-then-matmul time) / (lowbit time): goal >= 2 at M = 1")
    print("vs fp32 = (lowbit time) / (fp32 F.linear time): goal <= 2 at M = 625")


if __name__ == "__main__":
    main()
