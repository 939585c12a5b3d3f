"""Per-stage seconds of exported .pte files through the Python runner, and fpa_lowbit's kernel share.

For each ``--pte`` folder (``model.pte`` + ``tokenizer.model``) and each audio length, it transcribes the same
audio ``--runs`` times after one warm-up, the systems interleaved run by run, with ExecuTorch's pool at
``--threads`` and torch's at one (as ``parakeet-transcribe`` runs), and reports the median seconds of the
preprocessor method, the encoder method and the greedy TDT loop, plus the seconds spent inside fpa_lowbit's
ExecuTorch kernels (fpa4w and fpa8w programs) in the encoder and in the loop, each with its share of that stage.
The last column is each system's encoder speed against the first ``--pte`` (time(first) / time(this)). With
``--etdump`` it then profiles each encoder at each length with ETDump (``bench_export.etdump_profile``: jfk.wav
looped, 3 runs after a warm-up): the time in XNNPACK delegates, in the portable kernels between them, and per
XNNPACK operator kind.

    python benchmarks/bench_pte_stages.py --pte out/pte/xnnpack-fp32 out/pte/xnnpack-fpa4w \\
        --audio out/audio_10s.npy out/audio_60s.npy --out benchmarks/results/transcribe_fpa4w
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_worker import PteSystem  # noqa: E402
from bench_transcribe import kernel_shares  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pte", nargs="+", type=Path, required=True, help="export folders; the first is the reference")
    ap.add_argument("--audio", nargs="+", type=Path, required=True, help="16 kHz mono float32 .npy clips")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per system and clip (after one warm-up)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, help="folder for stages.md and stages.json")
    ap.add_argument("--etdump", action="store_true", help="also profile each encoder with ETDump (needs --out)")
    args = ap.parse_args(argv)
    systems = {p.name: PteSystem(str(p / "model.pte"), str(p / "tokenizer.model"), args.threads) for p in args.pte}
    ref = args.pte[0].name
    rows = {}
    for clip in args.audio:
        audio = np.load(clip)
        seconds = len(audio) / 16000
        runs: dict[str, list[dict]] = {name: [] for name in systems}
        for i in range(args.runs + 1):
            for name, system in systems.items():
                system.run(audio)
                if i:
                    runs[name].append(system.last_stages)
        for name, rr in runs.items():
            rows[(name, seconds)] = {k: statistics.median(r.get(k, 0.0) for r in rr) for k in rr[0]}
    lines = [
        f"Python runner, ExecuTorch's pool at {args.threads} threads, torch's at one; median of {args.runs} runs "
        "after a warm-up, interleaved. Seconds.",
        "",
        "| .pte | audio s | preprocess | encoder | decoder loop | fpa_lowbit kernels: encoder (share) / loop (share) "
        f"| encoder speed vs {ref} |",
        "|---|---|---|---|---|---|---|",
    ]
    for (name, seconds), st in rows.items():
        share = kernel_shares(st)
        speed = rows[(ref, seconds)]["encode"] / st["encode"]
        lines.append(
            f"| {name} | {seconds:g} | {st['preprocess']:.3f} | {st['encode']:.3f} | {st['decode']:.3f} | {share} | "
            f"**{speed:.2f}x** |"
        )
    profiles = {}
    if args.etdump:
        if not args.out:
            ap.error("--etdump needs --out (the .etdp files are written there)")
        from bench_export import etdump_profile

        args.out.mkdir(parents=True, exist_ok=True)
        lines += [
            "",
            "ETDump of each encoder (jfk.wav looped, median of 3 runs after a warm-up, ms):",
            "",
            "| .pte | audio s | execute | XNNPACK delegates | portable kernels "
            "| largest operators inside the delegates |",
            "|---|---|---|---|---|---|",
        ]
        for name, seconds in rows:
            prof = etdump_profile(args.pte[[p.name for p in args.pte].index(name)] / "model.pte", seconds, args.out)
            profiles[f"{name}@{seconds:g}"] = prof
            if "error" in prof:
                lines.append(f"| {name} | {seconds:g} | skipped: {prof['error']} | | | |")
                continue
            top = "; ".join(f"{k} {v}" for k, v in list(prof["delegate_ops_ms"].items())[:5])
            lines.append(
                f"| {name} | {seconds:g} | {prof['execute_ms']} | {prof['delegate_ms']} | {prof['portable_ops_ms']} | "
                f"{top} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "stages.md").write_text(text)
        if profiles:
            (args.out / "etdump.json").write_text(json.dumps(profiles, indent=1))
        data = [{"pte": n, "audio_s": s, **st} for (n, s), st in rows.items()]
        (args.out / "stages.json").write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
