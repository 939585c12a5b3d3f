"""``parakeet-transcribe``: transcribe audio files, or live audio, with an exported .pte (no NeMo needed).

Files that fit in one window (left + chunk + right context) are transcribed in one pass; longer ones are read block
by block and decoded with buffered left | chunk | right decoding (``buffered.py``), so any length works in flat
memory. ``--stream -`` reads raw 16-bit PCM from stdin and ``--mic`` records from the default input device; both
print text as it is decided. The transcript goes to stdout; stage timings and RTFx (audio seconds / wall seconds)
go to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .formats import LEVELS

# Defaults measured on the full-size model (benchmarks/bench_longform.py): a 56 s window, within the .pte's default
# 60 s bound, decodes 48 s per encoder call.
FILE_CONTEXT = (4.0, 48.0, 4.0)
# Live audio: NeMo's streaming defaults (theoretical latency = chunk + right context = 3.2 s).
LIVE_CONTEXT = (10.0, 1.6, 1.6)


@dataclass(frozen=True)
class LongFormOptions:
    """Buffered decoding sizes in seconds; ``chunk_seconds == 0`` means one pass only (audio past the bound fails)."""

    left_context_seconds: float
    chunk_seconds: float
    right_context_seconds: float

    @property
    def window_seconds(self) -> float:
        return self.left_context_seconds + self.chunk_seconds + self.right_context_seconds


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="parakeet-transcribe",
                                description="Transcribe audio with a Parakeet TDT .pte exported by parakeet-export.")
    p.add_argument("audio", nargs="*", help="audio files (WAV, FLAC, OGG, MP3; any rate, channel count and length)")
    p.add_argument("--model", required=True, help="model.pte written by parakeet-export")
    p.add_argument("--tokenizer", help="tokenizer.model (default: the one next to --model)")
    p.add_argument("--format", choices=("txt", "json", "jsonl", "srt", "vtt"), default="txt",
                   help="jsonl: one JSON object per file, or per decoded chunk with --stream/--mic")
    p.add_argument("--timestamps", choices=tuple(LEVELS), default=None,
                   help="timestamp levels for txt/json (default: none for txt, all for json)")
    g = p.add_argument_group("long audio (buffered left | chunk | right decoding)")
    g.add_argument("--chunk-seconds", type=float, default=None,
                   help=f"audio decoded per window (default {FILE_CONTEXT[1]:g}; live {LIVE_CONTEXT[1]:g}); "
                        "0 = one pass, refusing audio past the .pte's bound")
    g.add_argument("--left-context-seconds", type=float, default=None,
                   help=f"audio before the chunk the encoder sees (default {FILE_CONTEXT[0]:g}; live "
                        f"{LIVE_CONTEXT[0]:g})")
    g.add_argument("--right-context-seconds", type=float, default=None,
                   help=f"audio after the chunk the encoder sees (default {FILE_CONTEXT[2]:g}; live "
                        f"{LIVE_CONTEXT[2]:g})")
    g.add_argument("--quiet", action="store_true", help="no progress bar or per-file timings on stderr")
    s = p.add_argument_group("live audio")
    s.add_argument("--stream", metavar="-", help="read raw signed 16-bit little-endian PCM from stdin ('-')")
    s.add_argument("--stream-rate", type=int, default=16000, help="sample rate of --stream / --mic (Hz)")
    s.add_argument("--stream-channels", type=int, default=1, help="channels of --stream / --mic")
    s.add_argument("--mic", action="store_true", help="record from the default input device (needs sounddevice)")
    s.add_argument("--partial", action="store_true",
                   help="also show a draft of the right context (stderr for txt, 'draft' key for jsonl)")
    return p


def resolve_context(args, live: bool) -> LongFormOptions:
    """The context sizes of the command line, with the file or live defaults where a flag is absent."""
    left, chunk, right = LIVE_CONTEXT if live else FILE_CONTEXT
    return LongFormOptions(
        left if args.left_context_seconds is None else args.left_context_seconds,
        chunk if args.chunk_seconds is None else args.chunk_seconds,
        right if args.right_context_seconds is None else args.right_context_seconds)


def context_frames(transcriber, options: LongFormOptions):
    """``ContextSize`` in encoder frames for ``options``; raises ``ContextError`` for sizes the .pte cannot take."""
    from .buffered import BufferedDecoder, ContextSize

    meta = transcriber.model.metadata
    context = ContextSize.from_seconds(options.left_context_seconds, options.chunk_seconds,
                                       options.right_context_seconds, meta.window_stride, meta.subsampling_factor)
    BufferedDecoder(transcriber, context)  # checks the window against the .pte's bound
    return context


def transcribe_file(transcriber, path, options: LongFormOptions, quiet: bool = False):
    """Transcribe one file: one pass if it fits in one window (or ``chunk_seconds == 0``), else buffered decoding
    over blocks read from disk. Returns a ``Transcript``. Raises ``AudioError``, ``PteModelError`` (and its
    ``ContextError``/``AudioRangeError``)."""
    from ..audio import load_audio
    from ..audio_stream import audio_info, read_blocks
    from .buffered import transcribe_buffered

    rate = transcriber.model.metadata.sample_rate
    if options.chunk_seconds == 0:
        return transcriber.transcribe(load_audio(path, rate))
    context = context_frames(transcriber, options)
    info = audio_info(path)
    if info.seconds <= options.window_seconds:
        return transcriber.transcribe(load_audio(path, rate))
    bar = _progress_bar(info.seconds, quiet)
    try:
        return transcribe_buffered(transcriber, read_blocks(path, rate), context,
                                   on_update=None if bar is None else (lambda _u, n: bar.update(n / rate - bar.n)))
    finally:
        if bar is not None:
            bar.close()


def _progress_bar(total_seconds: float, quiet: bool):
    if quiet or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=round(total_seconds, 2), unit="s", unit_scale=False, file=sys.stderr, leave=False,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s audio [{elapsed}<{remaining}]")


def transcribe_files(transcriber, paths, options: LongFormOptions | None = None, quiet: bool = False) -> list:
    """Transcribe each file with ``transcriber`` (a ``Transcriber``), printing per-file stage timings and RTFx to
    stderr. Returns ``[(path, Transcript), ...]`` in input order. Raises ``AudioError`` for unreadable audio and
    ``PteModelError`` when a method fails."""
    options = options or LongFormOptions(*FILE_CONTEXT)
    results = []
    for path in paths:
        t1 = time.perf_counter()
        transcript = transcribe_file(transcriber, path, options, quiet)
        wall = time.perf_counter() - t1
        if not quiet:
            stages = ", ".join(f"{k}: {v:.3f} s" for k, v in transcript.timings.items() if k != "windows")
            windows = transcript.timings.get("windows")
            how = f"; {windows} windows" if windows else ""
            rtfx = transcript.audio_seconds / wall if wall > 0 else float("inf")
            print(f"{path}: {transcript.audio_seconds:.2f} s of audio{how}; {stages}; wall: {wall:.3f} s; "
                  f"RTFx {rtfx:.1f}",
                  file=sys.stderr)
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


def _usage_error(args) -> str | None:
    live = args.stream is not None or args.mic
    if args.stream is not None and args.stream != "-":
        return "--stream takes '-' (standard input); pass audio files as arguments instead"
    if args.stream is not None and args.mic:
        return "--stream and --mic are two inputs; pick one"
    if live and args.audio:
        return "audio files and --stream/--mic are exclusive; pass one of them"
    if not live and not args.audio:
        return "no input: pass audio files, --stream - (raw PCM on stdin) or --mic"
    if live and args.format in ("json", "srt", "vtt"):
        return f"--format {args.format} needs the whole transcript; with --stream/--mic use txt or jsonl"
    if live and args.chunk_seconds == 0:
        return "--chunk-seconds 0 (one pass) cannot be used with --stream/--mic"
    if args.stream_rate <= 0 or args.stream_channels <= 0:
        return "--stream-rate and --stream-channels must be positive"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = _usage_error(args)
    if problem:
        parser.error(problem)
    from ..audio import AudioError
    from ..tokenizer import TokenizerError
    from .formats import render
    from .pte_model import PteModelError

    live = args.stream is not None or args.mic
    options = resolve_context(args, live)
    timestamps = args.timestamps or ("all" if args.format in ("json", "jsonl") else "none")
    try:
        transcriber = load_transcriber(args.model, args.tokenizer)
        if live:
            from .live import run_live

            return run_live(transcriber, args, options, timestamps)
        results = transcribe_files(transcriber, args.audio, options, args.quiet)
    except (AudioError, TokenizerError, PteModelError) as exc:
        print(f"parakeet-transcribe: error: {exc}", file=sys.stderr)
        return 2
    print(render(results, args.format, timestamps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
