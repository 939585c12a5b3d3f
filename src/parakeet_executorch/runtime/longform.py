"""One file, any length: the single pass when it fits in one window, else buffered decoding over blocks read from
disk (``buffered.py``), with the context sizes of the command line."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .buffered import BufferedDecoder, ContextSize, transcribe_buffered

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


def context_frames(transcriber, options: LongFormOptions):
    """``ContextSize`` in encoder frames for ``options``; raises ``ContextError`` for sizes the .pte cannot take."""
    meta = transcriber.model.metadata
    context = ContextSize.from_seconds(
        options.left_context_seconds,
        options.chunk_seconds,
        options.right_context_seconds,
        meta.window_stride,
        meta.subsampling_factor,
    )
    BufferedDecoder(transcriber, context)  # checks the window against the .pte's bound
    return context


def transcribe_file(
    transcriber, path: str | Path, options: LongFormOptions, quiet: bool = False, non_finite: str = "error"
):
    """Transcribe one file: one pass if it fits in one window (or ``chunk_seconds == 0``), else buffered decoding
    over blocks read from disk.

    Args:
        transcriber: a ``Transcriber``.
        options: context sizes in seconds.
        quiet: no progress bar (it shows only on a terminal, for files longer than one window).
        non_finite: ``"error"`` or ``"zero"`` for NaN/Inf samples (``audio.load_audio``).
    Returns:
        a ``Transcript`` (times in seconds from the start of the file).
    Raises:
        AudioError, PteModelError (and its ContextError / AudioRangeError).
    """
    from ..audio import load_audio
    from ..audio_stream import audio_info, read_blocks

    rate = transcriber.model.metadata.sample_rate
    if options.chunk_seconds == 0:
        return transcriber.transcribe_window(load_audio(path, rate, non_finite=non_finite))
    context = context_frames(transcriber, options)
    info = audio_info(path)
    if info.seconds <= options.window_seconds:
        return transcriber.transcribe_window(load_audio(path, rate, non_finite=non_finite))
    bar = _progress_bar(info.seconds, quiet)
    try:
        return transcribe_buffered(
            transcriber,
            read_blocks(path, rate, non_finite=non_finite),
            context,
            on_update=None if bar is None else (lambda _u, n: bar.update(n / rate - bar.n)),
        )
    finally:
        if bar is not None:
            bar.close()


def _progress_bar(total_seconds: float, quiet: bool):
    if quiet or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(
        total=round(total_seconds, 2),
        unit="s",
        unit_scale=False,
        file=sys.stderr,
        leave=False,
        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s audio [{elapsed}<{remaining}]",
    )
