"""Subtitle cues: NeMo's segments, also cut at pauses, a reading length and a duration."""

from __future__ import annotations

import random

from parakeet_executorch.decoding.timestamps import Span, segment_spans
from parakeet_executorch.runtime.subtitles import CueRules, subtitle_cues


def _words(timed):
    return [Span(text, round(start / 0.08), round(end / 0.08), start, end) for text, start, end in timed]


def test_a_cue_ends_with_each_segment():
    words = _words(
        [("hello", 0.0, 0.4), ("there.", 0.5, 0.9), ("how", 1.0, 1.2), ("are", 1.3, 1.4), ("you?", 1.5, 1.9)]
    )
    cues = subtitle_cues(words)
    segments = segment_spans(words)
    assert [(c.text, c.start_offset, c.end_offset) for c in cues] == [
        (s.text, s.start_offset, s.end_offset) for s in segments
    ]
    assert [(c.start, c.end) for c in cues] == [(0.0, 0.9), (1.0, 1.9)]


def test_a_pause_ends_a_cue():
    words = _words([("one", 0.0, 0.3), ("two", 0.4, 0.7), ("three", 1.3, 1.6), ("four", 1.7, 2.0)])
    assert [c.text for c in subtitle_cues(words)] == ["one two", "three four"]  # 0.6 s between two and three
    assert [c.text for c in subtitle_cues(words, CueRules(pause_seconds=0.7))] == ["one two three four"]


def test_duration_and_length_limits():
    words = _words([(f"w{i}", i * 0.5, i * 0.5 + 0.4) for i in range(40)])  # no pauses, no punctuation
    cues = subtitle_cues(words, CueRules(max_seconds=3.0, max_chars=1000))
    assert all(c.end - c.start <= 3.0 for c in cues) and len(cues) == 7
    cues = subtitle_cues(words, CueRules(max_seconds=100.0, max_chars=20))
    assert all(len(c.text) <= 20 for c in cues) and [c.text for c in cues][:2] == [
        "w0 w1 w2 w3 w4 w5 w6",
        "w7 w8 w9 w10 w11 w12",  # the longest runs within 20 characters
    ]


def test_one_word_over_the_limits_is_a_cue_of_its_own():
    words = _words([("a", 0.0, 0.1), ("x" * 100, 0.2, 9.0), ("b", 9.1, 9.2)])
    assert [c.text for c in subtitle_cues(words)] == ["a", "x" * 100, "b"]


def test_long_unpunctuated_speech_becomes_readable_cues_and_keeps_every_word():
    rng = random.Random(0)
    timed, t = [], 0.0
    for _ in range(600):  # ~3 minutes of words with occasional pauses, as a model without punctuation writes them
        t += rng.choice([0.05, 0.1, 0.1, 0.2, 1.5])
        length = rng.uniform(0.15, 0.6)
        timed.append(
            (rng.choice(["the", "a", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs"]), t, t + length)
        )
        t += length
    words = _words(timed)
    assert len(segment_spans(words)) == 1  # NeMo's segments: one for the whole recording
    cues = subtitle_cues(words)
    assert len(cues) > 30
    assert all(c.end - c.start <= 7.0 and len(c.text) <= 84 for c in cues)
    assert " ".join(c.text for c in cues) == " ".join(w.text for w in words)
    assert all(a.end <= b.start for a, b in zip(cues, cues[1:]))


def test_no_words_no_cues():
    assert subtitle_cues([]) == []
