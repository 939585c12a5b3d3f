"""``parakeet-transcribe``: transcribe audio files with an exported .pte (no NeMo needed).

The transcript goes to stdout; stage timings and RTFx (audio seconds / wall seconds) go to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .formats import LEVELS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="parakeet-transcribe",
                                description="Transcribe audio with a Parakeet TDT .pte exported by parakeet-export.")
    p.add_argument("audio", nargs="+", help="audio files (WAV, FLAC, OGG, MP3; any rate and channel count)")
    p.add_argument("--model", required=True, help="model.pte written by parakeet-export")
    p.add_argument("--tokenizer", help="tokenizer.model (default: the one next to --model)")
    p.add_argument("--format", choices=("txt", "json", "srt", "vtt"), default="txt")
    p.add_argument("--timestamps", choices=tuple(LEVELS), default=None,
                   help="timestamp levels for txt/json (default: none for txt, all for json)")
    return p


def transcribe_files(transcriber, paths) -> list:
    """Transcribe each file with ``transcriber`` (a ``Transcriber``), printing per-file stage timings and RTFx to
    stderr. Returns ``[(path, Transcript), ...]`` in input order. Raises ``AudioError`` for unreadable audio and
    ``PteModelError`` when a method fails."""
    from ..audio import load_audio

    results = []
    for path in paths:
        audio = load_audio(path, transcriber.model.metadata.sample_rate)
        t1 = time.perf_counter()
        transcript = transcriber.transcribe(audio)
        wall = time.perf_counter() - t1
        stages = ", ".join(f"{k}: {v:.3f} s" for k, v in transcript.timings.items())
        rtfx = transcript.audio_seconds / wall if wall > 0 else float("inf")
        print(f"{path}: {transcript.audio_seconds:.2f} s of audio; {stages}; RTFx {rtfx:.1f}", file=sys.stderr)
        results.append((path, transcript))
    return results


def load_transcriber(model: str | Path, tokenizer: str | Path | None = None):
    """A ``Transcriber`` over ``model`` (a .pte) and ``tokenizer`` (default: ``tokenizer.model`` next to it); prints
    the load time to stderr. Raises ``PteModelError`` / ``TokenizerError`` naming the file at fault."""
    from ..tokenizer import Tokenizer
    from .pte_model import PteModel
    from .transcribe import Transcriber

    tokenizer_path = Path(tokenizer) if tokenizer else Path(model).with_name("tokenizer.model")
    t0 = time.perf_counter()
    transcriber = Transcriber(PteModel(model), Tokenizer(tokenizer_path))
    print(f"load: {time.perf_counter() - t0:.3f} s", file=sys.stderr)
    return transcriber


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ..audio import AudioError
    from ..tokenizer import TokenizerError
    from .formats import render
    from .pte_model import PteModelError

    timestamps = args.timestamps or ("all" if args.format == "json" else "none")
    try:
        results = transcribe_files(load_transcriber(args.model, args.tokenizer), args.audio)
    except (AudioError, TokenizerError, PteModelError) as exc:
        print(f"parakeet-transcribe: error: {exc}", file=sys.stderr)
        return 2
    print(render(results, args.format, timestamps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
