"""``parakeet-transcribe``: transcribe audio files with an exported .pte (no NeMo needed).

The transcript goes to stdout; stage timings and RTFx (audio seconds / wall seconds) go to stderr. Every file that
can be read is transcribed; each one that cannot gets one ``error:`` line on stderr naming it (and an ``error``
entry in JSON output), and the exit status is then 2.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .formats import LEVELS

PROG = "parakeet-transcribe"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG,
                                description="Transcribe audio with a Parakeet TDT .pte exported by parakeet-export.")
    p.add_argument("audio", nargs="+", help="audio files (WAV, FLAC, OGG, MP3; any rate and channel count)")
    p.add_argument("--model", required=True, help="model.pte written by parakeet-export")
    p.add_argument("--tokenizer", help="tokenizer.model (default: the one next to --model)")
    p.add_argument("--format", choices=("txt", "json", "srt", "vtt"), default="txt")
    p.add_argument("--timestamps", choices=tuple(LEVELS), default=None,
                   help="timestamp levels for txt/json (default: none for txt, all for json)")
    p.add_argument("--zero-non-finite", action="store_true",
                   help="replace NaN/Inf samples by silence (with a warning) instead of refusing the file")
    p.add_argument("--ignore-tokenizer-fingerprint", action="store_true",
                   help="accept a tokenizer other than the one the .pte was exported with (its size must still "
                        "match)")
    return p


@contextmanager
def printed_warnings(prog: str = PROG) -> Iterator[None]:
    """Print this package's warnings (AudioWarning, TokenizerWarning) as ``prog: warning: ...`` lines on stderr.

    Other warnings raised in the body are re-issued unchanged after it.
    """
    from ..audio import AudioWarning
    from ..tokenizer import TokenizerWarning

    ours = (AudioWarning, TokenizerWarning)
    pending: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            for category in ours:
                warnings.simplefilter("always", category)
            try:
                yield
            finally:
                pending = list(caught)
    finally:
        # Emitted outside catch_warnings, so that foreign warnings obey the caller's filters again; and also when
        # the body raised (a warning about a file may explain its error).
        for w in pending:
            if issubclass(w.category, ours):
                print(f"{prog}: warning: {w.message}", file=sys.stderr)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _naming(path, exc: Exception) -> str:
    text = " ".join(str(exc).split())  # one line
    return text if str(path) in text else f"{path}: {text}"


def transcribe_files(transcriber, paths, *, keep_going: bool = False, non_finite: str = "error",
                     prog: str = PROG) -> list:
    """Transcribe each file with ``transcriber`` (a ``Transcriber``), printing per-file stage timings and RTFx to
    stderr.

    Args:
        keep_going: False raises on the first file that fails; True reports it on stderr (``prog: error: ...``,
            naming the file), puts a ``formats.Failure`` in its place and goes on with the next.
        non_finite: ``"error"`` or ``"zero"`` (``audio.load_audio``).
    Returns:
        ``[(path, Transcript or Failure), ...]`` in input order.
    Raises:
        AudioError (unreadable audio) or PteModelError (a method failed, audio too long), unless ``keep_going``.
    """
    from ..audio import AudioError, load_audio
    from .formats import Failure
    from .pte_model import PteModelError

    results = []
    for path in paths:
        try:
            with printed_warnings(prog):
                audio = load_audio(path, transcriber.model.metadata.sample_rate, non_finite=non_finite)
            t1 = time.perf_counter()
            transcript = transcriber.transcribe(audio)
        except (AudioError, PteModelError) as exc:
            if not keep_going:
                raise
            message = _naming(path, exc)
            print(f"{prog}: error: {message}", file=sys.stderr)
            results.append((path, Failure(message)))
            continue
        wall = time.perf_counter() - t1
        stages = ", ".join(f"{k}: {v:.3f} s" for k, v in transcript.timings.items())
        rtfx = transcript.audio_seconds / wall if wall > 0 else float("inf")
        print(f"{path}: {transcript.audio_seconds:.2f} s of audio; {stages}; RTFx {rtfx:.1f}", file=sys.stderr)
        results.append((path, transcript))
    return results


def load_transcriber(model: str | Path, tokenizer: str | Path | None = None, *, check_fingerprint: bool = True):
    """A ``Transcriber`` over ``model`` (a .pte) and ``tokenizer`` (default: ``tokenizer.model`` next to it); prints
    the load time to stderr. Raises ``PteModelError`` / ``TokenizerError`` naming the file at fault."""
    from ..tokenizer import Tokenizer
    from .pte_model import PteModel
    from .transcribe import Transcriber

    tokenizer_path = Path(tokenizer) if tokenizer else Path(model).with_name("tokenizer.model")
    t0 = time.perf_counter()
    with printed_warnings():
        transcriber = Transcriber(PteModel(model), Tokenizer(tokenizer_path), check_fingerprint=check_fingerprint)
    print(f"load: {time.perf_counter() - t0:.3f} s", file=sys.stderr)
    return transcriber


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ..tokenizer import TokenizerError
    from .formats import Failure, render
    from .pte_model import PteModelError

    timestamps = args.timestamps or ("all" if args.format == "json" else "none")
    try:
        transcriber = load_transcriber(args.model, args.tokenizer,
                                       check_fingerprint=not args.ignore_tokenizer_fingerprint)
    except (TokenizerError, PteModelError) as exc:
        print(f"{PROG}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    results = transcribe_files(transcriber, args.audio, keep_going=True,
                               non_finite="zero" if args.zero_non_finite else "error")
    failed = sum(isinstance(t, Failure) for _, t in results)
    if failed < len(results):  # nothing on stdout when no file could be transcribed
        print(render(results, args.format, timestamps))
    if failed:
        if len(results) > 1:
            print(f"{PROG}: {failed} of {len(results)} files failed", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
