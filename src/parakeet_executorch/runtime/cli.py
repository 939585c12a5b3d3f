"""``parakeet-transcribe``: transcribe audio files, or live audio, with an exported .pte (no NeMo needed).

Files that fit in one window (left + chunk + right context) are transcribed in one pass; longer ones are read block
by block and decoded with buffered left | chunk | right decoding (``buffered.py``, ``longform.py``), so any length
works in flat memory. ``--stream -`` reads raw 16-bit PCM from stdin and ``--mic`` records from the default input
device; both print text as it is decided (``live.py``). The transcript goes to stdout; stage timings and RTFx
(audio seconds / wall seconds) go to stderr. Every file that can be read is transcribed; each one that cannot gets
one ``error:`` line on stderr naming it (and an ``error`` entry in JSON output), and the exit status is then 2.
``--manifest in.jsonl --output out.jsonl`` transcribes a NeMo-style manifest into JSONL, resumably, with
``--workers`` processes (``manifest_cli.py``, ``manifest.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..cli_parser import ArgumentParser
from ..library_log import VERBOSE_HELP, quiet_cli
from .cli_warnings import PROG, printed_warnings
from .formats import LEVELS
from .longform import FILE_CONTEXT, LIVE_CONTEXT, LongFormOptions, transcribe_file
from .process_memory import return_large_buffers_to_the_os
from .pte_runtime import RUNTIMES, resolve_runtime
from .threads import MAX_THREADS, cpu_threads


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog=PROG, description="Transcribe audio with a Parakeet TDT .pte exported by parakeet-export.")
    p.add_argument("audio", nargs="*", help="audio files (WAV, FLAC, OGG, MP3; any rate, channel count and length)")
    p.add_argument("--model", required=True, help="model.pte written by parakeet-export")
    p.add_argument("--tokenizer", help="tokenizer.model (default: the one next to --model)")
    p.add_argument(
        "--format",
        choices=("txt", "json", "jsonl", "srt", "vtt"),
        type=lambda name: "txt" if name == "text" else name,  # the C++ runner's spelling of txt
        default=None,
        help="default txt; jsonl: one JSON object per file, or per decoded chunk with --stream/--mic",
    )
    p.add_argument(
        "--timestamps",
        choices=tuple(LEVELS),
        default=None,
        help="timestamp levels for txt/json (default: none for txt, all for json)",
    )
    p.add_argument(
        "--zero-non-finite",
        action="store_true",
        help="replace NaN/Inf samples by silence (with a warning) instead of refusing the file",
    )
    p.add_argument(
        "--ignore-tokenizer-fingerprint",
        action="store_true",
        help="accept a tokenizer other than the one the .pte was exported with (its size must still match)",
    )
    g = p.add_argument_group("long audio (buffered left | chunk | right decoding)")
    add_context_flags(g)
    g.add_argument("--quiet", action="store_true", help="no progress bar or per-file timings on stderr")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="benchmark: transcribe each file N times in this process (warm after load), one timing line per run "
        "and the medians on stderr; the transcript is printed once",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads for the model (ExecuTorch's thread pool; default: one per core)",
    )
    p.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default="auto",
        help="native: the C interface over ExecuTorch's runtime, built with the C++ runner (no torch in the "
        "process, ~370 MiB less); pybind: ExecuTorch's Python bindings; auto (default): native where it is built",
    )
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    m = p.add_argument_group("manifest mode (a corpus, resumable)")
    m.add_argument("--manifest", help='NeMo-style JSONL manifest: one {"audio_filepath", ...} object per line')
    m.add_argument(
        "--output", help="JSONL results: each input line plus pred_text (or error); a rerun skips finished lines"
    )
    m.add_argument("--workers", type=int, default=1, help="processes, each with its own model (default 1)")
    s = p.add_argument_group("live audio")
    s.add_argument("--stream", metavar="-", help="read raw signed 16-bit little-endian PCM from stdin ('-')")
    s.add_argument("--stream-rate", type=int, default=16000, help="sample rate of --stream / --mic (Hz)")
    s.add_argument("--stream-channels", type=int, default=1, help="channels of --stream / --mic")
    s.add_argument("--mic", action="store_true", help="record from the default input device (needs sounddevice)")
    s.add_argument(
        "--partial",
        action="store_true",
        help="also show a draft of the right context (stderr for txt, 'draft' key for jsonl)",
    )
    return p


def add_context_flags(group, live: bool = True) -> None:
    """The context flags (``--chunk-seconds``, ``--left-context-seconds``, ``--right-context-seconds``; None when
    absent, see ``resolve_context``), shared with ``parakeet-transcribe-ray`` (``live=False``: no live defaults in
    the help)."""

    def default(i: int) -> str:
        file = (
            "the .pte's bound less both contexts, evened out over the file"
            if FILE_CONTEXT[i] is None
            else f"{FILE_CONTEXT[i]:g}"
        )
        return f"default {file}" + (f"; live {LIVE_CONTEXT[i]:g}" if live else "")

    group.add_argument(
        "--chunk-seconds",
        type=float,
        default=None,
        help=f"audio decoded per window ({default(1)}); 0 = one pass, refusing audio past the .pte's bound",
    )
    group.add_argument(
        "--left-context-seconds",
        type=float,
        default=None,
        help=f"audio before the chunk the encoder sees ({default(0)})",
    )
    group.add_argument(
        "--right-context-seconds",
        type=float,
        default=None,
        help=f"audio after the chunk the encoder sees ({default(2)})",
    )


def resolve_context(args, live: bool) -> LongFormOptions:
    """The context sizes of the command line, with the file or live defaults where a flag is absent."""
    left, chunk, right = LIVE_CONTEXT if live else FILE_CONTEXT
    return LongFormOptions(
        left if args.left_context_seconds is None else args.left_context_seconds,
        chunk if args.chunk_seconds is None else args.chunk_seconds,
        right if args.right_context_seconds is None else args.right_context_seconds,
    )


def _naming(path, exc: Exception) -> str:
    text = " ".join(str(exc).split())  # one line
    return text if str(path) in text else f"{path}: {text}"


def transcribe_files(
    transcriber,
    paths,
    options: LongFormOptions | None = None,
    *,
    quiet: bool = False,
    keep_going: bool = False,
    non_finite: str = "error",
    prog: str = PROG,
    repeat: int = 1,
) -> list:
    """Transcribe each file with ``transcriber`` (a ``Transcriber``), printing per-file stage timings and RTFx to
    stderr (unless ``quiet``).

    Args:
        options: context sizes (default ``FILE_CONTEXT``): files longer than one window are decoded buffered.
        keep_going: False raises on the first file that fails; True reports it on stderr (``prog: error: ...``,
            naming the file), puts a ``formats.Failure`` in its place and goes on with the next.
        non_finite: ``"error"`` or ``"zero"`` (``audio.load_audio``).
        repeat: transcribe each file this many times (a benchmark: one timing line per run, then the medians);
            the transcript of the last run is returned, and a run whose text differs from the first is reported.
    Returns:
        ``[(path, Transcript or Failure), ...]`` in input order.
    Raises:
        AudioError (unreadable audio) or PteModelError (a method failed, audio too long, bad context sizes),
        unless ``keep_going``. ValueError: ``repeat`` < 1.
    """
    from ..audio import AudioError
    from .formats import Failure
    from .pte_checks import PteModelError

    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    options = options or LongFormOptions(*FILE_CONTEXT)
    results = []
    for path in paths:
        runs = []  # (transcript, wall seconds)
        try:
            for _ in range(repeat):
                t1 = time.perf_counter()
                with printed_warnings(prog):
                    transcript = transcribe_file(transcriber, path, options, quiet, non_finite)
                runs.append((transcript, time.perf_counter() - t1))
                if not quiet:
                    run = f" (run {len(runs)}/{repeat})" if repeat > 1 else ""
                    print(f"{path}{run}: {_timing_line(transcript, runs[-1][1])}", file=sys.stderr)
        except (AudioError, PteModelError) as exc:
            if not keep_going:
                raise
            message = _naming(path, exc)
            print(f"{prog}: error: {message}", file=sys.stderr)
            results.append((path, Failure(message)))
            continue
        if repeat > 1 and not quiet:
            print(f"{path}: median of {repeat} runs: {_median_line(runs)}", file=sys.stderr)
        for i, (t, _) in enumerate(runs[1:], 2):
            if t.text != runs[0][0].text:
                print(f"{prog}: warning: {path}: run {i} gave another transcript than run 1", file=sys.stderr)
        results.append((path, runs[-1][0]))
    return results


def _timing_line(transcript, wall: float) -> str:
    """``"S s of audio[; W windows]; preprocess: a s, encode: b s, decode: c s; wall: w s; RTFx r"``, as the C++
    runner prints it (the benchmarks parse both)."""
    windows = transcript.timings.get("windows")
    how = f"; {windows} windows" if windows else ""
    figures = _figures(transcript.timings, transcript.audio_seconds, wall)
    return f"{transcript.audio_seconds:.2f} s of audio{how}; {figures}"


def _median_line(runs: list) -> str:
    """The figures of ``_timing_line`` as medians over ``[(Transcript, wall seconds), ...]`` of one file."""
    import statistics

    stages = {k: statistics.median(t.timings[k] for t, _ in runs) for k in runs[0][0].timings if k != "windows"}
    return _figures(stages, runs[0][0].audio_seconds, statistics.median(w for _, w in runs))


def _figures(timings: dict, audio_seconds: float, wall: float) -> str:
    """``"preprocess: a s, encode: b s, decode: c s; wall: w s; RTFx r"`` (the ``windows`` count left out)."""
    stages = ", ".join(f"{k}: {v:.3f} s" for k, v in timings.items() if k != "windows")
    rtfx = audio_seconds / wall if wall > 0 else float("inf")
    return f"{stages}; wall: {wall:.3f} s; RTFx {rtfx:.1f}"


def load_transcriber(
    model: str | Path,
    tokenizer: str | Path | None = None,
    *,
    check_fingerprint: bool = True,
    runtime: str = "auto",
):
    """A ``Transcriber`` over ``model`` (a .pte) and ``tokenizer`` (default: ``tokenizer.model`` next to it), warmed
    up (``SinglePassTranscriber.warm_up``), on ``runtime`` (``pte_runtime.RUNTIMES``); prints the load time, warm-up
    included, the thread count and the runtime to stderr. Raises ``PteModelError`` / ``TokenizerError`` naming the
    file at fault."""
    from ..tokenizer import Tokenizer
    from .pte_runtime import load_pte, runtime_name
    from .transcribe import Transcriber

    tokenizer_path = Path(tokenizer) if tokenizer else Path(model).with_name("tokenizer.model")
    t0 = time.perf_counter()
    with printed_warnings():
        pte = load_pte(model, runtime)
        transcriber = Transcriber(pte, Tokenizer(tokenizer_path), check_fingerprint=check_fingerprint)
        transcriber.warm_up()  # the runtime's first-call cost belongs to loading, not to the first file's timing
    threads = cpu_threads(runtime_name(pte))
    figures = f"load: {time.perf_counter() - t0:.3f} s" + (f", {threads} CPU threads" if threads else "")
    print(f"{figures}, {runtime_name(pte)} runtime", file=sys.stderr)
    return transcriber


def _usage_error(args) -> str | None:
    live = args.stream is not None or args.mic
    if args.repeat < 1:
        return f"--repeat must be a positive number of runs, not {args.repeat}"
    if args.repeat != 1 and (live or args.manifest is not None):
        return "--repeat is for audio files; it cannot be used with --stream, --mic or --manifest"
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        return f"--threads must be between 1 and {MAX_THREADS}, not {args.threads}"
    if args.threads is not None and args.manifest is not None:
        return (
            "--threads is for audio files and live audio; in manifest mode each of the --workers runs on "
            "cores / workers threads"
        )
    if args.manifest is not None or args.output is not None:
        from .manifest_cli import usage_error

        return usage_error(args, live)
    if args.workers != 1:
        return "--workers is for --manifest"
    if args.stream is not None and args.stream != "-":
        return "--stream takes '-' (standard input); pass audio files as arguments instead"
    if args.stream is not None and args.mic:
        return "--stream and --mic are two inputs; pick one"
    if live and args.audio:
        return "audio files and --stream/--mic are exclusive; pass one of them"
    if not live and not args.audio:
        return "no input: pass audio files, --manifest (with --output), --stream - (raw PCM on stdin) or --mic"
    if live and args.format in ("json", "srt", "vtt"):
        return f"--format {args.format} needs the whole transcript; with --stream/--mic use txt or jsonl"
    if live and args.chunk_seconds == 0:
        return "--chunk-seconds 0 (one pass) cannot be used with --stream/--mic"
    if args.stream_rate <= 0 or args.stream_channels <= 0:
        return "--stream-rate and --stream-channels must be positive"
    return None


@quiet_cli(PROG)
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = _usage_error(args)
    if problem:
        parser.error(problem)
    return_large_buffers_to_the_os()

    live = args.stream is not None or args.mic
    options = resolve_context(args, live)
    non_finite = "zero" if args.zero_non_finite else "error"
    if args.manifest is not None:
        from .manifest_cli import run_manifest

        return run_manifest(args, options, non_finite)
    # All model computation runs on ExecuTorch's thread pool; under pybind torch only wraps the inputs and outputs.
    # With more intra-op threads, torch's OpenMP workers spin after each input copy and take a core from
    # ExecuTorch's pool (2 cores: a 625 x 1024 x 1024 linear in an XNNPACK .pte takes 10.2 ms beside them, 6.4 ms
    # without). The native runtime never imports torch.
    runtime = resolve_runtime(args.runtime)
    torch_threads = _torch_threads(1) if runtime == "pybind" else None
    from .threads import ThreadsError, oversubscription_warning, set_cpu_threads

    pool_threads = cpu_threads(runtime) if args.threads is not None else None
    try:
        if args.threads is not None:
            set_cpu_threads(args.threads, runtime)
            warning = oversubscription_warning(args.threads)
            if warning:
                print(f"{PROG}: warning: {warning}", file=sys.stderr)
        return _transcribe(args, options, non_finite, live)
    except ThreadsError as exc:
        print(f"{PROG}: error: --threads: {exc}", file=sys.stderr)
        return 2
    finally:
        # main() called in-process leaves torch, and ExecuTorch's pool, as it found them
        if torch_threads is not None:
            _torch_threads(torch_threads)
        if pool_threads is not None:
            set_cpu_threads(pool_threads, runtime)


def _torch_threads(threads: int) -> int:
    """Set torch's intra-op thread count; returns the count it had."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    return before


def _transcribe(args, options: LongFormOptions, non_finite: str, live: bool) -> int:
    from ..audio import AudioError
    from ..tokenizer import TokenizerError
    from .formats import Failure, render
    from .pte_checks import PteModelError

    args.format = args.format or "txt"
    timestamps = args.timestamps or ("all" if args.format in ("json", "jsonl") else "none")
    try:
        transcriber = load_transcriber(
            args.model, args.tokenizer, check_fingerprint=not args.ignore_tokenizer_fingerprint, runtime=args.runtime
        )
        if live:
            from .live import run_live

            return run_live(transcriber, args, options, timestamps)
        if options.chunk_seconds != 0:
            from .longform import context_frames

            context_frames(transcriber, options)  # bad context sizes fail once, before any file
    except (AudioError, TokenizerError, PteModelError) as exc:
        print(f"{PROG}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    results = transcribe_files(
        transcriber, args.audio, options, quiet=args.quiet, keep_going=True, non_finite=non_finite, repeat=args.repeat
    )
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
