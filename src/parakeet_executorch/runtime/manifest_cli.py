"""``parakeet-transcribe --manifest in.jsonl --output out.jsonl``: the command line's side of manifest mode (its
flags checked, the run, the summary and exit status); the work is ``manifest.transcribe_manifest``."""

from __future__ import annotations

import os
import sys

from .cli_warnings import PROG, printed_warnings
from .longform import LongFormOptions


def usage_error(args, live: bool) -> str | None:
    """What is wrong with the manifest flags of the command line, or None."""
    if args.manifest is None:
        return "--output is for --manifest; the transcript of audio files goes to stdout"
    if args.output is None:
        return "--manifest needs --output (the JSONL file of results)"
    if args.audio or live:
        return "--manifest and audio files (or --stream/--mic) are exclusive; pass one of them"
    if args.format is not None:
        return "--format does not apply to --manifest (the output is JSONL); use --timestamps for the levels"
    if args.partial:
        return "--partial is for --stream/--mic"
    if args.workers < 1:
        return "--workers must be at least 1"
    return None


def run_manifest(args, options: LongFormOptions, non_finite: str) -> int:
    """``--manifest``: transcribe a JSONL manifest into ``--output`` (``manifest.transcribe_manifest``)."""
    from ..tokenizer import TokenizerError
    from .manifest import Interrupted, ManifestError, ManifestOptions, WorkerError, transcribe_manifest
    from .pte_checks import PteModelError

    manifest_options = ManifestOptions(
        workers=args.workers,
        timestamps=args.timestamps or "none",
        long_form=options,
        non_finite=non_finite,
        tokenizer=args.tokenizer,
        check_fingerprint=not args.ignore_tokenizer_fingerprint,
        quiet=args.quiet,
    )
    cores = os.cpu_count() or 1
    if args.workers > cores:
        print(
            f"{PROG}: warning: --workers {args.workers} is more than the {cores} cores; each worker holds its own "
            "copy of the model, so this adds memory, not speed",
            file=sys.stderr,
        )
    try:
        with printed_warnings():
            summary = transcribe_manifest(args.manifest, args.output, args.model, manifest_options)
    except (Interrupted, KeyboardInterrupt) as exc:
        written = exc.written if isinstance(exc, Interrupted) else 0
        print(
            f"{PROG}: interrupted: {written} files written this run; run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    except OSError as exc:  # e.g. --output under /proc or /sys, which the path checks cannot foresee
        what = f"cannot open {exc.filename}" if exc.filename else "a file operation failed"
        print(
            f"{PROG}: error: {what}: {exc.strerror or exc}; pick a path in a folder you can write to",
            file=sys.stderr,
        )
        return 2
    except (ManifestError, TokenizerError, PteModelError, WorkerError) as exc:
        print(f"{PROG}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if not args.quiet:
        done = summary.total - summary.skipped
        earlier = f" ({summary.skipped} finished earlier)" if summary.skipped else ""
        print(
            f"{args.output}: {done} of {summary.total} files done in this run{earlier}; "
            f"{summary.audio_seconds / 3600:.3f} h of audio in {summary.wall_seconds:.1f} s, RTFx {summary.rtfx:.1f}",
            file=sys.stderr,
        )
    if summary.failed:
        print(f"{PROG}: {summary.failed} of {summary.total} files failed", file=sys.stderr)
        return 2
    return 0
