"""The demo's first and second run, and where the first run's time goes, against executorch's stock lowering.

    python benchmarks/bench_demo_first_run.py --out /tmp/bench_demo

In one run on this machine:

1. ``parakeet-demo`` with an empty cache directory (a new user's first run: it exports, then stores the export):
   wall time and the export's stage timings as it prints them;
2. ``parakeet-demo`` again (the export comes from the cache): wall time;
3. ``parakeet-export`` of the same model with ``--no-lowering-shortcuts`` (executorch 1.5.1's stock lowering, the
   same .pte bytes): its stage timings, so that the first run's cost without the shortcuts is
   ``first run - export(ours) + export(stock)``.

Writes ``results.json`` and ``results.md`` in ``--out`` and prints the table. Each step is a child process; the
wall time includes its Python start and imports.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

STAGE = re.compile(r"^\[([^\]]+)\] done in ([0-9.]+) s", re.M)


def timed(cmd: list[str], env: dict, log: Path) -> tuple[float, dict[str, float]]:
    """Run ``cmd``; return its wall seconds and the ``[stage] done in X s`` lines it printed. Raises on failure."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    log.write_text(proc.stdout)
    if proc.returncode != 0:
        raise SystemExit(f"bench_demo_first_run: {' '.join(cmd)} failed (exit {proc.returncode}); see {log}")
    return wall, {name: float(s) for name, s in STAGE.findall(proc.stdout)}


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the exports, logs and results")
    args = p.parse_args(argv)
    from parakeet_executorch.demo import DEMO_MODEL

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PARAKEET_CACHE_DIR=str(out / "cache"))
    bin_dir = Path(sys.executable).parent
    demo, export = str(bin_dir / "parakeet-demo"), str(bin_dir / "parakeet-export")
    if (out / "cache").exists():
        import shutil

        shutil.rmtree(out / "cache")

    first_wall, first_stages = timed([demo, "--out", str(out / "demo")], env, out / "first_run.log")
    second_wall, second_stages = timed([demo, "--out", str(out / "demo")], env, out / "second_run.log")
    if second_stages:
        raise SystemExit("bench_demo_first_run: the second run exported again: the cache was not used")
    stock_wall, stock_stages = timed(
        [export, "--model", str(DEMO_MODEL), "--backend", "xnnpack", "--no-lowering-shortcuts"]
        + ["--output-dir", str(out / "stock")],
        env,
        out / "stock_export.log",
    )
    same = filecmp.cmp(out / "demo" / "xnnpack" / "model.pte", out / "stock" / "model.pte", shallow=False)
    ours_export = sum(first_stages.values())
    first_stock = first_wall - ours_export + sum(stock_stages.values())
    result = {
        "host": {"cpu": cpu_name(), "cpus": len(os.sched_getaffinity(0))},
        "first_run_s": round(first_wall, 1),
        "second_run_s": round(second_wall, 1),
        "first_run_with_stock_lowering_s": round(first_stock, 1),
        "stages_s": {"ours": first_stages, "stock": stock_stages},
        "same_pte_bytes": same,
    }
    names = list(dict.fromkeys([*stock_stages, *first_stages]))
    lines = [
        f"# parakeet-demo's first run ({result['host']['cpu']}, {result['host']['cpus']} CPUs)",
        "",
        "| export stage | stock lowering (s) | with the shortcuts (s) | ours / stock |",
        "|---|---|---|---|",
    ]
    for n in names:
        s, o = stock_stages.get(n), first_stages.get(n)
        ratio = f"{o / s:.2f}" if s and o is not None else ""
        lines.append(f"| {n} | {s if s is not None else ''} | {o if o is not None else ''} | {ratio} |")
    lines += [
        "",
        f"- first run (`parakeet-demo`, empty cache): {first_wall:.1f} s; with the stock lowering it "
        f"would be {first_stock:.1f} s (ours / stock {first_wall / first_stock:.2f})",
        f"- second run (export from the cache): {second_wall:.1f} s ({second_wall / first_wall:.3f} of the first)",
        f"- the two exports' .pte files are byte-identical: {same}",
    ]
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
