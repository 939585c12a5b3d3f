"""Accuracy of buffered decoding on the demo model: the >= 10 min held-out recording of ``parakeet-eval-wer``'s
set (d) transcribed as one file at several left | chunk | right contexts, against its clips transcribed one by one.

    python benchmarks/bench_longform_accuracy.py --out /tmp/lf_acc                  # the shipped demo model
    python benchmarks/bench_longform_accuracy.py --out /tmp/lf_acc --testsets eval/  # reuse parakeet-eval-wer's sets

For each context it reports:
- WER of the one-file transcript against the references, beside the per-clip WER (goal: within 0.5 points);
- the time-aligned WER (one-file words given to the clips by start time, see ``training/evaluate.py``);
- word times: for every word that the one-file run and the clip's own run both produce (paired by text with
  difflib, clip by clip), |start(one file) - (start(clip alone) + clip offset)|: median, p95, max, and the share
  within one encoder frame. The clip's own frames lie on a grid that starts at the clip's offset and the long
  run's on a grid that starts at 0, so one frame of difference can come from the grids alone.

One .pte (fp32 XNNPACK, ``--max-audio-seconds`` 60 unless given: the bound the committed figures were measured at,
the CLI's default until it became 40 s, and the least the 4 | 48 | 4 s context needs) serves every context. Writes
results.json and results.md in --out.

``--one-voice VOICE`` builds the recording instead from the test sentences of set (b), every one spoken by one
voice (``synth:name``, e.g. ``espeak:en-us+m6``) with 0.3-1.5 s pauses: the voice changes every clip in set (d),
and this separates what the length costs from what the changes of voice cost.
"""

from __future__ import annotations

import argparse
import difflib
import json
import statistics
import sys
import time
from importlib.resources import files
from pathlib import Path

# (left, chunk, right) in seconds: the file default (chunk None: the longest the .pte's bound allows, evened out
# over the recording), two middle settings and two low-latency ones (chunk <= 2 s).
CONTEXTS = [(4.0, None, 2.0), (4.0, 48.0, 4.0), (4.0, 16.0, 4.0), (2.0, 8.0, 2.0), (10.0, 1.6, 1.6), (4.0, 2.0, 1.0)]


def _parse_context(text: str) -> tuple:
    """``L:C:R`` seconds; ``C`` may be ``default`` (the runners' default chunk). ValueError otherwise."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(text)
    return (float(parts[0]), None if parts[1] == "default" else float(parts[1]), float(parts[2]))


def _pair_words(alone: list[tuple[str, float]], together: list[tuple[str, float]], offset: float) -> list[float]:
    """Time differences (s) of the words both runs of one clip agree on (difflib's matching blocks on the text)."""
    a, b = [w for w, _ in alone], [w for w, _ in together]
    out = []
    for block in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            out.append(together[block.b + k][1] - (alone[block.a + k][1] + offset))
    return out


def _assign(rows: list[dict], words: list[tuple[str, float]]) -> list[list[tuple[str, float]]]:
    """The one-file words given to the clips by start time (boundaries half-way through each pause)."""
    bounds = [(a["end"] + b["start"]) / 2 for a, b in zip(rows, rows[1:])] + [float("inf")]
    per_clip: list[list[tuple[str, float]]] = [[] for _ in rows]
    i = 0
    for word, start in sorted(words, key=lambda w: w[1]):
        while start >= bounds[i]:
            i += 1
        per_clip[i].append((word, start))
    return per_clip


def _one_voice_recording(out: Path, rows: list[dict], voice: str, minutes: float) -> tuple[str, list[dict]]:
    """Set (b)'s sentences (repeated if needed) spoken by one voice and joined with 0.3-1.5 s pauses into a WAV of
    at least ``minutes``; returns its path and rows (``path``, ``text``, ``start``, ``end``) like set (d)'s."""
    import random

    import numpy as np
    import soundfile as sf

    from parakeet_executorch.training.synth import Voice, synthesize

    synth, name = voice.split(":", 1)
    v = Voice(synth, name)
    folder = out / f"one-voice-{synth}-{name.replace('+', '_')}"
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    parts, spans, pos = [], [], 0
    i = 0
    while pos < minutes * 60 * 16000:
        text = rows[i % len(rows)]["text"]
        clip = synthesize(text, v)
        path = folder / f"{i:04d}.wav"
        sf.write(path, clip, 16000, subtype="PCM_16")
        clip = sf.read(path, dtype="float32")[0]
        if parts:
            pause = np.zeros(int(rng.uniform(0.3, 1.5) * 16000), dtype=np.float32)
            parts.append(pause)
            pos += len(pause)
        spans.append({"path": str(path), "text": text, "start": pos / 16000, "end": (pos + len(clip)) / 16000})
        parts.append(clip)
        pos += len(clip)
        i += 1
    long_path = folder / "long.wav"
    sf.write(long_path, np.concatenate(parts), 16000, subtype="PCM_16")
    return str(long_path), spans


def _chunk_label(rec: dict) -> str:
    """The chunk as given, or ``default (S)`` with the seconds the default came to for this recording."""
    return f"{rec['chunk_s']:g}" if rec["chunk_s"] is not None else f"default ({rec['chunk_used_s']:g})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(files("parakeet_executorch") / "demo_model" / "parakeet-tdt-demo.nemo"))
    p.add_argument("--out", required=True, type=Path)
    p.add_argument(
        "--testsets", type=Path, help="a parakeet-eval-wer --out folder whose test sets (its testsets/) to reuse"
    )
    p.add_argument("--pte", type=Path, help="an exported folder (model.pte, tokenizer.model) instead of exporting")
    p.add_argument("--one-voice", metavar="SYNTH:NAME", help="the recording from set (b)'s sentences by this voice")
    p.add_argument("--minutes", type=float, default=10.0, help="--one-voice: least length of the recording")
    p.add_argument(
        "--max-audio-seconds",
        type=float,
        default=60.0,
        help="the export's bound (default 60); the default context's chunk fills it",
    )
    p.add_argument(
        "--contexts",
        nargs="+",
        metavar="L:C:R",
        help="left:chunk:right seconds to measure, chunk 'default' for the runners' default (default: the file "
        "default, two middle and two low-latency ones)",
    )
    args = p.parse_args(argv)
    try:
        contexts = [_parse_context(c) for c in args.contexts] if args.contexts else CONTEXTS
    except ValueError:
        p.error("--contexts takes left:chunk:right in seconds, e.g. 4:48:4 or 4:default:2")

    from parakeet_executorch.audio import load_audio
    from parakeet_executorch.runtime.longform import LongFormOptions, buffered_context, transcribe_file
    from parakeet_executorch.runtime.pte_model import PteModel
    from parakeet_executorch.runtime.transcribe import Transcriber
    from parakeet_executorch.tokenizer import Tokenizer
    from parakeet_executorch.training.evaluate import make_test_sets, word_error_rate

    args.out.mkdir(parents=True, exist_ok=True)
    sets = make_test_sets((args.testsets or args.out) / "testsets", n=200, seed=2026, long_seconds=600.0)
    rows = sets["long"]
    if args.one_voice:
        sets["long_path"], rows = _one_voice_recording(args.out, sets["sentences"], args.one_voice, args.minutes)
    pte_dir = args.pte
    if pte_dir is None:
        from parakeet_executorch.export.cli import main as export_main

        pte_dir = args.out / "none-xnnpack"
        if not (pte_dir / "model.pte").is_file() and export_main(
            ["--model", args.model, "--backend", "xnnpack", "--output-dir", str(pte_dir)]
            + ["--max-audio-seconds", f"{args.max_audio_seconds:g}"]
        ):
            print("export failed", file=sys.stderr)
            return 1
    transcriber = Transcriber(PteModel(pte_dir / "model.pte"), Tokenizer(pte_dir / "tokenizer.model"))
    meta = transcriber.model.metadata
    frame_s = meta.window_stride * meta.subsampling_factor
    rate = meta.sample_rate
    recording_s = len(load_audio(sets["long_path"], rate)) / rate

    refs = [r["text"] for r in rows]
    alone = [transcriber.transcribe(load_audio(r["path"], rate)) for r in rows]
    alone_words = [[(w.text, w.start) for w in t.words] for t in alone]
    wer_clips = word_error_rate(refs, [t.text for t in alone])
    results = {
        "model": args.model,
        "recording": args.one_voice or "set (d)",
        "recording_s": round(recording_s, 1),
        "clips": len(rows),
        "frame_s": frame_s,
        "wer_clips": wer_clips,
        "contexts": [],
    }
    print(f"{len(rows)} clips, {recording_s / 60:.1f} min; clip by clip: WER {100 * wer_clips:.2f} %", flush=True)
    for left, chunk, right in contexts:
        options = LongFormOptions(left, chunk, right)
        used = buffered_context(transcriber, options, int(round(recording_s * rate)))
        t0 = time.perf_counter()
        transcript = transcribe_file(transcriber, sets["long_path"], options, quiet=True)
        run_s = time.perf_counter() - t0
        words = [(w.text, w.start) for w in transcript.words]
        per_clip = _assign(rows, words)
        wer_file = word_error_rate([" ".join(refs)], [transcript.text])
        wer_aligned = word_error_rate(refs, [" ".join(w for w, _ in c) for c in per_clip])
        deltas = [abs(d) for a, b, r in zip(alone_words, per_clip, rows) for d in _pair_words(a, b, r["start"])]
        deltas.sort()
        rec = {
            "left_s": left,
            "chunk_s": chunk,  # None: the default
            "chunk_used_s": round(used.chunk * frame_s, 2),
            "right_s": right,
            "wer_file": wer_file,
            "wer_aligned": wer_aligned,
            "delta_points": 100 * (wer_file - wer_clips),
            "rtfx": recording_s / run_s,
            "words_compared": len(deltas),
            "words_file": len(words),
            "dt_median_s": statistics.median(deltas),
            "dt_p95_s": deltas[int(0.95 * (len(deltas) - 1))],
            "dt_max_s": deltas[-1],
            "within_one_frame": sum(d <= frame_s + 1e-6 for d in deltas) / len(deltas),
            "monotonic": all(a.start <= b.start for a, b in zip(transcript.words, transcript.words[1:])),
        }
        results["contexts"].append(rec)
        label = f"{left:g}|{_chunk_label(rec)}|{right:g}"
        print(
            f"{label} s: WER {100 * wer_file:.2f} % ({rec['delta_points']:+.2f} points), "
            f"aligned {100 * wer_aligned:.2f} %, {len(deltas)} words timed: within one frame "
            f"{100 * rec['within_one_frame']:.1f} %, max {rec['dt_max_s']:.3f} s, RTFx {rec['rtfx']:.0f}",
            flush=True,
        )
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        f"Long recording ({results['recording']}): {len(rows)} held-out clips, {recording_s / 60:.1f} min; "
        f"clip by clip WER {100 * wer_clips:.2f} %. Encoder frame {1000 * frame_s:.0f} ms.",
        "",
        "| left \\| chunk \\| right (s) | WER one file | vs clip by clip | time-aligned WER | words timed | "
        "within 1 frame | median / p95 / max \\|Δt\\| (ms) | monotonic |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["contexts"]:
        lines.append(
            f"| {r['left_s']:g} \\| {_chunk_label(r)} \\| {r['right_s']:g} | {100 * r['wer_file']:.2f} % | "
            f"{r['delta_points']:+.2f} | {100 * r['wer_aligned']:.2f} % | {r['words_compared']} | "
            f"{100 * r['within_one_frame']:.1f} % | {1000 * r['dt_median_s']:.0f} / "
            f"{1000 * r['dt_p95_s']:.0f} / {1000 * r['dt_max_s']:.0f} | {r['monotonic']} |"
        )
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
