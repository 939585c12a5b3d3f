"""A streaming transcription object for applications: feed sample blocks, get the new final tokens with times.

Wraps ``BufferedDecoder`` (buffered left | chunk | right decoding, see ``buffered.py``) and turns its tokens into
timed text; the whole transcript (words and segments by NeMo's rules) is available at any point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..decoding.tdt_greedy import DecodedToken
from ..decoding.timestamps import Span, set_seconds, token_spans, transcript_text
from .buffered import BufferedDecoder, ContextSize, StreamUpdate
from .single_pass import SinglePassTranscriber, Transcript


@dataclass
class StreamResult:
    """New output of one ``feed``/``finish`` call.

    Attributes:
        tokens: token spans that became final (seconds from the start of the stream).
        text: the text those tokens add to the transcript (may begin with a space).
        draft_text: text decoded ahead over the right context (``partial=True``); it may still change.
        final_until: seconds of audio up to which the transcript is final.
    """

    tokens: list[Span] = field(default_factory=list)
    text: str = ""
    draft_text: str = ""
    final_until: float = 0.0


class StreamingTranscriber:
    """Live or long-form transcription: ``feed(samples)`` as audio arrives, ``finish()`` at its end.

    Args:
        transcriber: a ``SinglePassTranscriber`` (or ``Transcriber``) over the .pte.
        context: left / chunk / right sizes in encoder frames (``ContextSize.from_seconds``).
        partial: also decode the right context ahead and return it as ``draft_text``.
    Raises:
        ContextError: the window is longer than the .pte supports.

    Example::

        stream = StreamingTranscriber(transcriber, ContextSize.from_seconds(10, 1.6, 1.6, 0.01, 8))
        for block in blocks:               # float32 mono at the model's rate
            print(stream.feed(block).text, end="", flush=True)
        print(stream.finish().text)
    """

    def __init__(self, transcriber: SinglePassTranscriber, context: ContextSize, partial: bool = False):
        self.transcriber = transcriber
        self.decoder = BufferedDecoder(transcriber, context, partial=partial)
        self._tokens: list[DecodedToken] = []
        self._text = ""

    def feed(self, samples: np.ndarray) -> StreamResult:
        """Add float32 mono samples at the model's rate; returns what became final (and the draft)."""
        return self._result(self.decoder.feed(samples))

    def finish(self) -> StreamResult:
        """End of input: decode the rest and return the last final tokens."""
        return self._result(self.decoder.finish())

    def transcript(self) -> Transcript:
        """Everything final so far, with token, word and segment spans."""
        meta = self.transcriber.model.metadata
        return self.transcriber.transcript(
            self._tokens, self.decoder.samples_received / meta.sample_rate, self.decoder.timings
        )

    def _result(self, update: StreamUpdate) -> StreamResult:
        meta = self.transcriber.model.metadata
        before = len(self._tokens)
        self._tokens.extend(update.tokens)
        text = self._render(self._tokens)
        new_text = text[len(self._text) :] if text.startswith(self._text) else text
        self._text = text
        spans = self._spans(self._tokens[max(0, before - 1) :])[1 if before else 0 :]
        draft = ""
        if update.draft:
            full = self._render(self._tokens + update.draft)
            draft = full[len(text) :] if full.startswith(text) else full
        frame_seconds = meta.window_stride * meta.subsampling_factor
        return StreamResult(spans, new_text, draft, update.end_frame * frame_seconds)

    def _spans(self, tokens: list[DecodedToken]) -> list[Span]:
        # Spans of the new tokens, with the last old one in front: a punctuation mark takes its predecessor's end.
        t = self.transcriber
        meta = t.model.metadata
        spans = token_spans(tokens, [t.tokenizer.decode([tok.id]) for tok in tokens], t.punctuation)
        set_seconds(spans, meta.window_stride, meta.subsampling_factor)
        return spans

    def _render(self, tokens: list[DecodedToken]) -> str:
        t = self.transcriber
        return transcript_text(t.tokenizer.decode([tok.id for tok in tokens]), t.punctuation)
