"""Subtitle cues (SubRip, WebVTT) from a transcript's timed words.

A cue per NeMo segment works for a model that writes punctuation (parakeet-tdt-0.6b-v2/v3: segments close at
. ! ?), but a model without punctuation, or a long unpunctuated stretch, gives one segment for a whole recording:
one cue on screen for minutes. Cues therefore follow the segments and are also cut where subtitle practice cuts
them: at a pause in the speech, and before a cue would run past a reading length or duration. The JSON's
``segments`` stay NeMo's; only the srt and vtt renderings use these cues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..decoding.timestamps import Span, closes_segment


@dataclass(frozen=True)
class CueRules:
    """Where a cue ends besides a segment's end.

    Attributes:
        pause_seconds: a gap of at least this many seconds between one word's end and the next word's start.
        max_seconds: a cue never spans more than this from its first word's start to its last word's end
            (unless one word alone does).
        max_chars: a cue's text never exceeds this many characters (unless one word alone does); 84 is two lines
            of 42, the common broadcast limit.
    """

    pause_seconds: float = 0.6
    max_seconds: float = 7.0
    max_chars: int = 84


DEFAULT_RULES = CueRules()


def subtitle_cues(words: Sequence[Span], rules: CueRules = DEFAULT_RULES) -> list[Span]:
    """Group timed words into subtitle cues.

    A cue ends after a word that ends a NeMo segment (``. ! ?``), and before a word that starts
    ``rules.pause_seconds`` or more after the previous word ended, or that would take the cue past
    ``rules.max_seconds`` or ``rules.max_chars``. Words keep their order and times; each cue's text is its words
    joined by spaces, its start the first word's start, its end the last word's end (seconds).

    Args:
        words: word spans in time order (``Transcript.words``), with ``start``/``end`` in seconds.
        rules: the cut rules.
    Returns:
        The cues as spans (frame offsets from their first and last words).
    """
    cues: list[Span] = []
    current: list[Span] = []

    def close() -> None:
        if current:
            first, last = current[0], current[-1]
            text = " ".join(w.text for w in current)
            cues.append(Span(text, first.start_offset, last.end_offset, first.start, last.end))
            current.clear()

    for word in words:
        if current:
            prev = current[-1]
            chars = sum(len(w.text) + 1 for w in current) + len(word.text)
            if (
                word.start - prev.end >= rules.pause_seconds
                or word.end - current[0].start > rules.max_seconds
                or chars > rules.max_chars
            ):
                close()
        current.append(word)
        if closes_segment(word.text):
            close()
    close()
    return cues
