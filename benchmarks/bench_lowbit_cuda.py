"""Benchmark torchao::_linear_fp_act_{n}bit_weight (fpa_lowbit) on an NVIDIA GPU.

For M in {1, 625} and (K, N) at Parakeet's shapes, bf16 and fp32 activations, times:

* ``lowbit``: the registered op (Triton kernel at small M when triton is importable, see
  ``ops.cuda_backend()``; the PyTorch-level kernel otherwise and at large M),
* ``torch-path``: the PyTorch-level kernel (``ops.linear_reference_kernel``) called directly,
* ``dense``: ``F.linear`` with the dense weight in the activation dtype,
* ``deq+mm``: dequantize the whole packed weight, then ``F.linear``.

Each time is the median of ``--iters`` (>= 20) calls measured one by one with CUDA events,
after ``--warmup`` calls.  At M = 1 it reports GB/s of weight bytes read (packed bytes + S and
Z for the low-bit paths; the dense weight for F.linear); at M = 625 TFLOP/s (2*M*N*K).
Prints a markdown table (and writes it to ``--out`` when given).

Usage: PYTHONPATH=src python benchmarks/bench_lowbit_cuda.py [--bits 4] [--group-size 32] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import statistics

import torch
import torch.nn.functional as F
from fpa_lowbit import choose_qparams, dequantize_packed, linear_op, ops, pack_lowbit

SHAPES = [(1024, 1024), (1024, 4096), (4096, 1024), (640, 8198)]
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def _median_ms(fn, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _graph_ms(fn, warmup: int, iters: int, reps: int = 20) -> float:
    """GPU time per call without host launch overhead: ``reps`` calls captured in one CUDA graph,
    each replay timed with CUDA events; median of ``iters`` replays divided by ``reps``."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    return _median_ms(graph.replay, warmup, iters) / reps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=32)
    ap.add_argument("--ms", type=str, default="1,625")
    ap.add_argument("--dtypes", type=str, default="bf16,fp32")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", type=str, default=None, help="also write the markdown report here")
    args = ap.parse_args(argv)
    if args.iters < 20:
        ap.error("--iters must be >= 20")
    if not torch.cuda.is_available():
        raise SystemExit("bench_lowbit_cuda.py needs an NVIDIA GPU")
    dev = torch.device("cuda")
    nb, g = args.bits, args.group_size
    op = linear_op(nb)
    try:
        import triton

        tri = triton.__version__
    except ImportError:
        tri = "not installed"
    lines = [
        f"# lowbit op on CUDA: {torch.cuda.get_device_name(dev)}",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- device: {torch.cuda.get_device_name(dev)} "
        f"({torch.cuda.get_device_properties(dev).multi_processor_count} SMs)",
        f"- torch {torch.__version__} (CUDA {torch.version.cuda}), triton {tri}",
        f"- op: torchao::_linear_fp_act_{nb}bit_weight, group_size {g}; CUDA backend at M <= {ops.SMALL_M}: "
        f"`{ops.cuda_backend() if nb == 4 else 'torch'}` (`torch` above)",
        f"- GPU µs: {20} calls captured in one CUDA graph, CUDA events around each replay, median of {args.iters} "
        f"replays after {args.warmup} warm-up replays, divided by 20 (GPU time, no host launch overhead); "
        f"the GB/s and TFLOP/s columns use it",
        f"- eager µs: CUDA events around each eager call, median of {args.iters} after {args.warmup} warm-up calls "
        "(includes the Python dispatch and launch overhead of this VM)",
        "- M = 1: GB/s of weight bytes read (low-bit: packed + S + Z; dense: N*K*dtype); M = 625: TFLOP/s (2*M*N*K)",
        "- lowbit = the registered op; torch-path = its PyTorch-level kernel called directly; dense = F.linear with "
        "the dense weight in the activation dtype; deq+mm = dequantize whole weight then F.linear",
        "",
        "| dtype | M | K | N | lowbit GPU µs | torch-path GPU µs | dense GPU µs | deq+mm GPU µs | lowbit | torch-path "
        "| dense | deq+mm | unit | dense/lowbit | deq+mm/lowbit | lowbit eager µs | dense eager µs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    for dname in args.dtypes.split(","):
        dt = DTYPES[dname]
        for m in [int(x) for x in args.ms.split(",")]:
            for k, n in SHAPES:
                torch.manual_seed(0)
                w = torch.randn(n, k)
                q, s, z = choose_qparams(w, nb, g, "min_max")
                b = pack_lowbit(q, nb).to(dev)
                s, z = s.to(dt).to(dev), z.to(dt).to(dev)
                wd = w.to(dt).to(dev)
                a = torch.randn(m, k, device=dev).to(dt)
                f_op = lambda: op(a, b, g, s, z)  # noqa: E731
                f_tp = lambda: ops.linear_reference_kernel(a, b, g, s, z, nb)  # noqa: E731
                f_fp = lambda: F.linear(a, wd)  # noqa: E731
                f_dq = lambda: F.linear(a, dequantize_packed(b, s, z, nb, g))  # noqa: E731
                t_op, t_tp, t_fp, t_dq = (_graph_ms(f, args.warmup, args.iters) for f in (f_op, f_tp, f_fp, f_dq))
                e_op, e_fp = (_median_ms(f, args.warmup, args.iters) for f in (f_op, f_fp))
                ts = (t_op, t_tp, t_fp, t_dq)
                if m == 1:
                    qbytes = b.numel() + 2 * s.numel() * s.element_size()
                    dbytes = wd.numel() * wd.element_size()
                    vals = [qbytes / (t * 1e-3) / 1e9 for t in (t_op, t_tp)]
                    vals += [dbytes / (t_fp * 1e-3) / 1e9, qbytes / (t_dq * 1e-3) / 1e9]
                    unit = "GB/s"
                else:
                    fl = 2 * m * n * k
                    vals = [fl / (t * 1e-3) / 1e12 for t in ts]
                    unit = "TFLOP/s"
                fmt = "{:.0f}" if unit == "GB/s" else "{:.1f}"
                row = (
                    f"| {dname} | {m} | {k} | {n} | "
                    + " | ".join(f"{t * 1e3:.1f}" for t in ts)
                    + " | "
                    + " | ".join(fmt.format(v) for v in vals)
                    + f" | {unit} | {t_fp / t_op:.2f} | {t_dq / t_op:.2f} | {e_op * 1e3:.1f} | {e_fp * 1e3:.1f} |"
                )
                lines.append(row)
                print(row, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
