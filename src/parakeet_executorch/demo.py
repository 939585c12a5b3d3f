"""``parakeet-demo``: the main job end to end on the bundled demo model, with nothing downloaded.

Exports the shipped demo model (``demo_model/``: a small Parakeet TDT trained on synthetic espeak-ng speech, see
its MODEL_CARD.md) or ``--model`` to XNNPACK, and transcribes the shipped sample clip (or ``--audio``) with the
Python runner, printing word timestamps. On the default clip it also says whether the transcript equals the
sentence the clip was synthesized from; ``--check`` compares the runner's tokens with NeMo's own ``transcribe()``.
"""

from __future__ import annotations

import sys
from importlib.resources import files
from pathlib import Path

from .cli_parser import ArgumentParser
from .library_log import VERBOSE_HELP, quiet_cli

DEMO_DIR = Path(str(files("parakeet_executorch") / "demo_model"))
DEMO_MODEL = DEMO_DIR / "parakeet-tdt-demo.nemo"
DEMO_AUDIO = DEMO_DIR / "sample.wav"
DEMO_TEXT = DEMO_DIR / "sample.txt"


@quiet_cli("parakeet-demo")
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="parakeet-demo", description=__doc__.splitlines()[0])
    p.add_argument(
        "--model", default=str(DEMO_MODEL), help=".nemo or Hugging Face id (default: the bundled demo model)"
    )
    p.add_argument("--audio", default=str(DEMO_AUDIO), help="clip to transcribe (default: the bundled sample)")
    p.add_argument("--backend", default="xnnpack", choices=("portable", "xnnpack"))
    p.add_argument("--out", default="artifacts/demo", help="working folder for the .nemo and the export")
    p.add_argument("--check", action="store_true", help="also run NeMo's transcribe() and compare tokens")
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="export again instead of reusing the export cached in the user cache directory",
    )
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    args = p.parse_args(argv)

    audio = Path(args.audio)
    if not audio.is_file():
        p.error(f"audio clip {audio} not found; pass --audio PATH (any WAV/FLAC/OGG/MP3)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model.endswith(".nemo") and not Path(model).is_file():
        p.error(f"model {model} not found; pass a .nemo file or a Hugging Face id")

    from .export.cache import cached_export

    export_dir = out / args.backend
    if cached_export(model, args.backend, export_dir, use_cache=not args.no_cache) != 0:
        return 2
    from .audio import AudioError
    from .runtime.cli import load_transcriber, transcribe_files
    from .runtime.formats import render
    from .runtime.pte_checks import PteModelError
    from .tokenizer import TokenizerError

    # One load and one transcription, reused by both checks.
    try:
        results = transcribe_files(load_transcriber(export_dir / "model.pte"), [str(audio)])
    except (AudioError, TokenizerError, PteModelError) as exc:
        print(f"parakeet-demo: error: {exc}", file=sys.stderr)
        return 2
    print(render(results, "txt", "word"))
    transcript = results[0][1]
    rc = 0
    if audio.resolve() == DEMO_AUDIO.resolve() and Path(model).resolve() == DEMO_MODEL.resolve():
        rc = _check_expected_text(transcript.text)
    if rc != 0 or not args.check:
        return rc
    return _check_against_nemo(model, [t.id for t in transcript.tokens], audio)


def _check_expected_text(text: str) -> int:
    expected = DEMO_TEXT.read_text().strip()
    print(f"spoken: {expected!r}\nheard:  {text!r}: {'exact match' if text == expected else 'DIFFERENT'}")
    return 0 if text == expected else 1


def _check_against_nemo(model: str, ours: list[int], audio: Path) -> int:
    from .export.load import load_nemo_model

    hyp = load_nemo_model(model).transcribe([str(audio)], batch_size=1, verbose=False)[0]
    ref = [int(i) for i in hyp.y_sequence]
    same = ours == ref
    print(f"NeMo check: {len(ours)} tokens from the .pte, {len(ref)} from NeMo: {'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
