"""The Python runner's public transcriber: a waveform or a file of any length -> timed transcript.

``Transcriber`` is ``single_pass.SinglePassTranscriber`` (one .pte window: preprocessor -> encoder -> greedy TDT
decoding) plus the choice of mode: the single pass for audio that fits one window, buffered left | chunk | right
decoding (``buffered.py``, ``longform.py``) for longer audio and for files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .buffered import transcribe_buffered
from .longform import FILE_CONTEXT, LongFormOptions, buffered_context, transcribe_file
from .single_pass import AudioRangeError, SinglePassTranscriber, Transcript

__all__ = ["AudioRangeError", "Transcriber", "Transcript"]


class Transcriber(SinglePassTranscriber):
    """A ``SinglePassTranscriber`` whose ``transcribe`` takes files and audio of any length (see the module).

    Constructed as its base class is: ``Transcriber.from_pte(path)`` or ``Transcriber(model, tokenizer)``.
    """

    def transcribe(
        self,
        audio: np.ndarray | str | Path,
        *,
        sample_rate: int | None = None,
        long_form: LongFormOptions | None = None,
        non_finite: str = "error",
    ) -> Transcript:
        """Transcribe one waveform or one audio file, with token, word and segment timestamps (seconds).

        Args:
            audio: a float32 mono waveform [samples], or the path of an audio file (WAV, FLAC, OGG, MP3; any rate,
                channel count and length: read and resampled by ``audio.load_audio``).
            sample_rate: the waveform's rate in Hz when it is not the model's (it is resampled with soxr, as files
                are); ignored for paths.
            long_form: ``longform.LongFormOptions``: buffered left | chunk | right decoding (NeMo's buffered
                decoding) for audio longer than one window. Files default to ``longform.FILE_CONTEXT``; a waveform
                without it is transcribed in one pass (at most ``max_audio_seconds``), as before.
            non_finite: for files, ``"error"`` refuses NaN/Inf samples, ``"zero"`` replaces them by silence.
        Returns:
            the ``Transcript`` (text, spans, audio seconds, stage timings).
        Raises:
            AudioError: the file is missing or cannot be decoded. AudioRangeError: a one-pass waveform longer than
            the .pte supports. ContextError: ``long_form`` sizes the .pte cannot take.
        """
        if isinstance(audio, (str, Path)):
            return transcribe_file(
                self, audio, long_form or LongFormOptions(*FILE_CONTEXT), quiet=True, non_finite=non_finite
            )
        rate = self.model.metadata.sample_rate
        if sample_rate is not None and sample_rate != rate:
            from ..audio import resample

            audio = resample(np.asarray(audio, dtype=np.float32), sample_rate, rate)
        if (
            long_form is not None
            and long_form.chunk_seconds != 0
            and audio.shape[0] > long_form.for_model(self.model.metadata).window_seconds * rate
        ):
            context = buffered_context(self, long_form, audio.shape[0])
            return transcribe_buffered(self, [np.asarray(audio, dtype=np.float32)], context)
        return self.transcribe_window(audio)
