"""Manifest mode: transcribe every file of a NeMo-style JSONL manifest into a JSONL output, resumably, with one or
several worker processes on one machine (``parakeet-transcribe --manifest in.jsonl --output out.jsonl``).

Each file, of any length, goes through ``longform.transcribe_file`` (one pass, or buffered decoding past one
window). Output lines are appended as files finish (not in input order), each with one write, and the key fields of
``manifest_io`` (audio path, model hash, settings) let a rerun skip what is already done; a run killed at any point
loses only the files in flight, and Ctrl-C stops at once (``Interrupted``).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from ..file_hash import file_sha256
from .formats import LEVELS
from .longform import FILE_CONTEXT, LongFormOptions
from .manifest_io import (
    LineWriter,
    ManifestEntry,
    ManifestError,
    check_output_path,
    read_manifest,
    repair,
    result_line,
    scan_output,
)
from .manifest_worker import Result, init_worker, load, transcribe_entry, work

PROG = "parakeet-transcribe"

__all__ = [
    "Interrupted",
    "ManifestError",
    "ManifestOptions",
    "ManifestSummary",
    "WorkerError",
    "transcribe_manifest",
]


class Interrupted(Exception):
    """Ctrl-C (KeyboardInterrupt) stopped the run; ``written`` lines were appended before it, and they stay."""

    def __init__(self, written: int):
        super().__init__(f"interrupted after {written} lines written")
        self.written = written


class WorkerError(RuntimeError):
    """A worker process died (killed, out of memory, its model failed to load); finished lines stay in the output."""


@dataclass(frozen=True)
class LineSettings:
    """What decides an output line's content, shared by manifest mode and the Ray mode (``scale.ScaleOptions``).

    Attributes:
        timestamps: a ``formats.LEVELS`` key: ``none`` (``pred_text`` only), ``token``, ``word``, ``segment`` or
            ``all``; each level becomes a list of ``{"text", "start", "end"}`` (seconds; tokens also ``"id"``).
        long_form: context sizes in seconds for files longer than one window.
        non_finite: ``"error"`` fails a file with NaN/Inf samples, ``"zero"`` replaces them by silence.
        tokenizer: the tokenizer.model (default: the one next to the .pte; on a cluster, the same path on every
            node).
        check_fingerprint: require the tokenizer the .pte was exported with.
    """

    timestamps: str = "none"
    long_form: LongFormOptions = field(default_factory=lambda: LongFormOptions(*FILE_CONTEXT))
    non_finite: str = "error"
    tokenizer: str | Path | None = None
    check_fingerprint: bool = True


@dataclass(frozen=True)
class ManifestOptions(LineSettings):
    """How ``transcribe_manifest`` runs: the ``LineSettings`` and

    Attributes:
        workers: processes, each with its own copy of the model (1: in this process).
        quiet: no progress bar or summary on stderr (the bar shows only on a terminal anyway).
    """

    workers: int = 1
    quiet: bool = False


@dataclass(frozen=True)
class ManifestSummary:
    """What a run did. ``total`` manifest entries = ``skipped`` (finished by an earlier run) + those done now;
    ``failed`` counts entries whose output line holds an ``error``, earlier runs' included. ``audio_seconds`` and
    ``wall_seconds`` cover this run's files only (seconds)."""

    total: int
    skipped: int
    transcribed: int
    failed: int
    audio_seconds: float
    wall_seconds: float

    @property
    def rtfx(self) -> float:
        """Audio seconds transcribed per wall second of this run (0 when nothing ran)."""
        return self.audio_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


def transcribe_manifest(
    manifest: str | Path, output: str | Path, model_path: str | Path, options: ManifestOptions | None = None
) -> ManifestSummary:
    """Transcribe the files of ``manifest`` into ``output`` (JSONL), skipping those already finished there.

    Each output line is the input object (without earlier result keys) plus ``pred_text`` and the requested
    timestamp levels (times in seconds), or ``error`` (one line naming the file) when the file could not be
    transcribed, plus ``warnings`` when the audio raised any (a truncated file, zeroed NaN/Inf), and the resume keys
    ``resolved_audio_filepath``, ``pte_sha256`` and ``settings`` (``line_settings``). Everything is checked before
    the output is touched; lines of another model or other settings are kept (one warning on stderr).

    Raises:
        ManifestError: bad manifest, or an ``output`` that cannot take the results (``check_output_path``) or
            holds something other than results lines.
        Interrupted: KeyboardInterrupt (Ctrl-C); the lines written stay, workers are stopped without waiting.
        PteModelError / TokenizerError: the model or tokenizer cannot be loaded; ContextError: context sizes the
            .pte cannot take.
        ValueError: ``workers`` < 1 or an unknown ``timestamps`` level.
        WorkerError: a worker process died.
        OSError: the output cannot be written.
    """
    options = options or ManifestOptions()
    if options.workers < 1:
        raise ValueError(f"workers must be at least 1, got {options.workers}")
    if options.timestamps not in LEVELS:
        raise ValueError(f"timestamps must be one of {', '.join(LEVELS)}, got {options.timestamps!r}")
    t0 = time.perf_counter()
    entries = read_manifest(manifest)
    check_output_path(manifest, output, [e.audio for e in entries])
    sha = file_sha256(model_path)
    settings = line_settings(model_path, options)
    scan = scan_output(output, sha, settings)  # refuses a file that is not manifest results, before any change
    if scan.others:
        print(
            f"{PROG}: warning: --output {output} holds {scan.others} lines of another model or other settings; "
            "they are kept, and this run's lines are added next to them",
            file=sys.stderr,
        )
    written = 0
    try:
        # Loaded here even for workers: a bad model, tokenizer or context size fails before the output is touched.
        transcriber = load(model_path, options.tokenizer, options.check_fingerprint, options.long_form)
        done = scan.done
        todo, skipped, failed = [], 0, 0
        for entry in entries:
            previous = done.get(str(entry.audio))
            if previous:
                failed += previous.pop(0)
                skipped += 1
            else:
                todo.append(entry)
        results: Generator[Result, None, None]
        workers = min(options.workers, len(todo))
        if workers > 1:
            del transcriber  # the workers load their own
            results = _in_workers(todo, model_path, options, workers)
        else:
            levels = LEVELS[options.timestamps]
            results = (transcribe_entry(transcriber, e, options.long_form, options.non_finite, levels) for e in todo)
        bar = _progress_bar(len(todo), options.quiet)
        audio_seconds, transcribed = 0.0, 0
        try:
            repair(output, scan)
            with LineWriter(output) as writer:
                for entry, fields, seconds in results:
                    writer.write(result_line(entry, fields, sha, settings))
                    written += 1
                    for w in fields.get("warnings", ()):
                        _say(bar, f"{PROG}: warning: {w}")
                    if "error" in fields:
                        failed += 1
                        _say(bar, f"{PROG}: error: {fields['error']}")
                    else:
                        transcribed += 1
                    audio_seconds += seconds
                    if bar is not None:
                        wall = time.perf_counter() - t0
                        bar.set_postfix_str(f"{audio_seconds / 3600:.2f} h audio, RTFx {audio_seconds / wall:.1f}")
                        bar.update(1)
        finally:
            results.close()
            if bar is not None:
                bar.close()
    except KeyboardInterrupt:
        raise Interrupted(written) from None
    return ManifestSummary(len(entries), skipped, transcribed, failed, audio_seconds, time.perf_counter() - t0)


def line_settings(model_path: str | Path, options: LineSettings) -> dict:
    """The settings that change an output line's content, stored in each line (``settings``): a rerun counts a line
    as done only when they match. Contexts in seconds (the default chunk as ``"bound, evened"``); the tokenizer by
    its SHA-256 (None when it is missing: the load then fails)."""
    tokenizer = Path(options.tokenizer) if options.tokenizer else Path(model_path).with_name("tokenizer.model")
    lf = options.long_form
    # The default chunk is evened out over each file; lines from before that (chunk None) are not the same output.
    chunk = "bound, evened" if lf.chunk_seconds is None else lf.chunk_seconds
    return {
        "timestamps": options.timestamps,
        "contexts": [lf.left_context_seconds, chunk, lf.right_context_seconds],
        "non_finite": options.non_finite,
        "tokenizer_sha256": file_sha256(tokenizer) if tokenizer.is_file() else None,
    }


def _in_workers(
    todo: Iterable[ManifestEntry], model_path: str | Path, options: ManifestOptions, workers: int
) -> Generator[Result, None, None]:
    """Transcribe ``todo`` in ``workers`` spawned processes, yielding results as they finish; at most two files per
    worker are queued at a time, so an interrupted run loses only those. Raises WorkerError when a worker dies."""
    from ..library_log import active_log_path

    log = active_log_path()
    threads = max(1, (os.cpu_count() or 1) // workers)
    tokenizer = None if options.tokenizer is None else str(options.tokenizer)
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),  # fork after torch has started threads can deadlock
        initializer=init_worker,
        initargs=(
            None if log is None else str(log),
            str(model_path),
            tokenizer,
            options.check_fingerprint,
            options.long_form,
            options.non_finite,
            LEVELS[options.timestamps],
            threads,
            os.getpid(),
        ),
    )
    pending = iter(todo)
    inflight: dict = {}
    try:
        for _ in range(2 * workers):
            _submit(pool, pending, inflight)
        while inflight:
            finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for future in finished:
                entry = inflight.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool as exc:
                    raise WorkerError(
                        f"a worker process died while transcribing {entry.audio} (out of memory?); "
                        "the lines written so far are kept: run the same command again to resume"
                    ) from exc
                yield result
                _submit(pool, pending, inflight)
    except BaseException:
        # Ctrl-C, a dead worker, or the consumer gone: the files in flight are not waited for (their workers ignore
        # SIGINT, and the interpreter's exit would join them).
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _submit(pool: ProcessPoolExecutor, pending: Iterator[ManifestEntry], inflight: dict) -> None:
    entry = next(pending, None)
    if entry is not None:
        inflight[pool.submit(work, entry)] = entry


def _progress_bar(total: int, quiet: bool):
    if quiet or not total or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True)


def _say(bar, line: str) -> None:
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr)
