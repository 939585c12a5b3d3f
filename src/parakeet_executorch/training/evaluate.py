"""``parakeet-eval-wer``: WER of the demo model on its four held-out test sets, for NeMo eager and each .pte recipe.

The test sets come from ``training/corpus.py``'s ``test_sets`` (seed 2026 by default) and are written as 16-bit WAV
files, so every system reads the same bytes:
- (a) ``random``: random sequences over all 5,000 words (10 % held-out words), held-out espeak-ng variants and flite;
- (b) ``sentences``: held-out fortune sentences, same voices;
- (c) ``festival``: half random sequences, half held-out sentences, by festival, a synthesizer training never heard;
- (d) ``long``: one recording of at least 10 minutes made of further held-out clips by all three synthesizers,
  transcribed three ways: as one file (the .pte through the Python runner's ``transcribe_file``, i.e. buffered
  left | chunk | right decoding at 4 | 48 | 4 s, the runners' file default when the model card was measured;
  NeMo eager through NeMo's own buffered decoding with the same context), clip by clip (each clip alone), and
  "time-aligned": the one-file words given to the clips by their start times (boundaries half-way through each
  pause), scored clip by clip, so that words placed at the wrong time count as errors.

WER is jiwer's corpus WER (edits / reference words). "held-out words" is the share of held-out-word occurrences in
the references of (a)-(c) that the alignment marks as correct. Writes ``OUT/results.json`` and ``OUT/results.md``;
the synthesized sets are reused from ``OUT/testsets`` when their recipe (seed, sizes, synthesizer versions) matches.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_RECIPES = [
    "none:xnnpack",
    "none:portable",
    "fpa4w:xnnpack",
    "8da4w:xnnpack",
    "8da8w:xnnpack",
    "8da8w+fpa8w:xnnpack",  # what --quantize auto exports on a CPU with VNNI
    "8w:portable",
]
SETS = ("random", "sentences", "festival")
# The contexts of (d)'s one-file run, the .pte's and NeMo's buffered decoding alike: the runners' file default when
# the model card's figures were measured (runtime/longform.py FILE_CONTEXT is now 4 | bound - 6 | 2 s).
LONG_CONTEXT_S = (4.0, 48.0, 4.0)


def make_test_sets(out_dir: Path, n: int, seed: int, long_seconds: float, workers: int | None = None) -> dict:
    """Synthesize (or reuse) the test sets under ``out_dir``.

    Returns:
        ``{"random": [row...], "sentences": [...], "festival": [...], "long": [...], "long_path": str}``; a row has
        ``path`` (under ``out_dir``), ``text``, ``voice``; long rows also ``start`` and ``end`` in the recording.
    Raises:
        SynthError: a synthesizer is missing (festival is needed for (c) and (d)).
    """
    import soundfile as sf

    from . import corpus

    recipe = {"seed": seed, "clips": n, "long_seconds": long_seconds, "synthesizers": corpus.versions()}
    manifest = out_dir / "testsets.json"
    if manifest.is_file():
        saved = json.loads(manifest.read_text())
        if saved.get("recipe") == recipe:
            print(f"reusing the test sets in {out_dir}", flush=True)
            return _located(out_dir, saved["sets"])
    sets = corpus.test_sets(seed, n, long_seconds)
    result: dict = {}
    for name, clips in sets.items():
        t0 = time.perf_counter()
        audio = corpus.synthesize_many(clips, workers=workers)
        folder = out_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for i, (clip, wav) in enumerate(zip(clips, audio)):
            path = folder / f"{i:04d}.wav"
            sf.write(path, wav, 16000, subtype="PCM_16")
            rows.append(
                {
                    "path": f"{name}/{path.name}",
                    "text": clip.text,
                    "voice": clip.voice.describe(),
                    "synth": clip.voice.synth,
                    "voice_name": clip.voice.name,
                }
            )
        if name == "long":
            recording, spans = corpus.long_recording(clips, audio, min_seconds=long_seconds)
            result["long_path"] = f"{name}/long.wav"
            sf.write(folder / "long.wav", recording, 16000, subtype="PCM_16")
            for row, span in zip(rows, spans):
                row.update(start=span["start"], end=span["end"])
        seconds = sum(len(a) for a in audio) / 16000
        print(
            f"test set {name}: {len(rows)} clips, {seconds:.0f} s of audio in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        result[name] = rows
    manifest.write_text(json.dumps({"recipe": recipe, "sets": result}, indent=1) + "\n")
    return _located(out_dir, result)


def _located(out_dir: Path, sets: dict) -> dict:
    """``sets`` with every audio path under ``out_dir``. The manifest names each file by its set's folder and its
    name (``random/0000.wav``), so a folder of test sets can be moved or reached from another working directory;
    manifests written before held the path as given when they were made (relative to that run's working
    directory, or absolute), and the same two last parts locate those files too."""

    def here(path: str) -> str:
        p = Path(path)
        return str(out_dir / p.parent.name / p.name)

    located: dict = {
        name: [dict(row, path=here(row["path"])) for row in rows] for name, rows in sets.items() if name != "long_path"
    }
    if "long_path" in sets:
        located["long_path"] = here(sets["long_path"])
    return located


def word_error_rate(refs: list[str], hyps: list[str]) -> float:
    import jiwer

    return float(jiwer.wer(refs, hyps))


def heldout_hits(refs: list[str], hyps: list[str]) -> tuple[int, int]:
    """(correct, total) occurrences of held-out words in ``refs``, by jiwer's alignment."""
    import jiwer

    from .text import heldout_words

    held = heldout_words()
    out = jiwer.process_words(refs, hyps)
    hits = total = 0
    for ref, chunks in zip(out.references, out.alignments):
        total += sum(w in held for w in ref)
        for c in chunks:
            if c.type == "equal":
                hits += sum(w in held for w in ref[c.ref_start_idx : c.ref_end_idx])
    return hits, total


def time_aligned_wer(rows: list[dict], words: list[tuple[str, float]]) -> float:
    """WER of the one-file transcript's words given to the long recording's clips by start time."""
    bounds = [(a["end"] + b["start"]) / 2 for a, b in zip(rows, rows[1:])] + [float("inf")]
    per_clip: list[list[str]] = [[] for _ in rows]
    i = 0
    for word, start in sorted(words, key=lambda w: w[1]):
        while start >= bounds[i]:
            i += 1
        per_clip[i].append(word)
    return word_error_rate([r["text"] for r in rows], [" ".join(w) for w in per_clip])


def _words_from_tokens(tokenizer, tokens: list[tuple[int, int]], frame_s: float) -> list[tuple[str, float]]:
    """Words and start times (s) from SentencePiece token ids and encoder frames (a piece with '▁' starts a word)."""
    words: list[tuple[str, float]] = []
    for tid, frame in tokens:
        piece = tokenizer.ids_to_tokens([tid])[0]
        if piece.startswith("\u2581") or not words:
            words.append((piece.lstrip("\u2581"), frame * frame_s))
        else:
            words[-1] = (words[-1][0] + piece, words[-1][1])
    return [w for w in words if w[0]]


def nemo_buffered(model, audio, left_s: float, chunk_s: float, right_s: float) -> list[tuple[int, int]]:
    """NeMo's own buffered decoding of a 16 kHz waveform with context sizes in seconds (rounded to encoder frames
    as NeMo's script rounds them): [(token id, absolute frame)] (``nemo_buffered.nemo_buffered_tokens``)."""
    from .nemo_buffered import nemo_buffered_tokens

    stride = float(model.cfg.preprocessor.window_stride)
    factor = int(model.encoder.subsampling_factor)
    left, chunk, right = (int(s * (1.0 / stride) / factor) for s in (left_s, chunk_s, right_s))
    return nemo_buffered_tokens(model, audio, left, chunk, right)


def nemo_system(model_path: str, sets: dict) -> dict:
    """NeMo eager greedy transcripts (the checkpoint's own decoding config): per clip of every set, and the long
    recording through NeMo's buffered decoding. Returns ``{set: [text...], "long_file": (text, words)}``."""
    from ..audio import load_audio
    from ..export.load import load_nemo_model

    model = load_nemo_model(model_path)
    model.eval()
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    for name in (*SETS, "long"):
        hyps = model.transcribe([r["path"] for r in sets[name]], batch_size=16, verbose=False)
        out[name] = [h.text for h in hyps]
    # transcribe() ends by unfreezing encoder, decoder and joint, which leaves them in training mode (dropout on,
    # BatchNorm on batch statistics); NeMo's buffered decoding below calls the model directly, so switch back.
    model.eval()
    tokens = nemo_buffered(model, load_audio(sets["long_path"], 16000), *LONG_CONTEXT_S)
    frame_s = model.preprocessor.featurizer.hop_length * model.encoder.subsampling_factor / 16000
    words = _words_from_tokens(model.tokenizer, tokens, frame_s)
    out["long_file"] = (" ".join(w for w, _ in words), words)
    out["run_s"] = time.perf_counter() - t0
    return out


def pte_system(model_path: str, recipe: str, backend: str, group_size: int | None, work: Path, sets: dict) -> dict:
    """Export one recipe (``ENCODER+DECODER`` for one per part, e.g. ``8da8w+8da4w``) and transcribe every clip, and
    the long recording as one file, with the Python runner.

    Returns:
        ``{set: [text...], "long_file": (text, words), "info": {"export_s", "pte_mb", "rtfx",
        "linears_quantized"}}`` (RTFx: audio seconds / runner seconds over the clips of (a)-(c); linears_quantized:
        "N/M" over encoder and decoder, from the export's report).
    Raises:
        RuntimeError: the export failed (its own message is printed above).
    """
    from ..audio import load_audio
    from ..export.api import ExportOptions, export_pte
    from ..export.backends import BackendError
    from ..export.load import ModelLoadError
    from ..export.recipes import RecipeError
    from ..runtime.cli import LongFormOptions, transcribe_file
    from ..runtime.pte_model import PteModel
    from ..runtime.transcribe import Transcriber
    from ..tokenizer import Tokenizer

    encoder_recipe, _, decoder_recipe = recipe.partition("+")
    out_dir = work / f"{recipe}-{backend}" if group_size is None else work / f"{recipe}-{backend}-g{group_size}"
    t0 = time.perf_counter()
    try:
        report = export_pte(
            model_path,
            ExportOptions(
                backend=backend,
                quantize=encoder_recipe,
                quantize_decoder=decoder_recipe or None,
                group_size=group_size,
                output_dir=out_dir,
            ),
            progress=lambda line: print(line, flush=True),
        )
    except (BackendError, ModelLoadError, RecipeError, ValueError, OSError) as exc:
        print(f"parakeet-export: error: {exc}", file=sys.stderr)
        raise RuntimeError(f"export of {recipe} on {backend} failed") from exc
    export_s = time.perf_counter() - t0
    transcriber = Transcriber(PteModel(report.pte_path), Tokenizer(report.tokenizer_path))
    rate = transcriber.model.metadata.sample_rate
    out: dict = {}
    run_s = audio_s = 0.0
    for name in (*SETS, "long"):
        clips = [load_audio(r["path"], rate) for r in sets[name]]
        t0 = time.perf_counter()
        out[name] = [transcriber.transcribe(c).text for c in clips]
        if name != "long":
            run_s += time.perf_counter() - t0
            audio_s += sum(len(c) for c in clips) / rate
    t0 = time.perf_counter()
    transcript = transcribe_file(transcriber, sets["long_path"], LongFormOptions(*LONG_CONTEXT_S), quiet=True)
    long_s = time.perf_counter() - t0
    out["long_file"] = (transcript.text, [(w.text, w.start) for w in transcript.words])
    quantized, total = report.quantization.linears_quantized
    out["info"] = {
        "linears_quantized": f"{quantized}/{total}" if recipe != "none" else "",
        "export_s": round(export_s, 1),
        "pte_mb": round(report.pte_bytes / 1e6, 2),
        "rtfx": round(audio_s / run_s, 1) if run_s else None,
        "long_rtfx": round(transcript.audio_seconds / long_s, 1) if long_s else None,
    }
    return out


def score(sets: dict, hyps: dict, eager: dict | None) -> dict:
    """WERs of one system's transcripts (see the module docstring), and clips equal to NeMo eager's."""
    refs = {name: [r["text"] for r in sets[name]] for name in (*SETS, "long")}
    result: dict[str, Any] = {f"wer_{name}": word_error_rate(refs[name], hyps[name]) for name in SETS}
    result["wer_long_clips"] = word_error_rate(refs["long"], hyps["long"])
    text, words = hyps["long_file"]
    result["wer_long_file"] = word_error_rate([" ".join(refs["long"])], [text])
    result["wer_long_aligned"] = time_aligned_wer(sets["long"], words)
    hits, total = heldout_hits(sum((refs[n] for n in SETS), []), sum((hyps[n] for n in SETS), []))
    result["heldout_words"] = {"correct": hits, "total": total}
    by_voice: dict[str, tuple[list, list]] = {}
    for row, hyp in zip(sets["festival"], hyps["festival"]):
        r, h = by_voice.setdefault(row["voice_name"], ([], []))
        r.append(row["text"])
        h.append(hyp)
    result["wer_festival_by_voice"] = {v: word_error_rate(r, h) for v, (r, h) in sorted(by_voice.items())}
    if eager is not None:
        same = sum(a == b for name in (*SETS, "long") for a, b in zip(hyps[name], eager[name]))
        result["same_as_nemo"] = same
        result["long_file_same_as_nemo"] = text == eager["long_file"][0]
    result["clips"] = sum(len(sets[name]) for name in (*SETS, "long"))
    return result


def _table(results: list[dict]) -> str:
    lines = [
        "| system | recipe | backend | group size | linears quantized | (a) random % | (b) sentences % | "
        "(c) festival % | (d) long, one file % | (d) clip by clip % | (d) time-aligned % | held-out words | "
        "clips as NeMo eager | .pte MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        held = r["heldout_words"]
        held_pct = f"{100 * held['correct'] / held['total']:.1f} % of {held['total']}" if held["total"] else ""
        same = f"{r.get('same_as_nemo', r['clips'])}/{r['clips']}"
        lines.append(
            f"| {r['system']} | {r['recipe']} | {r['backend']} | {r.get('group_size') or ''} | "
            f"{r.get('linears_quantized', '')} | {100 * r['wer_random']:.2f} | {100 * r['wer_sentences']:.2f}"
            f" | {100 * r['wer_festival']:.2f} | {100 * r['wer_long_file']:.2f} | "
            f"{100 * r['wer_long_clips']:.2f} | {100 * r['wer_long_aligned']:.2f} | {held_pct} | {same} | "
            f"{r.get('pte_mb', '')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from importlib.resources import files

    p = argparse.ArgumentParser(prog="parakeet-eval-wer", description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        default=str(files("parakeet_executorch") / "demo_model" / "parakeet-tdt-demo.nemo"),
        help="the .nemo to evaluate (default: the shipped demo model)",
    )
    p.add_argument("--out", required=True, help="folder for the test sets, exports and results")
    p.add_argument("--clips", type=int, default=200, help="clips in each of the sets (a), (b) and (c)")
    p.add_argument("--long-seconds", type=float, default=600.0, help="least length of the long recording (d)")
    p.add_argument("--seed", type=int, default=2026, help="test-set seed")
    p.add_argument("--workers", type=int, default=None, help="synthesis processes (default: one per core)")
    p.add_argument(
        "--recipes",
        nargs="*",
        default=DEFAULT_RECIPES,
        metavar="RECIPE[+DECODER_RECIPE]:BACKEND[:GROUP_SIZE]",
        help=f"default: {' '.join(DEFAULT_RECIPES)}",
    )
    args = p.parse_args(argv)

    from ..export.backends import BACKENDS
    from ..export.recipe_registry import RECIPES
    from ..export.recipes import RecipeError, check_recipe

    pairs = []
    for item in args.recipes:
        fields = item.split(":")
        recipe, backend, rest = fields[0], fields[1] if len(fields) > 1 else "", fields[2:]
        parts = recipe.split("+")  # ENCODER+DECODER, e.g. 8da8w+none (what --quantize auto gives with VNNI)
        if (
            len(parts) > 2
            or not all(r in RECIPES for r in parts)
            or backend not in BACKENDS
            or len(rest) > 1
            or (rest and not rest[0].isdigit())
        ):
            p.error(
                f"{item!r}: expected RECIPE[+DECODER_RECIPE]:BACKEND[:GROUP_SIZE] with recipes in {RECIPES} and "
                f"BACKEND in {BACKENDS}"
            )
        group_size = int(rest[0]) if rest else None
        try:
            for part in parts:
                check_recipe(part, backend, group_size)
        except RecipeError as e:
            p.error(str(e))
        pairs.append((recipe, backend, group_size))
    if not Path(args.model).is_file():
        p.error(f"--model {args.model} not found")
    if args.clips < 1 or args.long_seconds <= 0:
        p.error("--clips and --long-seconds must be positive")
    if args.seed in (0, 1):
        p.error(f"--seed {args.seed} is a training seed (corpus 0, dev set 1); pick another")

    from .synth import SynthError

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        sets = make_test_sets(out / "testsets", args.clips, args.seed, args.long_seconds, args.workers)
    except SynthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    eager = nemo_system(args.model, sets)
    results = [{"system": "nemo-eager", "recipe": "none", "backend": "pytorch", **score(sets, eager, None)}]
    print(f"NeMo eager: {json.dumps({k: v for k, v in results[0].items() if k.startswith('wer_')})}", flush=True)
    for recipe, backend, group_size in pairs:
        hyps = pte_system(args.model, recipe, backend, group_size, out / "pte", sets)
        results.append(
            {
                "system": "pte",
                "recipe": recipe,
                "backend": backend,
                "group_size": group_size,
                **score(sets, hyps, eager),
                **hyps["info"],
            }
        )
        r = results[-1]
        print(
            f"{recipe} on {backend} (group size {group_size or 'default'}): (a) {100 * r['wer_random']:.2f} % "
            f"(b) {100 * r['wer_sentences']:.2f} % (c) {100 * r['wer_festival']:.2f} % (d) one file "
            f"{100 * r['wer_long_file']:.2f} %, clip by clip {100 * r['wer_long_clips']:.2f} %; "
            f"{r['same_as_nemo']}/{r['clips']} clips as NeMo eager",
            flush=True,
        )
    long_rows = sets["long"]
    meta = {
        "model": args.model,
        "seed": args.seed,
        "sets": {
            name: {"clips": len(sets[name]), "words": sum(len(r["text"].split()) for r in sets[name])}
            for name in (*SETS, "long")
        },
        "long_seconds": long_rows[-1]["end"],
        "long_context_s": LONG_CONTEXT_S,
    }
    (out / "results.json").write_text(json.dumps({"test_sets": meta, "results": results}, indent=1) + "\n")
    table = _table(results)
    sizes = ", ".join(
        f"({k}) {name} {v['clips']} clips / {v['words']} words" for k, (name, v) in zip("abcd", meta["sets"].items())
    )
    (out / "results.md").write_text(
        f"Held-out test sets, seed {args.seed}: {sizes}; the long recording is "
        f"{meta['long_seconds'] / 60:.1f} min.\n\n{table}"
    )
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
