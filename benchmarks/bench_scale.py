"""Ray's overhead against manifest mode on one machine: the same clips, the same .pte, in the same run.

    python benchmarks/bench_scale.py --model /tmp/bench_longform/pte/8da4w/model.pte --out /tmp/bench_scale

Writes ``--clips`` clips of 4-11 s cut from jfk.wav and their manifest (``bench_manifest.write_clips``), then runs,
each as a fresh command into a fresh output: ``parakeet-transcribe --manifest --workers N`` and
``parakeet-transcribe-ray --manifest --concurrency N --num-cpus-per-actor C`` (a local Ray started by the command,
as ``ray.init()`` does without ``RAY_ADDRESS``) for each ``--runs`` item. A run's time is the whole command's wall
time (interpreter start, model loads and, for Ray, starting and stopping Ray included: what a corpus job pays); its
"fixed" part is that minus the transcription phase the command reports (for Ray: the dataset's execution, which
includes starting the actors and their model loads). Checks that every run writes the same lines (the Ray lines
byte for byte equal to manifest mode's), and prints a table with ratios (also ``results.md`` and ``results.json`` in
``--out``), with the load average before each run (other work on the machine slows every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_manifest import write_clips  # noqa: E402 (the benchmarks folder is not a package)

RUN = re.compile(r"^(manifest|ray):(\d+)(?:x(\d+(?:\.\d+)?))?$")
PHASE = re.compile(r"h of audio in ([\d.]+) s")


def command(kind: str, n: int, cpus: float | None, model: Path, manifest: Path, output: Path) -> list[str]:
    if kind == "manifest":
        cmd = [sys.executable, "-m", "parakeet_executorch.runtime.cli", "--model", str(model), "--workers", str(n)]
    else:
        cmd = [sys.executable, "-m", "parakeet_executorch.scale.cli", "--model", str(model), "--concurrency", str(n)]
        cmd += ["--num-cpus-per-actor", f"{cpus:g}"]
    return cmd + ["--manifest", str(manifest), "--output", str(output)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="model.pte (tokenizer.model next to it)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--clips", type=int, default=40)
    ap.add_argument(
        "--runs",
        nargs="+",
        default=["manifest:1", "manifest:2", "ray:1x2", "ray:2x1"],
        help="manifest:WORKERS or ray:ACTORSxCPUS_PER_ACTOR (default: one worker or actor on all cores, then one "
        "per core, on this 2-core machine)",
    )
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    manifest, audio_s = write_clips(args.out / "clips", args.clips)
    runs, lines = [], {}
    for spec in args.runs:
        match = RUN.match(spec)
        if not match:
            ap.error(f"--runs {spec}: write manifest:N or ray:NxC")
        kind, n = match.group(1), int(match.group(2))
        cpus = float(match.group(3) or (cores / n))
        output = args.out / f"out_{spec.replace(':', '_')}.jsonl"
        output.unlink(missing_ok=True)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run(
            command(kind, n, cpus, args.model, manifest, output), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        wall = time.perf_counter() - t0
        err = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            print(err, file=sys.stderr)
            raise SystemExit(f"{spec}: exit {proc.returncode}")
        phase = PHASE.search(err)
        lines[spec] = sorted(output.read_text(encoding="utf-8").splitlines())
        runs.append(
            {
                "run": spec,
                "mode": kind,
                "processes": n,
                "cpus_each": round(cpus, 2) if kind == "ray" else round(cores / n, 2),
                "load_before": round(load, 2),
                "wall_s": round(wall, 2),
                "fixed_s": round(wall - float(phase.group(1)), 1) if phase else None,
                "clips_per_s": round(len(lines[spec]) / wall, 3),
                "audio_hours_per_hour": round(audio_s / wall, 2),
                "audio_hours_per_core_hour": round(audio_s / wall / cores, 2),
            }
        )
        print(f"{spec}: {wall:.1f} s (load {load:.2f})", file=sys.stderr)
    first = lines[args.runs[0]]
    same = all(v == first for v in lines.values())
    base = runs[0]["clips_per_s"]
    manifest_by_n = {r["processes"]: r["clips_per_s"] for r in runs if r["mode"] == "manifest"}
    for r in runs:
        r["vs_first"] = round(r["clips_per_s"] / base, 2)
        same_n = manifest_by_n.get(r["processes"])
        r["vs_manifest_same_n"] = round(r["clips_per_s"] / same_n, 2) if same_n and r["mode"] == "ray" else None
    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = [
        f"Ray overhead against manifest mode: {args.clips} clips, {audio_s / 60:.1f} min of audio, {args.model} "
        f"({cores} cores); every run wrote the same lines: {same}; load average (1, 5, 15 min) at the end: {loadavg}",
        "",
        f"| run | processes x CPUs | load before | wall s | fixed s | clips/s | audio h per h | per core-hour "
        f"| vs {args.runs[0]} | Ray vs manifest, same count |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows += [
        f"| {r['run']} | {r['processes']} x {r['cpus_each']:g} | {r['load_before']} | {r['wall_s']} | "
        f"{r['fixed_s']} | {r['clips_per_s']} | {r['audio_hours_per_hour']} | {r['audio_hours_per_core_hour']} | "
        f"{r['vs_first']} | {r['vs_manifest_same_n'] if r['vs_manifest_same_n'] is not None else ''} |"
        for r in runs
    ]
    table = "\n".join(rows) + "\n"
    print(table)
    (args.out / "results.md").write_text(table)
    result = {
        "clips": args.clips,
        "audio_s": audio_s,
        "model": str(args.model),
        "cores": cores,
        "same_lines": same,
        "loadavg_end": loadavg,
        "runs": runs,
    }
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
