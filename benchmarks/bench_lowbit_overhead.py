"""Where a quantized linear's time goes at one activation row: the kernel against the Python work around it.

At M = 1 (token-by-token generation, a decoder step) a 4-bit product of a 1024 x 1024 weight takes tens of
microseconds, so the Python and dispatcher work of each call is a large part of it. For each shape (4-bit, group 32,
biased) this times, side by side in one run (best of several rounds, microseconds per call):

* ``kernel``: the compiled kernel through its C ABI alone (``ctypes``, preallocated output): the floor;
* ``op``: ``torch.ops.torchao._linear_fp_act_4bit_weight`` (the dispatcher, the op's checks, the output);
* ``F.linear`` and ``module``: what a transformers user runs, ``F.linear(x, w, b)`` with the quantized weight and the
  ``nn.Linear`` called as a module, under ``inference_mode``;
* ``fp32 F.linear`` and ``fp32 module``: the same layer unquantized.

It prints each path's time over the kernel's (the overhead) and the fp32 module over the quantized module (the
speed-up a user sees). The 128 x 128 shape is there to show the overhead alone (its product takes ~1 us).

    python benchmarks/bench_lowbit_overhead.py --threads 2 --out benchmarks/results/lowbit_call_overhead
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from fpa_lowbit import UIntxWeightOnlyConfig, _native, linear_op
from torchao.quantization import quantize_

SHAPES = [(128, 128), (1024, 1024), (1024, 4096), (4096, 1024), (4096, 4096)]
PATHS = ("kernel", "op", "F.linear", "module", "fp32 F.linear", "fp32 module")


def _time_paths_us(paths: dict, rounds: int = 9, slice_s: float = 0.05) -> dict:
    """Best (minimum over rounds) mean microseconds per call of each path. The paths take turns within each round,
    ``slice_s`` seconds each, so that a slow spell of a shared machine falls on all of them alike."""
    for fn in paths.values():  # warm-up: caches, thread wake-up, first-call allocations and plans
        for _ in range(20):
            fn()
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(rounds):
        for name, fn in paths.items():
            n, t0 = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                el = time.perf_counter() - t0
                if n >= 5 and el >= slice_s:
                    break
            best[name] = min(best[name], el / n * 1e6)
    return best


def bench_shape(k: int, n: int) -> dict:
    """Times of every path in :data:`PATHS` for ``[1, k] x [n, k]^T + bias``, in microseconds."""
    torch.manual_seed(0)
    fp = torch.nn.Linear(k, n)
    q = torch.nn.Linear(k, n)
    q.load_state_dict(fp.state_dict())
    quantize_(q, UIntxWeightOnlyConfig(bitwidth=4, group_size=32, uintx_choose_qparams_algorithm="min_max"))
    w, b = q.weight, q.bias.detach()
    x = torch.randn(1, k)
    lib = _native._load()
    y = torch.empty(1, n)
    threads = torch.get_num_threads()
    op = linear_op(4)
    kernel_args = (x.data_ptr(), 1, k, w.packed.data_ptr(), n, 4, 32, w.scale.data_ptr(), w.zero.data_ptr())
    kernel_args += (b.data_ptr(), y.data_ptr(), 0, threads)
    paths = {
        "kernel": lambda: lib.fpa_lowbit_linear_f32(*kernel_args),
        "op": lambda: op(x, w.packed, 32, w.scale, w.zero),
        "F.linear": lambda: F.linear(x, w, b),
        "module": lambda: q(x),
        "fp32 F.linear": lambda: F.linear(x, fp.weight, fp.bias),
        "fp32 module": lambda: fp(x),
    }
    with torch.inference_mode():
        return {"K": k, "N": n, **_time_paths_us(paths)}


def render(rows: list[dict], info: dict) -> str:
    lines = [
        "# fpa_lowbit at one activation row: the kernel and the Python work around it",
        "",
        f"- Host: {info['cpu']}, kernel level **{info['isa']}**, {info['threads']} threads; torch {info['torch']}.",
        "- 4-bit, group 32, biased; microseconds per call, best of 9 rounds, the paths taking turns; `+` is the time"
        " over the kernel's.",
        "",
        "| K x N | kernel | op | F.linear | module | fp32 F.linear | fp32 module | **module speed-up** |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        k = r["kernel"]
        cells = [f"{k:.1f}"] + [f"{r[p]:.1f} (+{r[p] - k:.1f})" for p in ("op", "F.linear", "module")]
        cells += [f"{r['fp32 F.linear']:.1f}", f"{r['fp32 module']:.1f}"]
        speed = r["fp32 module"] / r["module"]
        lines.append(f"| {r['K']} x {r['N']} | " + " | ".join(cells) + f" | **{speed:.2f}x** |")
    lines += [
        "",
        "Module speed-up: fp32 module time over the quantized module's (above 1 the 4-bit layer is faster).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, help="folder for results.md and results.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    import platform

    from bench_lowbit import _cpu_name

    info = {
        "cpu": _cpu_name() or platform.processor(),
        "isa": _native.best_isa(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    rows = [bench_shape(k, n) for k, n in SHAPES]
    text = render(rows, info)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(text)
        (args.out / "results.json").write_text(json.dumps({"info": info, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
