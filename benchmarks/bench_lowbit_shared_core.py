"""fpa_lowbit's thread pool on a machine that is busy elsewhere: one low-bit GEMV on 1 and 2 threads, with the
cores idle and with another process spinning on one of them.

A laptop or server running the transcriber beside other work gives its threads shared cores. The pool's caller
claims work alongside its helpers; a helper whose core is taken by another process may not run for a scheduler
time slice, and a caller that waits for it then loses more than the second thread gives. This prints, for each
condition, the median, 90th percentile and mean of many calls (microseconds) and one thread's mean over this
row's (a model's time is the sum of its calls), with the spinning process pinned (``os.sched_setaffinity``) to
the last CPU this process may use.

    python benchmarks/bench_lowbit_shared_core.py --out benchmarks/results/lowbit_shared_core
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from fpa_lowbit import _native, pack_lowbit


def _spin(cpu: int, stop) -> None:
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        pass


def _calls(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def measure(k: int, n: int, calls: int, rounds: int) -> list[dict]:
    """Rows of ``condition``, ``threads``, ``median_us``, ``p90_us``, ``mean_us`` for a 1 x k x n 4-bit group-32
    product."""
    torch.manual_seed(0)
    group = 32
    B = pack_lowbit(torch.randint(0, 16, (n, k), dtype=torch.uint8), 4)
    S, Z, A = torch.rand(n, k // group), torch.rand(n, k // group), torch.randn(1, k)
    rows = []
    cpus = sorted(os.sched_getaffinity(0))
    for condition in ("idle", "one core busy"):
        stop = mp.Event()
        spinner = None
        if condition != "idle":
            spinner = mp.Process(target=_spin, args=(cpus[-1], stop), daemon=True)
            spinner.start()
            time.sleep(0.5)
        try:
            for threads in (1, 2):
                times: list[float] = []
                for _ in range(rounds):
                    _calls(lambda: _native.linear(A, B, group, S, Z, 4, num_threads=threads), calls // 10)
                    times += _calls(lambda: _native.linear(A, B, group, S, Z, 4, num_threads=threads), calls)
                times.sort()
                rows.append(
                    {
                        "condition": condition,
                        "threads": threads,
                        "median_us": statistics.median(times) * 1e6,
                        "p90_us": times[int(0.9 * len(times))] * 1e6,
                        "mean_us": sum(times) / len(times) * 1e6,
                    }
                )
        finally:
            stop.set()
            if spinner is not None:
                spinner.join()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=1024, help="in-features")
    p.add_argument("--n", type=int, default=1024, help="out-features")
    p.add_argument("--calls", type=int, default=3000, help="timed calls per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, help="folder for results.md and results.json")
    args = p.parse_args(argv)
    if len(os.sched_getaffinity(0)) < 2:
        p.error("needs two CPUs")
    rows = measure(args.k, args.n, args.calls, args.rounds)
    one = {r["condition"]: r for r in rows if r["threads"] == 1}
    lines = [
        f"1 x {args.k} x {args.n}, 4-bit, group 32; {platform.processor() or platform.machine()}, "
        f"{len(os.sched_getaffinity(0))} CPUs; {args.rounds} x {args.calls} calls",
        "",
        "| condition | threads | median us | p90 us | mean us | 1 thread / this (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = one[r["condition"]]["mean_us"] / r["mean_us"]
        r["speedup_vs_1_thread"] = ratio
        lines.append(
            f"| {r['condition']} | {r['threads']} | {r['median_us']:.1f} | {r['p90_us']:.1f} | {r['mean_us']:.1f} "
            f"| {ratio:.2f}x |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(text + "\n")
        (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
