"""Benchmark fpa_lowbit's CPU kernels against fp32, side by side in one run, on this machine.

For each shape (M activation rows, K in-features, N out-features; 4-bit, group 32 by default) it times:

* ``fp32``: ``torch.nn.functional.linear`` with the float weight (PyTorch's own GEMM/GEMV);
* ``lowbit``: the eager op ``torchao::_linear_fp_act_4bit_weight`` on fpa_lowbit's compiled kernels;
* ``lowbit-torch``: the same op on the PyTorch-level kernel (``FPA_LOWBIT_CPU_BACKEND=torch``, the previous path);
* ``Linear``: what a transformers user runs, a biased ``nn.Linear`` called as a module under ``inference_mode``, fp32
  against the same layer after ``quantize_(UIntxWeightOnlyConfig)`` (the op, the bias and the subclass's dispatch);
* ``xnnpack-fp32 .pte``: one fp32 ``nn.Linear`` lowered to XNNPACK, run by ExecuTorch's Python runtime;
* ``lowbit .pte``: one quantized linear in a .pte, run by the same runtime on fpa_lowbit's ExecuTorch kernel
  (ExecuTorch's thread pool).

It also measures this machine's ceilings: memory bandwidth (a large tensor copy, bytes read + written) and the FMA
ceiling of the kernels' instruction set (``fpa_lowbit._native.fma_peak_gflops``), and reports each kernel's GB/s
(weight bytes read, at M = 1) or GFLOP/s (2MNK, at M > 1) as a fraction of them.  Prints a Markdown table and
writes it (with JSON) to ``--out``.  Goals of the low-bit library: M = 1 lowbit >= 3x fp32 for K, N >= 1024;
M = 625 and 3000 lowbit >= 1.0x fp32 in eager and lowbit .pte >= 0.8x xnnpack-fp32 .pte.

    python benchmarks/bench_lowbit.py --threads 2 --out benchmarks/results/lowbit_cpu
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch
from fpa_lowbit import UIntxWeightOnlyConfig, _native, choose_qparams, linear_op, pack_lowbit

SHAPES_M1 = [(1024, 1024), (1024, 4096), (4096, 1024), (4096, 4096)]
SHAPES_LARGE = [(1024, 1024), (1024, 4096), (4096, 1024)]  # the encoder's projections and feed-forward layers


def _time(fn, rounds=5, min_time=0.2, min_iter=3, settle=0.3):
    """Best (minimum over rounds) mean seconds per call.

    Waits ``settle`` seconds first, so the previous measurement's spinning threads (OpenMP's, XNNPACK's, the
    kernels' own pool) have gone to sleep and do not compete for the cores; then runs ``fn`` for a warm-up of
    ``min_time`` seconds (caches, thread wake-up, first-call allocations) before timing.
    """
    time.sleep(settle)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < min_time:
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


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ceilings() -> dict:
    """This machine's roofs, measured now: memory bandwidth (GB/s, a 256 MiB copy: read + write), the FMA ceiling
    of the kernels' instruction set (GFLOP/s, a register-only FMA loop on the benchmark's threads) and, for
    reference, PyTorch's fp32 GEMM at 2048^3."""
    src = torch.empty(64 << 20, dtype=torch.float32).fill_(1.0)  # far past every cache
    dst = torch.empty_like(src)
    t = _time(lambda: dst.copy_(src), rounds=5)
    bw = 2 * src.numel() * 4 / t / 1e9
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    tg = _time(lambda: torch.mm(a, b), rounds=3)
    fma = max(_native.fma_peak_gflops() for _ in range(3))
    return {"memory_gbps": bw, "fma_gflops": fma, "fp32_gemm_gflops": 2 * 2048**3 / tg / 1e9}


def _pte_method(module: torch.nn.Module, example: torch.Tensor, xnnpack: bool):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.runtime import Runtime

    ep = torch.export.export(module, (example,))
    et = to_edge_transform_and_lower(
        ep,
        partitioner=[XnnpackPartitioner()] if xnnpack else None,
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    ).to_executorch()
    with tempfile.NamedTemporaryFile(suffix=".pte") as f:
        f.write(et.buffer)
        f.flush()
        return Runtime.get().load_program(f.name).load_method("forward")


def bench_shape(m: int, k: int, n: int, bits: int, group: int, pte: bool) -> dict:
    torch.manual_seed(0)
    w = torch.randn(n, k)
    a = torch.randn(m, k)
    q, s, z = choose_qparams(w, bits, group, "min_max")
    b = pack_lowbit(q, bits)
    op = linear_op(bits)
    row = {"M": m, "K": k, "N": n}
    row["fp32"] = _time(lambda: torch.nn.functional.linear(a, w))
    row["lowbit"] = _time(lambda: op(a, b, group, s, z))
    os.environ["FPA_LOWBIT_CPU_BACKEND"] = "torch"
    try:
        row["lowbit_torch"] = _time(lambda: op(a, b, group, s, z), rounds=3)
    finally:
        del os.environ["FPA_LOWBIT_CPU_BACKEND"]
    if pte:
        from torchao.quantization import quantize_

        lin = torch.nn.Linear(k, n, bias=False)
        lin.weight.data.copy_(w)
        fp = _pte_method(lin, a, xnnpack=True)
        qlin = torch.nn.Linear(k, n, bias=False)
        qlin.weight.data.copy_(w)
        config = UIntxWeightOnlyConfig(bitwidth=bits, group_size=group, uintx_choose_qparams_algorithm="min_max")
        quantize_(qlin, config)
        lb = _pte_method(qlin, a, xnnpack=False)
        # As parakeet-transcribe runs: ExecuTorch's pool does the work and torch's is one thread, whose OpenMP
        # workers would otherwise spin after each input copy and take a core from it (both columns alike).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            row["xnnpack_fp32_pte"] = _time(lambda: fp.execute([a]), rounds=3)
            row["lowbit_pte"] = _time(lambda: lb.execute([a]), rounds=3)
        finally:
            torch.set_num_threads(threads)
    from torchao.quantization import quantize_

    lin_fp = torch.nn.Linear(k, n, bias=True)
    with torch.no_grad():
        lin_fp.weight.copy_(w)
    lin_q = torch.nn.Linear(k, n, bias=True)
    lin_q.load_state_dict(lin_fp.state_dict())
    quantize_(lin_q, UIntxWeightOnlyConfig(bitwidth=bits, group_size=group, uintx_choose_qparams_algorithm="min_max"))
    with torch.inference_mode():
        row["linear_fp32"] = _time(lambda: lin_fp(a))
        row["linear_lowbit"] = _time(lambda: lin_q(a))
    row["weight_bytes_lowbit"] = b.numel() + (s.numel() + z.numel()) * 4
    row["weight_bytes_fp32"] = w.numel() * 4
    return row


def _rate(row: dict, key: str) -> str:
    t = row[key]
    if row["M"] == 1:
        nbytes = row["weight_bytes_fp32"] if key.startswith(("fp32", "xnnpack")) else row["weight_bytes_lowbit"]
        return f"{nbytes / t / 1e9:.1f} GB/s"
    return f"{2 * row['M'] * row['N'] * row['K'] / t / 1e9:.0f} GFLOP/s"


def render(rows: list[dict], info: dict, pte: bool) -> str:
    lines = [
        f"# fpa_lowbit CPU kernels: {info['bits']}-bit, group {info['group_size']}",
        "",
        f"- Host: {info['cpu']} ({info['cores']} cores), kernel level **{info['isa']}**, "
        f"{info['threads']} threads (torch and the kernels; .pte columns: ExecuTorch's pool at its default, torch's at"
        " one).",
        f"- Ceilings measured in the same run: memory copy **{info['memory_gbps']:.1f} GB/s**; "
        f"FMA ceiling at {info['isa']} **{info['fma_gflops']:.0f} GFLOP/s**; "
        f"PyTorch's fp32 GEMM at 2048^3 {info['fp32_gemm_gflops']:.0f} GFLOP/s.",
        f"- torch {info['torch']}, executorch {info['executorch']}. Times are the best of several rounds, in ms.",
        "",
    ]
    hdr = (
        "| M | K | N | fp32 ms | lowbit ms | **lowbit / fp32 speed** | lowbit-torch ms | lowbit rate (of ceiling) |"
        " fp32 Linear ms | lowbit Linear ms | **Linear speed** |"
    )
    sep = "|---|---|---|---|---|---|---|---|---|---|---|"
    if pte:
        hdr += " xnnpack-fp32 .pte ms | lowbit .pte ms | **.pte lowbit / xnnpack-fp32 speed** |"
        sep += "---|---|---|"
    lines += [hdr, sep]
    for r in rows:
        ceiling = info["memory_gbps"] if r["M"] == 1 else info["fma_gflops"]
        rate = _rate(r, "lowbit")
        frac = float(rate.split()[0]) / ceiling
        line = (
            f"| {r['M']} | {r['K']} | {r['N']} | {r['fp32'] * 1e3:.3f} | {r['lowbit'] * 1e3:.3f} | "
            f"**{r['fp32'] / r['lowbit']:.2f}x** | {r['lowbit_torch'] * 1e3:.3f} | {rate} ({frac:.0%}) |"
            f" {r['linear_fp32'] * 1e3:.3f} | {r['linear_lowbit'] * 1e3:.3f} |"
            f" **{r['linear_fp32'] / r['linear_lowbit']:.2f}x** |"
        )
        if pte:
            line += (
                f" {r['xnnpack_fp32_pte'] * 1e3:.3f} | {r['lowbit_pte'] * 1e3:.3f} | "
                f"**{r['xnnpack_fp32_pte'] / r['lowbit_pte']:.2f}x** |"
            )
        lines.append(line)
    lines += [
        "",
        "Speed ratios are time(fp32) / time(lowbit): above 1 the 4-bit kernel is faster. Rates: GB/s of weight bytes",
        "read (packed + fp32 scales and zeros for lowbit) at M = 1, against the copy bandwidth (above 100 %: the",
        "weight stays in the last-level cache between calls); GFLOP/s (2MNK) at M > 1, against the FMA ceiling.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--large-ms",
        default="125,750,625,3000",
        help="activation rows of the compute-bound cases (the full-size encoder's frames at 10 s and 60 s are 125 and"
        " 750, after 8x subsampling; 625 and 3000 are the rows the library's goals were first stated at)",
    )
    ap.add_argument("--no-pte", action="store_true", help="skip the ExecuTorch .pte columns")
    ap.add_argument("--out", type=Path, help="folder for results.md and results.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    pte = not args.no_pte
    if pte:
        import fpa_lowbit

        fpa_lowbit.load_executorch_kernels()
    from importlib.metadata import version

    info = {
        "bits": args.bits,
        "group_size": args.group_size,
        "threads": torch.get_num_threads(),
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "isa": _native.best_isa(),
        "torch": torch.__version__,
        "executorch": version("executorch") if pte else "-",
        **ceilings(),
    }
    cases = [(1, k, n) for k, n in SHAPES_M1]
    cases += [(int(m), k, n) for m in args.large_ms.split(",") for k, n in SHAPES_LARGE]
    rows = []
    for m, k, n in cases:
        rows.append(bench_shape(m, k, n, args.bits, args.group_size, pte))
        print(f"M={m} K={k} N={n}: fp32/lowbit {rows[-1]['fp32'] / rows[-1]['lowbit']:.2f}x", flush=True)
    text = render(rows, info, pte)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(text)
        (args.out / "results.json").write_text(json.dumps({"info": info, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
