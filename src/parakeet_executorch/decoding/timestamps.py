"""Text, token, word and segment timestamps from decoded TDT tokens, following NeMo's rules.

Mirrors, for SentencePiece (BPE) models with the default decoding config (word separator " ", segment
separators ". ! ?", no segment gap threshold), what ``nemo.collections.asr.parts.submodules.rnnt_decoding``
(``compute_rnnt_timestamps`` with ``_compute_offsets_tdt`` / ``_refine_timestamps_tdt``),
``nemo.collections.asr.parts.utils.timestamp_utils`` (``get_words_offsets``, ``get_segment_offsets``,
``process_timestamp_outputs``) and ``decode_tokens_to_str_with_strip_punctuation`` produce:

- token: start = frame, end = frame + duration (encoder frames); a punctuation token after the first one is
  moved to the previous token's end (start = end), since TDT often emits punctuation late.
- word: a token whose piece differs from its text (it carries the word-boundary marker '▁') starts a new word;
  punctuation joins the word before it.
- segment: words are joined with spaces; a word ending in . ! or ? closes a segment.
- seconds = frames x window stride (s) x subsampling factor.
- text: the detokenized ids with one space removed before each punctuation mark the vocabulary contains.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from .tdt_greedy import DecodedToken

WORD_SEPARATOR = " "
SEGMENT_SEPARATORS = (".", "?", "!")
_SPECIAL_PIECE = re.compile(r"^(\[.*\]$|<.*>$|##|▁|\s*$)")


@dataclass
class Span:
    """A timed piece of the transcript. Offsets are encoder frames; start/end are seconds."""

    text: str
    start_offset: int
    end_offset: int
    start: float = 0.0
    end: float = 0.0
    id: int | None = None  # token id, for token spans only

    def as_dict(self) -> dict:
        d = asdict(self)
        if self.id is None:
            del d["id"]
        return d


def punctuation_of_vocab(pieces: Iterable[str]) -> set[str]:
    """Punctuation characters (Unicode category P*) in the vocabulary's ordinary pieces.

    Mirrors NeMo's ``extract_punctuation_from_vocab``: pieces that look special (``<unk>``, ``[..]``, or that
    start with '▁' or '##', or are blank) are not looked at.
    """
    return {
        ch
        for piece in pieces
        if not _SPECIAL_PIECE.match(piece)
        for ch in piece
        if unicodedata.category(ch).startswith("P")
    }


def transcript_text(decoded: str, punctuation: set[str]) -> str:
    """Remove one whitespace character before each supported punctuation mark (NeMo's hypothesis text)."""
    if not punctuation:
        return decoded
    pattern = re.compile(r"(\s)(" + "|".join(re.escape(p) for p in punctuation) + ")")
    return pattern.sub(r"\2", decoded)


def token_spans(tokens: Sequence[DecodedToken], texts: Sequence[str], punctuation: set[str]) -> list[Span]:
    """Token spans in frames, with late punctuation pulled back onto the previous token's end.

    Args:
        tokens: decoded tokens (id, frame, duration).
        texts: each token's text as decoded alone (SentencePiece drops a leading '▁').
        punctuation: the vocabulary's punctuation set (``punctuation_of_vocab``).
    """
    spans = [Span(text, tok.frame, tok.frame + tok.duration, id=tok.id) for tok, text in zip(tokens, texts)]
    for i in range(1, len(spans)):
        if spans[i].text in punctuation:
            spans[i].start_offset = spans[i].end_offset = spans[i - 1].end_offset
    return spans


def word_spans(spans: Sequence[Span], pieces: Sequence[str], decode_pieces, punctuation: set[str]) -> list[Span]:
    """Group token spans into words (NeMo's ``get_words_offsets`` for BPE tokenizers).

    Args:
        spans: token spans from ``token_spans``.
        pieces: each token's SentencePiece piece (with '▁').
        decode_pieces: callable turning a list of pieces into text.
        punctuation: the vocabulary's punctuation set.
    """
    words: list[Span] = []
    current: list[str] = []  # pieces of the word being built
    first = 0  # index of the word's first token
    n = len(spans)
    for i, (span, piece) in enumerate(zip(spans, pieces)):
        text = span.text
        is_punct = bool(punctuation) and text in punctuation and text != WORD_SEPARATOR
        following = _next_visible_text(spans, i)
        starts_word = piece != text or (text == WORD_SEPARATOR and following not in punctuation)
        if starts_word and not is_punct:
            if current:
                words.append(Span(decode_pieces(current), spans[first].start_offset, spans[i - 1].end_offset))
            current = []
            if text != WORD_SEPARATOR:
                current.append(piece)
                first = i
        elif is_punct and not current and words:
            last = words[-1]
            last.end_offset = span.end_offset
            if last.text.endswith(" "):
                last.text = last.text[:-1]
            last.text += text
        elif is_punct and current:
            if current[-1] in (" ", "_", "▁"):
                current.pop()
            current.append(piece)
        else:
            if not current:
                first = i
            current.append(piece)
    if not words:
        if current:
            words.append(Span(decode_pieces(current), spans[0].start_offset, spans[n - 1].end_offset))
        return words
    words[0].start_offset = spans[0].start_offset
    if current:
        words.append(Span(decode_pieces(current), spans[first].start_offset, spans[n - 1].end_offset))
    return words


def _next_visible_text(spans: Sequence[Span], i: int) -> str | None:
    for span in spans[i + 1 :]:
        if span.text and span.text != WORD_SEPARATOR:
            return span.text
    return None


def closes_segment(word: str) -> bool:
    """Whether a word ends a segment: it ends in (or is) one of . ? ! (NeMo's ``get_segment_offsets``)."""
    return bool(word) and (word[-1] in SEGMENT_SEPARATORS or word in SEGMENT_SEPARATORS)


def segment_spans(words: Sequence[Span]) -> list[Span]:
    """Group words into segments closed by a word ending in . ? or ! (NeMo's ``get_segment_offsets``)."""
    segments: list[Span] = []
    current: list[str] = []
    first = 0
    for i, word in enumerate(words):
        if closes_segment(word.text):
            current.append(word.text)
            segments.append(Span(" ".join(current), words[first].start_offset, word.end_offset))
            current, first = [], i + 1
            continue
        current.append(word.text)
    if current:
        segments.append(Span(" ".join(current), words[first].start_offset, words[-1].end_offset))
    return segments


def set_seconds(spans: Iterable[Span], window_stride: float, subsampling_factor: int) -> None:
    """Fill ``start``/``end`` in seconds: offset x window stride x subsampling factor (NeMo's order of operations)."""
    for span in spans:
        span.start = span.start_offset * window_stride * subsampling_factor
        span.end = span.end_offset * window_stride * subsampling_factor
