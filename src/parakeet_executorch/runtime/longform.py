"""One file, any length: the single pass when it fits in one window, else buffered decoding over blocks read from
disk (``buffered.py``), with the context sizes of the command line."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from .buffered import BufferedDecoder, ContextError, ContextSize, check_context_seconds, transcribe_buffered

# Files: 4 s of left and 2 s of right context, and the chunk (None) as long as the .pte's bound allows: 34 s in the
# default 40 s bound, so that the contexts cost 6 s of encoder work per 34 s decoded, and a .pte exported with a
# smaller --max-audio-seconds (a smaller memory plan) works with the defaults, in windows of its own bound. Over a
# file of known length that chunk is then evened out (buffered_context). benchmarks/bench_longform.py (speed) and
# bench_longform_accuracy.py (WER on the demo model) measured the choice.
FILE_CONTEXT = (4.0, None, 2.0)
# Live audio: NeMo's streaming defaults (theoretical latency = chunk + right context = 3.2 s).
LIVE_CONTEXT = (10.0, 1.6, 1.6)


@dataclass(frozen=True)
class LongFormOptions:
    """Buffered decoding sizes in seconds. ``chunk_seconds == 0`` means one pass only (audio past the bound fails);
    ``None`` means as long as the .pte's bound allows beside the two contexts (``for_model``)."""

    left_context_seconds: float
    chunk_seconds: float | None
    right_context_seconds: float

    @property
    def window_seconds(self) -> float:
        """left + chunk + right; ValueError while the chunk is unset (``for_model`` sets it)."""
        if self.chunk_seconds is None:
            raise ValueError("the chunk fills the .pte's bound: call for_model(metadata) first")
        return self.left_context_seconds + self.chunk_seconds + self.right_context_seconds

    def for_model(self, meta) -> LongFormOptions:
        """These sizes with an unset chunk filled for the .pte whose ``ModelMetadata`` is ``meta``: its bound
        (``max_audio_samples / sample_rate`` seconds) less both contexts. Like every size it is rounded down to whole
        encoder frames later (``ContextSize.from_seconds``), so the window never exceeds the bound.

        Raises:
            ContextError: the contexts leave no encoder frame for the chunk.
        """
        if self.chunk_seconds is not None:
            return self
        # Before the sizes are subtracted: a NaN context would otherwise read as one that leaves no chunk.
        check_context_seconds("--left-context-seconds", self.left_context_seconds)
        check_context_seconds("--right-context-seconds", self.right_context_seconds)
        bound = meta.max_audio_samples / meta.sample_rate
        chunk = bound - self.left_context_seconds - self.right_context_seconds
        if not chunk >= meta.window_stride * meta.subsampling_factor:
            raise ContextError(
                f"this model.pte takes windows of at most {bound:.2f} s, which leaves no chunk beside "
                f"{self.left_context_seconds:g} s of left and {self.right_context_seconds:g} s of right context; pass "
                "smaller context sizes, or re-export with a larger --max-audio-seconds"
            )
        return replace(self, chunk_seconds=chunk)


def context_frames(transcriber, options: LongFormOptions):
    """``ContextSize`` in encoder frames for ``options`` (an unset chunk filled by ``for_model``); raises
    ``ContextError`` for sizes the .pte cannot take."""
    meta = transcriber.model.metadata
    options = options.for_model(meta)
    assert options.chunk_seconds is not None  # for_model fills it
    context = ContextSize.from_seconds(
        options.left_context_seconds,
        options.chunk_seconds,
        options.right_context_seconds,
        meta.window_stride,
        meta.subsampling_factor,
    )
    BufferedDecoder(transcriber, context)  # checks the window against the .pte's bound
    return context


def buffered_context(transcriber, options: LongFormOptions, total_samples: int):
    """``ContextSize`` for buffered decoding of audio whose length is known: ``context_frames(options)``, and when
    the chunk was left to the default (``chunk_seconds is None``) the chunk evened out over ``total_samples``
    (``ContextSize.evened``) so the last window is not mostly re-encoded context. A chunk the caller gave is kept
    exactly (NeMo's buffered decoding at that size). The C++ runner's ``transcribe_file`` does the same.

    Args:
        transcriber: a ``Transcriber``.
        options: context sizes in seconds, chunk possibly unset.
        total_samples: the audio's length in samples at the model's rate (a header's estimate is enough).
    Raises:
        ContextError: sizes the .pte cannot take.
    """
    meta = transcriber.model.metadata
    context = context_frames(transcriber, options)
    if options.chunk_seconds is None:
        context = context.evened(total_samples, meta.hop_length * meta.subsampling_factor)
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
    from ..audio_stream import audio_info, read_blocks, resampled_length

    meta = transcriber.model.metadata
    rate = meta.sample_rate
    if options.chunk_seconds == 0:
        return transcriber.transcribe_window(load_audio(path, rate, non_finite=non_finite))
    filled = options.for_model(meta)
    context_frames(transcriber, filled)  # sizes the .pte cannot take fail before the file is read
    info = audio_info(path)
    if info.seconds <= filled.window_seconds:
        return transcriber.transcribe_window(load_audio(path, rate, non_finite=non_finite))
    context = buffered_context(transcriber, options, resampled_length(info, rate))
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
