"""One window of audio through the .pte: waveform -> preprocessor -> encoder -> greedy TDT decoding -> timed
transcript. The engine under every mode (single pass, buffered, streaming); ``transcribe.py`` adds the choice
between them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..decoding.tdt_greedy import DecodedToken, TdtDecoderState, greedy_tdt_decode_chunk, initial_decoder_state
from ..decoding.timestamps import (
    Span,
    punctuation_of_vocab,
    segment_spans,
    set_seconds,
    token_spans,
    transcript_text,
    word_spans,
)
from ..tokenizer import Tokenizer
from .pte_checks import PteModelError
from .pte_runtime import load_pte

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11; the package supports 3.10

# Silence run once at load (SinglePassTranscriber.warm_up): the runtime's first-call cost does not depend on the
# audio's length (a 0.5 s clip absorbs all of it on the full-size model), so the shortest clip that is cheap to run.
WARM_UP_SECONDS = 0.5


class AudioRangeError(PteModelError):
    """The audio is longer than the .pte's supported range."""


@dataclass
class Transcript:
    """A transcription with timestamps (seconds) at token, word and segment level, and stage timings."""

    text: str
    tokens: list[Span] = field(default_factory=list)
    words: list[Span] = field(default_factory=list)
    segments: list[Span] = field(default_factory=list)
    audio_seconds: float = 0.0
    timings: dict = field(default_factory=dict)

    def as_dict(self, levels: tuple[str, ...] = ("tokens", "words", "segments")) -> dict:
        """JSON-ready dict: ``{"text", "tokens": [{"id","text","start","end"}], "words": [...], "segments": [...]}``."""
        out: dict = {"text": self.text}
        for level in levels:
            out[level] = [
                {k: v for k, v in s.as_dict().items() if k not in ("start_offset", "end_offset")}
                for s in getattr(self, level)
            ]
        return out


class SinglePassTranscriber:
    """Runs an exported .pte on one window of audio at a time and turns the greedy TDT output into a timed
    transcript (``runtime.transcribe.Transcriber`` adds files and audio of any length on top).

    Args:
        model: the loaded .pte (``pte_runtime.load_pte``: a ``NativePteModel`` or a ``PteModel``).
        tokenizer: its SentencePiece tokenizer.
        check_fingerprint: also require the tokenizer to be the one the model was exported with (its SHA-256 in
            the .pte's metadata); False skips that check, not the size check.
    Raises:
        TokenizerError: the tokenizer's size differs from the model's vocabulary, or it is another export's.
    """

    @classmethod
    def from_pte(
        cls,
        path: str | Path,
        tokenizer: str | Path | None = None,
        *,
        check_fingerprint: bool = True,
        runtime: str = "auto",
    ) -> Self:
        """Load ``path`` (a ``model.pte`` written by ``parakeet-export``) and its tokenizer.

        Args:
            path: the .pte.
            tokenizer: its ``tokenizer.model`` (default: the one next to ``path``).
            check_fingerprint: see the class docstring.
            runtime: ``pte_runtime.RUNTIMES``: ``native`` (no torch), ``pybind`` (ExecuTorch's Python bindings) or
                ``auto`` (native where installed).
        Raises:
            PteModelError: the .pte is missing, not an ExecuTorch program, or lacks a method.
            TokenizerError: the tokenizer is missing, of another size, or another export's.
        """
        tokenizer_path = Path(tokenizer) if tokenizer else Path(path).with_name("tokenizer.model")
        return cls(load_pte(path, runtime), Tokenizer(tokenizer_path), check_fingerprint=check_fingerprint)

    def __init__(self, model, tokenizer: Tokenizer, *, check_fingerprint: bool = True):
        tokenizer.check_vocab(model.metadata.vocab_size)
        if check_fingerprint:
            tokenizer.check_fingerprint(model.metadata.tokenizer_sha256, str(model.path))
        self.model = model
        self.tokenizer = tokenizer
        self._pieces = [tokenizer.piece(i) for i in range(tokenizer.vocab_size)]
        self.punctuation = punctuation_of_vocab(self._pieces)

    @property
    def max_audio_seconds(self) -> float:
        meta = self.model.metadata
        return meta.max_audio_samples / meta.sample_rate

    def encode(self, audio: np.ndarray, valid_samples: int | None = None) -> tuple:
        """Run ``preprocessor`` and ``encoder`` on one waveform.

        Args:
            audio: float32 [samples] at the model's sample rate, 1 .. ``max_audio_samples`` long.
            valid_samples: the waveform's length when ``audio`` already carries zero padding after it (a caller
                that pads in its own buffer spares the copy made here); None: all of ``audio``.
        Returns:
            (projected encoder frames float32 [1, T_enc, J] (numpy, or torch under ``pybind``), valid encoder frames,
            timings in seconds:
            preprocess, encode).
        Raises:
            AudioRangeError: the audio is longer than the .pte supports.
        """
        meta = self.model.metadata
        n = int(audio.shape[0]) if valid_samples is None else int(valid_samples)
        if n > meta.max_audio_samples:
            raise AudioRangeError(
                f"audio is {n / meta.sample_rate:.2f} s long; this model.pte supports up to "
                f"{self.max_audio_seconds:.2f} s in one pass. Use buffered decoding (--chunk-seconds), split the "
                "audio, or re-export with a larger --max-audio-seconds."
            )
        padded = meta.padded_samples(n)
        if audio.shape[0] == padded and audio.dtype == np.float32 and audio.flags.c_contiguous:
            # Already whole hops (a buffered window, or padded by the caller): the one window-sized copy spared.
            wave = audio
        else:
            wave = np.zeros(padded, dtype=np.float32)
            wave[:n] = audio[:n]
        t0 = time.perf_counter()
        features, feature_length = self.model.preprocessor(wave, n)
        t1 = time.perf_counter()
        encoded, num_frames = self.model.encoder(features, feature_length)
        return encoded, num_frames, {"preprocess": t1 - t0, "encode": time.perf_counter() - t1}

    def initial_decoder_state(self) -> TdtDecoderState:
        """The greedy decoder's state before the first frame (prediction network primed with blank)."""
        return initial_decoder_state(self.model.decoder_step, self.model.initial_state(), self.model.metadata.blank_id)

    def decode_frames(
        self, encoded, first: int, count: int, state: TdtDecoderState
    ) -> tuple[list[DecodedToken], TdtDecoderState]:
        """Greedy TDT decoding of encoder frames ``first .. first + count - 1`` of ``encoded`` ([1, T_enc, J]),
        continuing from ``state``; returns the tokens (absolute frames) and the state after them."""
        meta = self.model.metadata
        frames = [encoded[:, t : t + 1, :] for t in range(first, first + count)]
        return greedy_tdt_decode_chunk(
            count,
            joint=lambda t, prediction: self.model.joint(frames[t], prediction),
            predict=self.model.decoder_step,
            state=state,
            blank_id=meta.blank_id,
            durations=meta.durations,
            max_symbols=meta.max_symbols_per_step,
        )

    def decode_tokens(self, audio: np.ndarray) -> tuple[list[DecodedToken], dict]:
        """Run the four methods on one waveform and decode greedily (one pass over the whole audio).

        Args:
            audio: float32 [samples] at the model's sample rate, at most ``max_audio_samples`` long.
        Returns:
            (decoded tokens, stage timings in seconds: preprocess, encode, decode).
        Raises:
            AudioRangeError: the audio is longer than the .pte supports.
        """
        timings = {"preprocess": 0.0, "encode": 0.0, "decode": 0.0}
        if int(audio.shape[0]) == 0:
            return [], timings
        encoded, num_frames, stage = self.encode(audio)
        timings.update(stage)
        t0 = time.perf_counter()
        tokens, _ = self.decode_frames(encoded, 0, num_frames, self.initial_decoder_state())
        timings["decode"] = time.perf_counter() - t0
        return tokens, timings

    def transcript(self, tokens: list[DecodedToken], audio_seconds: float, timings: dict | None = None) -> Transcript:
        """Text and token, word and segment spans (seconds) of decoded tokens, by NeMo's timestamp rules."""
        meta = self.model.metadata
        ids = [t.id for t in tokens]
        texts = [self.tokenizer.decode([i]) for i in ids]
        pieces = [self._pieces[i] for i in ids]
        spans = token_spans(tokens, texts, self.punctuation)
        words = word_spans(spans, pieces, self.tokenizer.decode_pieces, self.punctuation)
        segments = segment_spans(words)
        for level in (spans, words, segments):
            set_seconds(level, meta.window_stride, meta.subsampling_factor)
        text = transcript_text(self.tokenizer.decode(ids), self.punctuation)
        return Transcript(text, spans, words, segments, audio_seconds=audio_seconds, timings=dict(timings or {}))

    def warm_up(self, seconds: float = WARM_UP_SECONDS) -> None:
        """Run the four methods once on ``seconds`` of silence (clamped to the .pte's range) and throw the result
        away, so that the first real transcription does not pay the runtime's one-time costs inside its timing:
        XNNPACK sizes its workspace and the memory-mapped weights are first touched on the first call (about
        1 s on a full-size model, whatever the audio's length). The runners call it at load and count it there.
        """
        meta = self.model.metadata
        n = min(max(int(seconds * meta.sample_rate), meta.min_audio_samples, 1), meta.max_audio_samples)
        self.decode_tokens(np.zeros(n, dtype=np.float32))

    def transcribe_window(self, audio: np.ndarray) -> Transcript:
        """One pass over a waveform that fits the .pte's range: ``decode_tokens`` then ``transcript``.

        Args:
            audio: float32 mono waveform [samples] at the model's sample rate.
        Raises:
            AudioRangeError: the waveform is longer than ``max_audio_seconds``.
        """
        tokens, timings = self.decode_tokens(audio)
        return self.transcript(tokens, audio.shape[0] / self.model.metadata.sample_rate, timings)
