"""Render transcripts as plain text, JSON, SubRip (.srt) or WebVTT (.vtt)."""

from __future__ import annotations

import json

from .transcribe import Transcript

LEVELS = {"none": (), "token": ("tokens",), "word": ("words",), "segment": ("segments",),
          "all": ("tokens", "words", "segments")}


def _clock(seconds: float, sep: str) -> str:
    ms = int(round(seconds * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def render(transcripts: list[tuple[str, Transcript]], fmt: str, timestamps: str) -> str:
    """Render (audio name, transcript) pairs.

    Args:
        fmt: ``txt`` (text, then one ``[start - end] text`` line per span of the requested levels), ``json`` (one
            object, or a list of objects with an ``audio`` key for several files), ``jsonl`` (one object with an
            ``audio`` key per line), ``srt`` or ``vtt`` (cues from segments).
        timestamps: ``none``, ``token``, ``word``, ``segment`` or ``all``: which levels txt and json include.
    """
    levels = LEVELS[timestamps]
    if fmt == "jsonl":
        return "\n".join(json.dumps({"audio": name, **t.as_dict(levels)}, ensure_ascii=False)
                         for name, t in transcripts)
    if fmt == "json":
        objs = [t.as_dict(levels) for _, t in transcripts]
        if len(objs) == 1:
            return json.dumps(objs[0], ensure_ascii=False, indent=2)
        return json.dumps([{"audio": name, **o} for (name, _), o in zip(transcripts, objs)],
                          ensure_ascii=False, indent=2)
    if fmt in ("srt", "vtt"):
        blocks = []
        for name, t in transcripts:
            if len(transcripts) > 1:
                blocks.append(f"NOTE {name}" if fmt == "vtt" else "")
            sep = "," if fmt == "srt" else "."
            for i, seg in enumerate(t.segments, 1):
                head = f"{i}\n" if fmt == "srt" else ""
                blocks.append(f"{head}{_clock(seg.start, sep)} --> {_clock(seg.end, sep)}\n{seg.text}\n")
        body = "\n".join(b for b in blocks if b)
        return ("WEBVTT\n\n" + body) if fmt == "vtt" else body
    lines = []
    for name, t in transcripts:
        lines.append(f"{name}\t{t.text}" if len(transcripts) > 1 else t.text)
        for level in levels:
            lines.extend(f"[{s.start:.2f} - {s.end:.2f}] {s.text}" for s in getattr(t, level))
    return "\n".join(lines)
