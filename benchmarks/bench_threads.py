"""Thread scaling of every system in bench_transcribe.py: the same model, .pte files, ONNX models and audio timed
at each thread count, as a ratio table.

    python benchmarks/bench_threads.py --out DIR --threads 2 1 -- --size full --audio-seconds 10 60 \\
        --recipes xnnpack-fp32 xnnpack-8da4w xnnpack-8da8w --runs 3

The first thread count runs bench_transcribe in full (model, exports, timing) into DIR/threads_<N>; each further
count reuses those exports (``--exports-from``) and only times the systems again, into its own folder. Then
DIR/scaling.md and DIR/scaling.json hold, per system and audio length, the RTFx and the encoder seconds at each
count and their ratio to the smallest count (> 1: faster with more threads). The arguments after ``--`` go to
every bench_transcribe run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_counts(out: Path, counts: list[int], passthrough: list[str]) -> dict[int, dict]:
    """bench_transcribe at each of ``counts`` threads; returns {threads: results.json}. Raises RuntimeError when a
    run fails (its output is on this process's stdout/stderr)."""
    results: dict[int, dict] = {}
    base = out / f"threads_{counts[0]}"
    for i, n in enumerate(counts):
        d = out / f"threads_{n}"
        cmd = [sys.executable, str(HERE / "bench_transcribe.py"), *passthrough, "--threads", str(n), "--out", str(d)]
        if i > 0 and "--exports-from" not in passthrough:
            cmd += ["--exports-from", str(base)]
        print(f"== {n} threads: {' '.join(cmd[1:])}", flush=True)
        rc = subprocess.run(cmd).returncode
        if rc not in (0, 2):  # 2: it ran, but fp32 systems disagreed; that is in its results and tables
            raise RuntimeError(f"bench_transcribe at {n} threads failed (exit {rc})")
        results[n] = json.loads((d / "results.json").read_text())
    return results


def scaling(results: dict[int, dict]) -> dict:
    """Per system and length: RTFx and encoder seconds at each thread count, and their ratios to the smallest
    count's (RTFx ratio > 1 and encoder ratio > 1 both mean faster with more threads)."""
    counts = sorted(results)
    low = counts[0]
    table: dict[str, dict] = {}
    for name, s0 in results[low]["systems"].items():
        for L in results[low]["audio_seconds"]:
            k = f"{L:g}"
            row = {"system": s0["system"], "recipe": s0["recipe"], "audio_s": L, "rtfx": {}, "encode_s": {}}
            for n in counts:
                s = results[n]["systems"].get(name, {})
                row["rtfx"][n] = s.get("rtfx", {}).get(k)
                row["encode_s"][n] = s.get("stages_s", {}).get(k, {}).get("encode")
            r0, e0 = row["rtfx"][low], row["encode_s"][low]
            row["rtfx_ratio"] = {n: (row["rtfx"][n] / r0 if r0 and row["rtfx"][n] else None) for n in counts}
            row["encode_ratio"] = {n: (e0 / row["encode_s"][n] if e0 and row["encode_s"][n] else None) for n in counts}
            table[f"{name}@{k}"] = row
    return {"threads": counts, "rows": table}


def markdown(sc: dict, results: dict[int, dict]) -> str:
    counts = sc["threads"]
    low = counts[0]
    up = counts[1:]

    def f(x, nd=2):
        return "—" if x is None else f"{x:.{nd}f}"

    head = (
        ["system", "recipe", "audio s"]
        + [f"RTFx {n} thr" for n in counts]
        + [f"RTFx {n} / {low}" for n in up]
        + [f"encoder s {n} thr" for n in counts]
        + [f"encoder {low} / {n}" for n in up]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in sc["rows"].values():
        cells = [row["system"], row["recipe"], f"{row['audio_s']:g}"]
        cells += [f(row["rtfx"][n]) for n in counts] + [f(row["rtfx_ratio"][n]) for n in up]
        cells += [f(row["encode_s"][n], 3) for n in counts] + [f(row["encode_ratio"][n]) for n in up]
        lines.append("| " + " | ".join(cells) + " |")
    r0 = results[low]
    host = r0["host"]
    notes = [
        "",
        f"- Thread counts {', '.join(map(str, counts))}: torch's intra-op threads for NeMo eager, onnxruntime's "
        "intra-op threads, ExecuTorch's thread pool in both runners (`--threads`). Ratios are to "
        f"{low} thread{'s' if low > 1 else ''}; > 1: faster with more threads.",
        f"- {r0['runs']} timed runs (median) per system, count and length; the same .pte files and ONNX models "
        "(exported once) at every count; the runs of one count were done before the next count's began.",
        f"- Host: {host['cpu']} ({host['cores']} cores; {' '.join(host.get('isa', []))}), {host['mem_gb']} GB.",
        "- Per-count tables: " + ", ".join(f"`threads_{n}/results.md`" for n in counts) + ".",
    ]
    return "\n".join(lines + notes) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--threads", type=int, nargs="+", required=True, help="thread counts; the first one exports")
    args = ap.parse_args(argv)
    if any(n < 1 for n in args.threads) or len(set(args.threads)) != len(args.threads):
        ap.error("--threads takes distinct counts of at least 1")
    if any(a in ("--threads", "--out") for a in passthrough):
        ap.error("--threads and --out belong before '--'; bench_threads sets them for each run")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        results = run_counts(args.out, args.threads, passthrough)
    except RuntimeError as exc:
        print(f"bench_threads: error: {exc}", file=sys.stderr)
        return 1
    sc = scaling(results)
    (args.out / "scaling.json").write_text(json.dumps(sc, indent=2))
    md = markdown(sc, results)
    (args.out / "scaling.md").write_text(md)
    print(md)
    print(f"wrote {args.out / 'scaling.md'}, {args.out / 'scaling.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
