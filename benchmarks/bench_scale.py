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
``--out``). ``--repeat N`` runs N rounds, each starting at another item, and keeps each item's fastest run; the CPU
seconds that other processes used during a run ("others' CPU s": the machine's busy time less the run's own
processes', ``OwnCpu``) say how much other work on the machine slowed it. "per CPU-hour used" divides the audio by
the run's own CPU seconds (Ray's daemons included): what the job costs on cores that do nothing else, and a figure
that other work on the machine moves less than the wall time.
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


MARK = "BENCH_SCALE_RUN"


class OwnCpu:
    """CPU seconds of every process of one run: those whose environment holds ``MARK=token`` (the command and all
    it starts, Ray's daemons and actors included, which inherit the driver's environment), sampled from /proc every
    0.2 s until ``stop`` (a process's last 0.2 s before it exits can be missed). Linux only; 0 elsewhere."""

    def __init__(self, token: str):
        import threading

        self.needle = f"{MARK}={token}".encode()
        self.seen: dict[int, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while True:
            for proc in Path("/proc").glob("[0-9]*"):
                try:
                    if self.needle not in (proc / "environ").read_bytes():
                        continue
                    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                self.seen[int(proc.name)] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            if self.done.wait(0.2):
                return

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return sum(self.seen.values())


def busy_cpu() -> float:
    """CPU seconds the whole machine has been busy (/proc/stat; 0 elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def measure(cmd: list[str]) -> dict:
    """Run ``cmd`` once: its wall time, the transcription phase it reports, its processes' CPU seconds, and the CPU
    seconds the rest of the machine used meanwhile (other work that slowed it)."""
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    busy0 = busy_cpu()
    own = OwnCpu(token)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, MARK: token})
    wall = time.perf_counter() - t0
    own_s = own.stop()
    busy = busy_cpu() - busy0
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        print(err, file=sys.stderr)
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}")
    phase = PHASE.search(err)
    return {
        "wall_s": round(wall, 2),
        "fixed_s": round(wall - float(phase.group(1)), 1) if phase else None,
        "own_cpu_s": round(own_s, 1),
        "others_cpu_s": round(max(0.0, busy - own_s), 1),
    }


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
    ap.add_argument(
        "--repeat", type=int, default=1, help="rounds over --runs, each in another order; the fastest run is kept"
    )
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    specs = []
    for spec in args.runs:
        match = RUN.match(spec)
        if not match:
            ap.error(f"--runs {spec}: write manifest:N or ray:NxC")
        n = int(match.group(2))
        specs.append((spec, match.group(1), n, float(match.group(3) or (cores / n))))
    manifest, audio_s = write_clips(args.out / "clips", args.clips)
    samples: dict[str, list[dict]] = {spec: [] for spec, *_ in specs}
    lines: dict[str, list[str]] = {}
    for round_ in range(args.repeat):
        for spec, kind, n, cpus in specs[round_ % len(specs) :] + specs[: round_ % len(specs)]:
            output = args.out / f"out_{spec.replace(':', '_')}.jsonl"
            output.unlink(missing_ok=True)
            sample = measure(command(kind, n, cpus, args.model, manifest, output))
            samples[spec].append(sample)
            lines[spec] = sorted(output.read_text(encoding="utf-8").splitlines())
            print(f"{spec}: {sample}", file=sys.stderr)
    runs = []
    for spec, kind, n, cpus in specs:
        best = min(samples[spec], key=lambda m: m["wall_s"])  # the least disturbed by other work
        wall = best["wall_s"]
        runs.append(
            {
                "run": spec,
                "mode": kind,
                "processes": n,
                "cpus_each": round(cpus, 2),
                **best,
                "walls_s": [m["wall_s"] for m in samples[spec]],
                "clips_per_s": round(len(lines[spec]) / wall, 3),
                "audio_hours_per_hour": round(audio_s / wall, 2),
                "audio_hours_per_core_hour": round(audio_s / wall / cores, 2),
                "audio_hours_per_cpu_hour": round(audio_s / best["own_cpu_s"], 2) if best["own_cpu_s"] else None,
            }
        )
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
        f"| run | processes x CPUs | wall s (fastest of {args.repeat}) | all walls | fixed s | own CPU s | "
        f"others' CPU s | clips/s | audio h per h | per core-hour (wall) | per CPU-hour used | vs {args.runs[0]} | "
        "Ray vs manifest, same count |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows += [
        f"| {r['run']} | {r['processes']} x {r['cpus_each']:g} | {r['wall_s']} | "
        f"{', '.join(f'{w:g}' for w in r['walls_s'])} | {r['fixed_s']} | {r['own_cpu_s']} | {r['others_cpu_s']} | "
        f"{r['clips_per_s']} | {r['audio_hours_per_hour']} | {r['audio_hours_per_core_hour']} | "
        f"{r['audio_hours_per_cpu_hour']} | "
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
        "repeat": args.repeat,
        "same_lines": same,
        "loadavg_end": loadavg,
        "runs": runs,
    }
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
