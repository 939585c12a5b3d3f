"""The rows of a Ray job's dataset: one per input file, with one fixed schema (the same for every block, so that
Parquet files and Arrow tables of the results need no schema merging).

Columns:
    input_line (int64): the entry's 1-based manifest line, or its position in a list of audio paths.
    audio_filepath (string): as written in the manifest (or the path as given).
    resolved_audio_filepath (string): the absolute path that was read.
    pred_text (string, null for a failed file): the transcript.
    error (string, null unless the file failed): one line naming the file.
    audio_seconds (float64): seconds of audio transcribed (0 for a failed file).
    line (string): the manifest mode's output line for this file, exactly (one JSON object, no newline): the input
        object, ``pred_text`` / timestamp levels / ``warnings`` or ``error``, and the key fields
        ``resolved_audio_filepath``, ``pte_sha256`` and ``settings`` (``runtime.manifest_io.result_line``).

The inputs are rows of ``input_line``, ``record`` (the manifest object as JSON text: any keys and value types, so
Arrow never has to unify them) and ``resolved_audio_filepath``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..runtime.manifest_io import ManifestEntry, encode_line

COLUMNS = ("input_line", "audio_filepath", "resolved_audio_filepath", "pred_text", "error", "audio_seconds", "line")


def row_schema():
    """The ``pyarrow.Schema`` of the rows (imports pyarrow, a dependency of Ray Data)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("input_line", pa.int64()),
            ("audio_filepath", pa.string()),
            ("resolved_audio_filepath", pa.string()),
            ("pred_text", pa.string()),
            ("error", pa.string()),
            ("audio_seconds", pa.float64()),
            ("line", pa.string()),
        ]
    )


def input_items(entries: list[ManifestEntry]) -> list[dict]:
    """The dataset's input rows for ``entries``."""
    return [
        {
            "input_line": e.line,
            "record": json.dumps(e.record, ensure_ascii=False),
            "resolved_audio_filepath": str(e.audio),
        }
        for e in entries
    ]


def entries_of(batch) -> list[ManifestEntry]:
    """The manifest entries of an input batch (a ``pyarrow.Table`` of ``input_items`` rows)."""
    return [
        ManifestEntry(line, json.loads(record), Path(audio))
        for line, record, audio in zip(
            batch.column("input_line").to_pylist(),
            batch.column("record").to_pylist(),
            batch.column("resolved_audio_filepath").to_pylist(),
        )
    ]


@dataclass(frozen=True)
class Row:
    """One output row before it becomes Arrow: ``line`` is the output line as a dict (encoded by ``table``)."""

    input_line: int
    line: dict
    audio_seconds: float

    def as_dict(self) -> dict:
        return {
            "input_line": self.input_line,
            "audio_filepath": self.line["audio_filepath"],
            "resolved_audio_filepath": self.line["resolved_audio_filepath"],
            "pred_text": self.line.get("pred_text"),
            "error": self.line.get("error"),
            "audio_seconds": self.audio_seconds,
            "line": encode_line(self.line),
        }


def table(rows: list[Row]):
    """The rows as a ``pyarrow.Table`` of ``row_schema()``."""
    import pyarrow as pa

    return pa.Table.from_pylist([r.as_dict() for r in rows], schema=row_schema())
