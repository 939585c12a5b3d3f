"""Render transcripts as plain text, JSON, SubRip (.srt) or WebVTT (.vtt)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .single_pass import Transcript
from .subtitles import subtitle_cues

LEVELS = {
    "none": (),
    "token": ("tokens",),
    "word": ("words",),
    "segment": ("segments",),
    "all": ("tokens", "words", "segments"),
}


@dataclass(frozen=True)
class Failure:
    """A file that could not be transcribed, in place of its Transcript: the one-line error reported for it."""

    error: str


def _clock(seconds: float, sep: str) -> str:
    ms = int(round(seconds * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _vtt_note(name: str) -> str:
    # A WebVTT comment may not contain "-->", and must be followed by a blank line, or a parser takes it (and the
    # cue timing line after it) for one block, the comment becoming the cue's identifier.
    return "NOTE " + name.replace("-->", "- ->").replace("\n", " ") + "\n"


def render(transcripts: list[tuple[str, Transcript | Failure]], fmt: str, timestamps: str) -> str:
    """Render (audio name, transcript or Failure) pairs.

    Args:
        fmt: ``txt`` (text, then one ``[start - end] text`` line per span of the requested levels), ``json`` (one
            object, or a list of objects with an ``audio`` key for several files; a failed file's object is
            ``{"audio", "error"}``), ``jsonl`` (one object with an ``audio`` key per line, failures likewise),
            ``srt`` (cues numbered across all files) or ``vtt`` (with several files, a ``NOTE`` block naming each
            file before its cues); cues are the words grouped by ``subtitles.subtitle_cues``: NeMo's segments,
            also cut at pauses and at a reading length and duration. Failed files are left out of txt, srt and vtt
            (their errors go to stderr).
        timestamps: ``none``, ``token``, ``word``, ``segment`` or ``all``: which levels txt and json include.
    """
    levels = LEVELS[timestamps]
    several = len(transcripts) > 1
    if fmt == "jsonl":
        return "\n".join(
            json.dumps(
                {"audio": name, **({"error": t.error} if isinstance(t, Failure) else t.as_dict(levels))},
                ensure_ascii=False,
            )
            for name, t in transcripts
        )
    if fmt == "json":
        objs = [{"error": t.error} if isinstance(t, Failure) else t.as_dict(levels) for _, t in transcripts]
        if not several:
            return json.dumps(objs[0], ensure_ascii=False, indent=2)
        return json.dumps(
            [{"audio": name, **o} for (name, _), o in zip(transcripts, objs)], ensure_ascii=False, indent=2
        )
    done = [(name, t) for name, t in transcripts if not isinstance(t, Failure)]
    if fmt in ("srt", "vtt"):
        blocks = []
        sep = "," if fmt == "srt" else "."
        number = 0
        for name, t in done:
            if several and fmt == "vtt":
                blocks.append(_vtt_note(name))
            for seg in subtitle_cues(t.words):
                number += 1
                head = f"{number}\n" if fmt == "srt" else ""
                blocks.append(f"{head}{_clock(seg.start, sep)} --> {_clock(seg.end, sep)}\n{seg.text}\n")
        body = "\n".join(blocks)
        return ("WEBVTT\n\n" + body) if fmt == "vtt" else body
    lines = []
    for name, t in done:
        lines.append(f"{name}\t{t.text}" if several else t.text)
        for level in levels:
            lines.extend(f"[{s.start:.2f} - {s.end:.2f}] {s.text}" for s in getattr(t, level))
    return "\n".join(lines)
