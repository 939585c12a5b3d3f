"""Buffered (left | chunk | right) decoding over the .pte's methods: audio of any length, and live audio.

The algorithm is NeMo's buffered streaming inference for transducers
(``examples/asr/asr_chunked_inference/rnnt/speech_to_text_streaming_infer_rnnt.py``, NeMo 2.5+):

- the context sizes are whole encoder frames (``ContextSize``); samples per encoder frame = hop x subsampling;
- the first window holds chunk + right context samples; each later window adds one chunk of new samples and keeps
  at most left + chunk + right samples (the oldest are dropped);
- each window goes through ``preprocessor`` and ``encoder`` as one utterance (features normalised over the
  window); the encoder frames of the left context are skipped and only the chunk's frames are decoded;
- the greedy TDT state (prediction, LSTM state, and the frames a duration jumped past the chunk's end) carries from
  chunk to chunk, as NeMo's label-looping computer carries ``prev_batched_state``; token frames are absolute;
- the last window is the one that reaches the end of the audio: its chunk is everything after the previous chunk
  and it has no right context. NeMo decodes only the whole encoder frames of that last chunk
  (``chunk_samples // samples_per_frame``); ``decode_partial_frame=True`` (the default here) also decodes the final
  partial frame, so that audio which fits in one window gives exactly the single-pass result.

A window is decoded as soon as a sample beyond it has arrived, so a stream decides each chunk exactly as NeMo's
script does with the whole file in hand (it too knows a window is not the last only when audio continues).
Memory is bounded by one window: nothing grows with the input except the list of emitted tokens.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field

import numpy as np

from ..decoding.tdt_greedy import DecodedToken, TdtDecoderState
from .pte_checks import PteModelError
from .single_pass import SinglePassTranscriber, Transcript


class ContextError(PteModelError):
    """Context sizes that are negative, shorter than one encoder frame, or a window the .pte cannot take."""


def check_context_seconds(name: str, value: float) -> None:
    """Raise ``ContextError`` naming the flag ``name`` unless ``value`` is a finite number of seconds >= 0."""
    if not np.isfinite(value) or value < 0:
        raise ContextError(f"{name} must be a non-negative number of seconds, got {value}")


@dataclass(frozen=True)
class ContextSize:
    """Left context, chunk and right context of buffered decoding, in encoder frames (NeMo's ``ContextSize``)."""

    left: int
    chunk: int
    right: int

    @property
    def total(self) -> int:
        return self.left + self.chunk + self.right

    @classmethod
    def from_seconds(
        cls, left: float, chunk: float, right: float, window_stride: float, subsampling_factor: int
    ) -> ContextSize:
        """Round seconds down to whole encoder frames as NeMo's script does:
        ``int(seconds * (1 / window_stride) / subsampling_factor)``.

        Raises:
            ContextError: a negative size, or a chunk shorter than one encoder frame.
        """
        for name, value in (
            ("--left-context-seconds", left),
            ("--chunk-seconds", chunk),
            ("--right-context-seconds", right),
        ):
            check_context_seconds(name, value)
        features_per_second = 1.0 / window_stride
        frames = [int(s * features_per_second / subsampling_factor) for s in (left, chunk, right)]
        frame_seconds = window_stride * subsampling_factor
        if frames[1] < 1:
            raise ContextError(
                f"--chunk-seconds {chunk} is shorter than one encoder frame ({frame_seconds:.2f} s); "
                f"pass at least {frame_seconds:.2f}"
            )
        return cls(*frames)

    def evened(self, total_samples: int, frame_samples: int) -> ContextSize:
        """The same contexts with the chunk shortened so that audio of known length splits into equal chunks.

        Over ``frames`` encoder frames, buffered decoding in chunks of ``chunk`` frames takes
        ``n = ceil((frames - right) / chunk)`` windows (a window is the last once the audio ends within its right
        context), and every window but the first encodes ``left + chunk + right`` frames, the last one too (it
        reaches back to fill the window, as NeMo's buffer does). A last chunk of a few frames therefore costs a
        whole window of encoder work for little new audio. With the chunk ``ceil((frames - right) / n)`` the same
        ``n`` windows are each shorter and the last chunk is as long as the others: 10 min in 4 | 54 | 2 s windows
        encode 716 s, in 4 | 49.84 | 2 s windows 666 s. Live audio (length unknown) keeps the chunk as given.

        Args:
            total_samples: the audio's length in samples at the model's rate (an estimate from the file's header is
                enough: it only sets the chunk).
            frame_samples: samples per encoder frame (hop x subsampling).
        Returns:
            a ``ContextSize`` with the same left and right context and a chunk of at most ``self.chunk`` frames.
        """
        frames = -(-int(total_samples) // int(frame_samples))
        if frames <= self.right + self.chunk:
            return self  # one window: nothing to even out
        windows = -(-(frames - self.right) // self.chunk)
        return ContextSize(self.left, min(self.chunk, -(-(frames - self.right) // windows)), self.right)


@dataclass
class StreamUpdate:
    """What one ``feed``/``finish`` call decided.

    Attributes:
        tokens: tokens that became final, in order, with absolute frames.
        draft: tokens decoded ahead over the right context from the current state (``partial=True`` only); they are
            replaced by the next update and may change.
        end_frame: absolute encoder frame up to which ``tokens`` are final.
    """

    tokens: list[DecodedToken] = field(default_factory=list)
    draft: list[DecodedToken] = field(default_factory=list)
    end_frame: int = 0


class SampleBuffer:
    """The newest samples of a stream in one float32 array, read back as views: a stream's window without a copy.

    Samples are appended at the tail and dropped at the head by moving an index. When the tail runs out of room, the
    samples kept move to the front with one ``memmove`` (which allows the overlap, so no temporary copy is made), and
    the array grows, to exactly what is needed, only for a block larger than the room left after that. Memory: the
    samples kept plus the largest block fed, amortised O(1) work per sample whatever the block size.

    Args:
        capacity: samples to allocate at first (zeros, so the pages are touched only when written).
    """

    def __init__(self, capacity: int):
        self.data = np.zeros(capacity, np.float32)
        self._head = 0  # index in `data` of the oldest sample kept
        self._tail = 0  # index in `data` one past the newest sample
        self.start = 0  # absolute sample index of data[_head]

    @property
    def end(self) -> int:
        """Absolute sample index one past the newest sample."""
        return self.start + self._tail - self._head

    def append(self, samples: np.ndarray) -> None:
        """Add float32 samples [n] after the newest."""
        n = samples.shape[0]
        self._room(n)
        self.data[self._tail : self._tail + n] = samples
        self._tail += n

    def drop_before(self, sample: int) -> None:
        """Forget the samples before absolute index ``sample`` (no copy; nothing happens for one already gone)."""
        k = min(max(0, sample - self.start), self._tail - self._head)
        self._head += k
        self.start += k

    def view(self, start: int, end: int, zero_pad_to: int | None = None) -> np.ndarray:
        """The samples [start, end) (absolute; ``end`` at most ``self.end``) as a view of ``data``; with
        ``zero_pad_to``, that many samples: the rest zeros written after them, which overwrites any kept samples
        after ``end``. Raises ValueError for a range outside the samples kept."""
        if not self.start <= start <= end <= self.end:
            raise ValueError(f"samples [{start}, {end}) are not all kept (kept: [{self.start}, {self.end}))")
        n = end - start
        if zero_pad_to is not None and zero_pad_to > n:
            self._room(zero_pad_to - (self.end - start))
            a = self._head + start - self.start
            self.data[a + n : a + zero_pad_to] = 0.0
            return self.data[a : a + zero_pad_to]
        a = self._head + start - self.start
        return self.data[a : a + n]

    def _room(self, n: int) -> None:
        """Make room for ``n`` samples after the tail."""
        if self._tail + n <= self.data.shape[0]:
            return
        kept = self._tail - self._head
        if kept + n <= self.data.shape[0]:
            if kept and self._head:
                ctypes.memmove(self.data.ctypes.data, self.data.ctypes.data + 4 * self._head, 4 * kept)
        else:
            grown = np.zeros(kept + n, np.float32)
            grown[:kept] = self.data[self._head : self._tail]
            self.data = grown
        self._head, self._tail = 0, kept


class BufferedDecoder:
    """Streaming buffered TDT decoding: feed it sample blocks, it returns the tokens each decoded chunk makes final.

    Args:
        transcriber: a ``SinglePassTranscriber`` (or ``Transcriber``) over the .pte.
        context: left / chunk / right sizes in encoder frames.
        decode_partial_frame: also decode the final partial encoder frame of the last chunk (see module docstring).
        partial: decode the right context ahead after each chunk and return it as a draft.
    Raises:
        ContextError: the window (left + chunk + right) is longer than the .pte's supported audio length.
    """

    def __init__(
        self,
        transcriber: SinglePassTranscriber,
        context: ContextSize,
        decode_partial_frame: bool = True,
        partial: bool = False,
    ):
        meta = transcriber.model.metadata
        self.transcriber = transcriber
        self.context = context
        self.frame_samples = meta.hop_length * meta.subsampling_factor
        self.window_samples = context.total * self.frame_samples
        if self.window_samples > meta.max_audio_samples:
            raise ContextError(
                f"a window of {self.window_samples / meta.sample_rate:.2f} s (left + chunk + right context) is longer "
                f"than this model.pte's {meta.max_audio_samples / meta.sample_rate:.2f} s; use smaller context "
                "sizes or re-export with a larger --max-audio-seconds"
            )
        self.decode_partial_frame = decode_partial_frame
        self.partial = partial
        self.timings = {"preprocess": 0.0, "encode": 0.0, "decode": 0.0}
        self.num_windows = 0
        self._state: TdtDecoderState | None = None
        # At most one window plus the block being fed; a window is a view of it (whole hops, which the preprocessor
        # takes without a copy), where concatenating each block and padding each window held three windows at once.
        self._buffer = SampleBuffer(self.window_samples + meta.hop_length)
        self._received = 0  # samples fed so far
        self._next_end = (context.chunk + context.right) * self.frame_samples  # end of the next non-last window
        self._chunk_start = 0  # absolute sample where the next chunk begins
        self._finished = False

    @property
    def samples_received(self) -> int:
        return self._received

    def feed(self, samples: np.ndarray) -> StreamUpdate:
        """Add float32 mono samples at the model's rate; decode every window that is now complete.

        A window is complete once a sample beyond its end has arrived. Raises ``RuntimeError`` after ``finish``.
        """
        if self._finished:
            raise RuntimeError("feed() after finish(): start a new BufferedDecoder")
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        # Every window from here on ends at or after the samples received so far, so none starts before the last
        # window's worth of them: older samples are never read again.
        self._buffer.drop_before(self._received - self.window_samples)
        self._buffer.append(samples)
        self._received += samples.shape[0]
        update = StreamUpdate(end_frame=self._decoded_frames())
        while self._received > self._next_end:
            self._decode_window(self._next_end, last=False, update=update)
            self._next_end += self.context.chunk * self.frame_samples
        return update

    def finish(self) -> StreamUpdate:
        """The input has ended: decode the last window (everything after the previous chunk, no right context)."""
        if self._finished:
            return StreamUpdate(end_frame=self._decoded_frames())
        self._finished = True
        update = StreamUpdate(end_frame=self._decoded_frames())
        if self._received > self._chunk_start:
            self._decode_window(self._received, last=True, update=update)
        self._buffer = SampleBuffer(0)
        return update

    def _decoded_frames(self) -> int:
        return self._state.decoded_frames if self._state is not None else 0

    def _decode_window(self, end: int, last: bool, update: StreamUpdate) -> None:
        fs = self.frame_samples
        start = max(0, end - self.window_samples)
        if last:  # zero-padded to whole hops in place: no sample after `end` is read again
            padded = self.transcriber.model.metadata.padded_samples(end - start)
            window = self._buffer.view(start, end, zero_pad_to=padded)
        else:
            window = self._buffer.view(start, end)
        chunk_start = self._chunk_start
        chunk_end = end if last else end - self.context.right * fs
        left_frames = (chunk_start - start) // fs
        encoded, valid_frames, stage = self.transcriber.encode(window, end - start)
        for k, v in stage.items():
            self.timings[k] += v
        t0 = time.perf_counter()
        if self._state is None:
            self._state = self.transcriber.initial_decoder_state()
        if last and self.decode_partial_frame:
            count = max(0, valid_frames - left_frames)
        else:
            count = min((chunk_end - chunk_start) // fs, max(0, valid_frames - left_frames))
        tokens, self._state = self.transcriber.decode_frames(encoded, left_frames, count, self._state)
        update.tokens.extend(tokens)
        update.end_frame = self._state.decoded_frames
        if self.partial and not last:
            ahead = max(0, min(valid_frames - left_frames - count, self.context.right))
            update.draft, _ = self.transcriber.decode_frames(encoded, left_frames + count, ahead, self._state)
        elif last:
            update.draft = []
        self.timings["decode"] += time.perf_counter() - t0
        self.num_windows += 1
        self._chunk_start = chunk_end


def transcribe_buffered(
    transcriber: SinglePassTranscriber, blocks, context: ContextSize, decode_partial_frame: bool = True, on_update=None
) -> Transcript:
    """Transcribe a waveform given as an iterable of float32 mono blocks (model rate) with buffered decoding.

    Args:
        transcriber: a ``SinglePassTranscriber`` (or ``Transcriber``) over the .pte.
        blocks: iterable of 1-D float32 arrays; any block sizes.
        context: left / chunk / right in encoder frames.
        decode_partial_frame: see ``BufferedDecoder``.
        on_update: optional callable ``(StreamUpdate, samples_received)`` after each block (progress, live output).
    Returns:
        the ``Transcript`` of all tokens, with absolute times, and summed stage timings.
    Raises:
        ContextError: a window longer than the .pte supports.
    """
    decoder = BufferedDecoder(transcriber, context, decode_partial_frame=decode_partial_frame)
    tokens: list[DecodedToken] = []
    for block in blocks:
        update = decoder.feed(block)
        tokens.extend(update.tokens)
        if on_update is not None:
            on_update(update, decoder.samples_received)
    update = decoder.finish()
    tokens.extend(update.tokens)
    if on_update is not None:
        on_update(update, decoder.samples_received)
    meta = transcriber.model.metadata
    transcript = transcriber.transcript(tokens, decoder.samples_received / meta.sample_rate, decoder.timings)
    transcript.timings["windows"] = decoder.num_windows
    return transcript
