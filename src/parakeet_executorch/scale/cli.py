"""``parakeet-transcribe-ray``: transcribe a manifest (or audio files) on a Ray cluster into one JSONL or Parquet
file; the work is ``job.prepare`` then ``Job.dataset`` (what ``transcribe_dataset`` does, with ``ray.init`` between
the checks and the run) and ``output.write_results``.

``ray.init()`` joins the cluster at ``RAY_ADDRESS`` when it is set, else starts a local Ray on this machine's CPUs.
Bad input (flags, the output path, the manifest, Ray missing, the model) is one ``parakeet-transcribe-ray: error:``
line on stderr and exit 2, before Ray starts and with nothing written. The output is written whole (temporary file,
then rename): an interrupted or failed run leaves none. Exit 0 when every file has a ``pred_text``, 2 when some
failed (their ``error`` rows are in the output), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from ..cli_parser import ArgumentParser
from ..library_log import VERBOSE_HELP, quiet_cli
from ..runtime.cli import add_context_flags, resolve_context
from ..runtime.cli_warnings import printed_warnings
from ..runtime.formats import LEVELS

PROG = "parakeet-transcribe-ray"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog=PROG,
        description="Transcribe a NeMo-style manifest or audio files with a Parakeet TDT .pte on a Ray cluster "
        "(RAY_ADDRESS) or a local Ray, into one JSONL or Parquet file.",
    )
    p.add_argument("audio", nargs="*", help="audio files (instead of --manifest)")
    p.add_argument("--manifest", help='NeMo-style JSONL manifest: one {"audio_filepath", ...} object per line')
    p.add_argument("--model", required=True, help="model.pte, at the same path on every node")
    p.add_argument("--tokenizer", help="tokenizer.model (default: the one next to --model)")
    p.add_argument(
        "--output",
        required=True,
        help=".jsonl (manifest mode's output lines) or .parquet (the same plus typed columns); written whole",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    r = p.add_argument_group("Ray")
    r.add_argument("--concurrency", type=int, default=1, help="actors, each with its own copy of the model")
    r.add_argument(
        "--num-cpus-per-actor",
        type=float,
        default=1.0,
        help="CPUs Ray reserves per actor; it runs as many threads (default 1)",
    )
    r.add_argument("--batch-size", type=int, default=4, help="files per block and per actor call (default 4)")
    t = p.add_argument_group("transcripts")
    t.add_argument("--timestamps", choices=tuple(LEVELS), default=None, help="timestamp levels in each line")
    t.add_argument("--words", action="store_true", help="word timestamps: the same as --timestamps word")
    t.add_argument(
        "--zero-non-finite",
        action="store_true",
        help="replace NaN/Inf samples by silence (with a warning) instead of failing the file",
    )
    t.add_argument(
        "--ignore-tokenizer-fingerprint",
        action="store_true",
        help="accept a tokenizer other than the one the .pte was exported with (its size must still match)",
    )
    g = p.add_argument_group("long audio (buffered left | chunk | right decoding)")
    add_context_flags(g, live=False)
    p.add_argument("--quiet", action="store_true", help="no progress bars or summary on stderr")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP + "; and Ray's worker output")
    return p


def usage_error(args) -> str | None:
    """What is wrong with the flags alone, or None."""
    if args.manifest is None and not args.audio:
        return "no input: pass --manifest in.jsonl or audio files"
    if args.manifest is not None and args.audio:
        return "--manifest and audio files are exclusive; pass one of them"
    if args.words and args.timestamps not in (None, "word"):
        return f"--words is --timestamps word; it cannot go with --timestamps {args.timestamps}"
    if args.concurrency < 1:
        return "--concurrency must be at least 1"
    if not args.num_cpus_per_actor > 0:
        return "--num-cpus-per-actor must be more than 0"
    if args.batch_size < 1:
        return "--batch-size must be at least 1"
    return None


@quiet_cli(PROG)
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = usage_error(args)
    if problem:
        parser.error(problem)
    try:
        return _run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted: nothing written (the output is written whole); run it again", file=sys.stderr)
        return 130


def _run(args) -> int:
    from ..runtime.manifest_io import ManifestError
    from ..runtime.pte_checks import PteModelError
    from ..tokenizer import TokenizerError
    from .job import ScaleOptions, prepare
    from .output import OutputError, check_output, output_format, write_results
    from .ray_import import RayNotInstalled

    options = ScaleOptions(
        concurrency=args.concurrency,
        num_cpus_per_actor=args.num_cpus_per_actor,
        batch_size=args.batch_size,
        timestamps="word" if args.words else (args.timestamps or "none"),
        long_form=resolve_context(args, live=False),
        non_finite="zero" if args.zero_non_finite else "error",
        tokenizer=args.tokenizer,
        check_fingerprint=not args.ignore_tokenizer_fingerprint,
    )
    source = args.manifest if args.manifest is not None else args.audio
    try:
        output_format(args.output)
        check_output(args.output, args.overwrite, [args.manifest] if args.manifest else [])
        with printed_warnings(PROG):
            job = prepare(source, args.model, options)
        check_output(args.output, args.overwrite, [e.audio for e in job.entries])
    except (OutputError, ManifestError, RayNotInstalled, PteModelError, TokenizerError, ValueError) as exc:
        return _error(exc)
    ray = sys.modules["ray"]
    started = not ray.is_initialized()
    try:
        if started:
            try:
                ray.init(log_to_driver=args.verbose)
            except Exception as exc:
                address = os.environ.get("RAY_ADDRESS")
                where = f"join the Ray cluster at RAY_ADDRESS={address}" if address else "start a local Ray"
                return _error(f"cannot {where}: {_cause(exc)}")
        _check_cpus(ray, options)
        ray.data.DataContext.get_current().enable_progress_bars = not args.quiet and sys.stderr.isatty()
        summary = write_results(job.dataset(), args.output, overwrite=args.overwrite)
    except (OutputError, OSError) as exc:
        return _error(exc)
    except Exception as exc:  # Ray's errors (an actor that cannot start, a lost node): one line, then the cause
        if not type(exc).__module__.startswith("ray"):
            raise
        return _error(f"the Ray job failed, nothing written: {_cause(exc)}")
    finally:
        if started and ray.is_initialized():
            ray.shutdown()
    if not args.quiet:
        print(
            f"{args.output}: {summary.rows} files, {summary.audio_seconds / 3600:.3f} h of audio in "
            f"{summary.wall_seconds:.1f} s on {options.concurrency} actor(s), RTFx {summary.rtfx:.1f}",
            file=sys.stderr,
        )
    if summary.failed:
        print(f"{PROG}: {summary.failed} of {summary.rows} files failed", file=sys.stderr)
        return 2
    return 0


def _error(problem) -> int:
    print(f"{PROG}: error: {' '.join(str(problem).split())}", file=sys.stderr)
    return 2


def _cause(exc: BaseException) -> str:
    # Ray's errors hold the remote traceback; its last line is the actor's own exception and message.
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _check_cpus(ray, options) -> None:
    need = options.concurrency * options.num_cpus_per_actor
    have = ray.cluster_resources().get("CPU", 0)
    if need > have:
        print(
            f"{PROG}: warning: {options.concurrency} actors x {options.num_cpus_per_actor:g} CPUs = {need:g} CPUs, "
            f"more than the cluster's {have:g}: the actors beyond them wait for CPUs (an autoscaling cluster adds "
            "nodes)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
