"""Manifest mode's throughput: clips/s and audio hours per hour for 1 and 2 workers, same .pte, same clips.

    python benchmarks/bench_manifest.py --model /tmp/bench_longform/pte/8da4w/model.pte --out /tmp/bench_manifest

Writes ``--clips`` copies of jfk.wav cut to lengths between 4 s and 11 s into ``--out/clips`` and a NeMo-style
manifest of them, then runs ``parakeet-transcribe --manifest ... --workers N --quiet`` once per ``--workers`` value
into a fresh output (model loading included: that is what a corpus job pays), checks that every run gives the same
``pred_text`` per clip, and prints a table (also ``results.md`` and ``results.json`` in ``--out``). The time per
worker count is the whole process's wall time; "vs 1 worker" is the ratio of clips/s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
JFK = Path(os.environ.get("PARAKEET_SHARED_AUDIO", HERE.parent.parent / "shared" / "audio")) / "jfk.wav"


def write_clips(folder: Path, count: int) -> tuple[Path, float]:
    """``count`` WAV clips cut from jfk.wav (4-11 s) and their manifest; returns (manifest path, audio seconds)."""
    import soundfile as sf

    audio, rate = sf.read(str(JFK), dtype="int16")
    folder.mkdir(parents=True, exist_ok=True)
    total = 0.0
    lines = []
    for i in range(count):
        seconds = 4 + (i * 7919 % 700) / 100  # 4.00-10.99 s, spread without a random generator
        clip = audio[: int(seconds * rate)]
        path = folder / f"clip_{i:03d}.wav"
        sf.write(str(path), clip, rate, subtype="PCM_16")
        total += len(clip) / rate
        lines.append(json.dumps({"audio_filepath": path.name, "duration": len(clip) / rate}))
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="model.pte (tokenizer.model next to it)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--clips", type=int, default=40)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    manifest, audio_s = write_clips(args.out / "clips", args.clips)
    runs, texts = [], {}
    for n in args.workers:
        output = args.out / f"out_{n}workers.jsonl"
        output.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "parakeet_executorch.runtime.cli", "--model", str(args.model)]
        cmd += ["--manifest", str(manifest), "--output", str(output), "--workers", str(n), "--quiet"]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        lines = [json.loads(line) for line in output.read_text().splitlines()]
        texts[n] = {line["audio_filepath"]: line["pred_text"] for line in lines}
        runs.append(
            {
                "workers": n,
                "wall_s": round(wall, 2),
                "clips_per_s": round(len(lines) / wall, 3),
                "audio_hours_per_hour": round(audio_s / wall, 1),
            }
        )
    same = all(t == texts[args.workers[0]] for t in texts.values())
    base = runs[0]["clips_per_s"]
    for r in runs:
        r["vs_first"] = round(r["clips_per_s"] / base, 2)
    rows = [
        f"Manifest mode, {args.clips} clips, {audio_s / 60:.1f} min of audio, {args.model} "
        f"({os.cpu_count()} cores); same pred_text for every worker count: {same}",
        "",
        f"| workers | wall s | clips/s | audio hours per hour | vs {args.workers[0]} worker(s) |",
        "|---|---|---|---|---|",
    ]
    rows += [
        f"| {r['workers']} | {r['wall_s']} | {r['clips_per_s']} | {r['audio_hours_per_hour']} | {r['vs_first']} |"
        for r in runs
    ]
    table = "\n".join(rows) + "\n"
    print(table)
    (args.out / "results.md").write_text(table)
    result = {"clips": args.clips, "audio_s": audio_s, "model": str(args.model), "same_text": same, "runs": runs}
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
