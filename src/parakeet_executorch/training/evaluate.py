"""``parakeet-eval-wer``: WER of the demo model on a fresh held-out test set, for NeMo eager and each .pte recipe.

The test set is synthesized with espeak-ng from ``training/corpus.py``'s held-out split: sentences that are not
in the training set (the training sentences are regenerated from the training seed and excluded) and voice
settings training never used (other variants, speeds and pitches between the training grid's). It is written as
WAV files so every system reads the same bytes.

Systems: NeMo eager greedy TDT (``ASRModel.transcribe`` on the WAV files), and for every ``RECIPE:BACKEND`` pair
the exported ``.pte`` through this package's Python runner. WER is jiwer's corpus WER (edits / reference words).
Writes ``OUT/results.json`` and ``OUT/results.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# The demo model's width (112) is not a multiple of 32, so the 4-bit group recipes leave its K = 112 linears in
# float (the "linears quantized" column says how many were taken); the per-channel 8-bit recipes take them all.
DEFAULT_RECIPES = ["none:xnnpack", "none:portable", "fpa4w:xnnpack", "8da4w:xnnpack", "8da8w:xnnpack",
                   "8w:portable"]


def make_test_set(out_dir: Path, n: int, seed: int, train_utterances: int, train_seed: int) -> list[dict]:
    """Synthesize the held-out set into ``out_dir/audio`` and describe it in ``out_dir/testset.jsonl``.

    Returns:
        one dict per clip: ``path``, ``text`` and the espeak-ng settings.
    Raises:
        ValueError: ``seed`` equals a seed the training run uses for its own sentences or dev set.
    """
    import soundfile as sf

    from . import corpus

    if seed in (train_seed, train_seed + 1):
        raise ValueError(f"--seed {seed} is used by training (sentences {train_seed}, dev set {train_seed + 1}); "
                         "pick another")
    train_texts = {u.text for u in corpus.training_set(train_utterances, train_seed)}
    utts = corpus.heldout_set(n, seed, train_texts)
    audio_dir = out_dir / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (u, wav) in enumerate(zip(utts, corpus.synthesize_many(utts))):
        path = audio_dir / f"{i:04d}.wav"
        sf.write(path, wav, 16000, subtype="PCM_16")
        rows.append({"path": str(path), "text": u.text, "voice": u.voice, "speed": u.speed, "pitch": u.pitch,
                     "gap": u.gap})
    (out_dir / "testset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def nemo_texts(model_path: str, paths: list[str]) -> list[str]:
    """NeMo eager greedy transcripts (the checkpoint's own decoding config) of WAV files."""
    from ..export.load import load_nemo_model

    model = load_nemo_model(model_path)
    model.eval()
    hyps = model.transcribe(paths, batch_size=16, verbose=False)
    return [h.text for h in hyps]


def pte_texts(model_path: str, recipe: str, backend: str, group_size: int | None, work: Path,
              paths: list[str]) -> tuple[list[str], dict]:
    """Export one recipe and transcribe the files with the Python runner.

    Args:
        group_size: ``--group-size`` for the export, or None for the recipe's default.
    Returns:
        transcripts, and ``{"export_s", "pte_mb", "rtfx", "linears_quantized"}`` (RTFx: audio seconds / runner
        seconds over all clips; linears_quantized: "N/M" over encoder and decoder, from export_report.json).
    Raises:
        RuntimeError: the export failed (its own message is printed above).
    """
    from ..audio import load_audio
    from ..export.cli import main as export_main
    from ..runtime.pte_model import PteModel
    from ..runtime.transcribe import Transcriber
    from ..tokenizer import Tokenizer

    out = work / f"{recipe}-{backend}" if group_size is None else work / f"{recipe}-{backend}-g{group_size}"
    extra = [] if group_size is None else ["--group-size", str(group_size)]
    t0 = time.perf_counter()
    if export_main(["--model", model_path, "--backend", backend, "--quantize", recipe, "--output-dir", str(out),
                    *extra]):
        raise RuntimeError(f"export of {recipe} on {backend} failed")
    export_s = time.perf_counter() - t0
    transcriber = Transcriber(PteModel(out / "model.pte"), Tokenizer(out / "tokenizer.model"))
    rate = transcriber.model.metadata.sample_rate
    clips = [load_audio(p, rate) for p in paths]
    t0 = time.perf_counter()
    texts = [transcriber.transcribe(c).text for c in clips]
    run_s = time.perf_counter() - t0
    audio_s = sum(len(c) for c in clips) / rate
    parts = json.loads((out / "export_report.json").read_text())["parts"].values()
    quantized = sum(p.get("quantized") or 0 for p in parts)
    total = sum(p.get("linear_layers") or 0 for p in parts)
    return texts, {"linears_quantized": f"{quantized}/{total}" if recipe != "none" else "","export_s": round(export_s, 1), "pte_mb": round((out / "model.pte").stat().st_size / 1e6, 2),
                   "rtfx": round(audio_s / run_s, 1)}


def _table(results: list[dict]) -> str:
    lines = ["| system | recipe | backend | group size | linears quantized | WER % | Δ vs fp32 .pte (points) | "
             "same text as NeMo eager | .pte MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    base = next((r["wer"] for r in results if r["system"] == "pte" and r["recipe"] == "none"), None)
    for r in results:
        delta = "" if base is None or r["system"] != "pte" else f"{100 * (r['wer'] - base):+.2f}"
        lines.append(f"| {r['system']} | {r['recipe']} | {r['backend']} | {r.get('group_size') or ''} | "
                     f"{r.get('linears_quantized', '')} | {100 * r['wer']:.2f} | {delta} | "
                     f"{r['same_as_nemo']}/{r['clips']} | {r.get('pte_mb', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from importlib.resources import files

    p = argparse.ArgumentParser(prog="parakeet-eval-wer", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(files("parakeet_executorch") / "demo_model" / "parakeet-tdt-demo.nemo"),
                   help="the .nemo to evaluate (default: the shipped demo model)")
    p.add_argument("--out", required=True, help="folder for the test set, exports and results")
    p.add_argument("--clips", type=int, default=200, help="test clips (distinct held-out sentences)")
    p.add_argument("--seed", type=int, default=2026, help="test-set seed (not the training or dev seed)")
    p.add_argument("--train-utterances", type=int, default=12000, help="as given to parakeet-train-demo")
    p.add_argument("--train-seed", type=int, default=0, help="as given to parakeet-train-demo")
    p.add_argument("--recipes", nargs="*", default=DEFAULT_RECIPES, metavar="RECIPE:BACKEND[:GROUP_SIZE]",
                   help=f"default: {' '.join(DEFAULT_RECIPES)}")
    args = p.parse_args(argv)

    from ..export.backends import BACKENDS
    from ..export.recipes import RECIPES, RecipeError, check_recipe

    pairs = []
    for item in args.recipes:
        fields = item.split(":")
        recipe, backend, rest = fields[0], fields[1] if len(fields) > 1 else "", fields[2:]
        if recipe not in RECIPES or backend not in BACKENDS or len(rest) > 1 or (rest and not rest[0].isdigit()):
            p.error(f"{item!r}: expected RECIPE:BACKEND[:GROUP_SIZE] with RECIPE in {RECIPES} and BACKEND in "
                    f"{BACKENDS}")
        group_size = int(rest[0]) if rest else None
        try:
            check_recipe(recipe, backend, group_size)
        except RecipeError as e:
            p.error(str(e))
        pairs.append((recipe, backend, group_size))
    if not Path(args.model).is_file():
        p.error(f"--model {args.model} not found")
    if args.clips < 1:
        p.error("--clips must be positive")
    if args.seed in (args.train_seed, args.train_seed + 1):
        p.error(f"--seed {args.seed} is used by training (sentences {args.train_seed}, dev set "
                f"{args.train_seed + 1}); pick another")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = make_test_set(out, args.clips, args.seed, args.train_utterances, args.train_seed)
    refs, paths = [r["text"] for r in rows], [r["path"] for r in rows]
    from .train import word_error_rate

    eager = nemo_texts(args.model, paths)
    results = [{"system": "nemo-eager", "recipe": "none", "backend": "pytorch", "wer": word_error_rate(refs, eager),
                "same_as_nemo": len(rows), "clips": len(rows)}]
    print(f"NeMo eager: WER {100 * results[0]['wer']:.2f} %", flush=True)
    for recipe, backend, group_size in pairs:
        texts, info = pte_texts(args.model, recipe, backend, group_size, out / "pte", paths)
        same = sum(a == b for a, b in zip(texts, eager))
        results.append({"system": "pte", "recipe": recipe, "backend": backend, "group_size": group_size,
                        "wer": word_error_rate(refs, texts), "same_as_nemo": same, "clips": len(rows), **info})
        print(f"{recipe} on {backend} (group size {group_size or 'default'}): WER {100 * results[-1]['wer']:.2f} %, {same}/{len(rows)} transcripts as "
              f"NeMo eager", flush=True)
    meta = {"model": args.model, "clips": len(rows), "seed": args.seed, "words": sum(len(r.split()) for r in refs)}
    (out / "results.json").write_text(json.dumps({"test_set": meta, "results": results}, indent=1) + "\n")
    table = _table(results)
    (out / "results.md").write_text(f"Held-out test set: {meta['clips']} clips, {meta['words']} words, "
                                    f"seed {meta['seed']}.\n\n{table}")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
