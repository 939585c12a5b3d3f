"""A Ray job's results as one file: JSONL (manifest mode's output lines, exactly) or Parquet (the row columns).

The rows stream from the cluster to the driver, which writes them to a temporary file next to the output and
renames it into place at the end: a failed or interrupted run leaves no partial output. (For outputs too large for
one driver, ``Dataset.write_parquet(folder)`` writes one file per block from the workers; the rows' schema is
fixed, so those files read back as one table.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FORMATS = {".jsonl": "jsonl", ".parquet": "parquet"}


class OutputError(ValueError):
    """An output path the results cannot go to: an unknown format, an existing file (without ``overwrite``), a
    folder, something other than a regular file, a missing or read-only folder, the manifest itself or one of its
    audio files."""


@dataclass(frozen=True)
class ResultsSummary:
    """What ``write_results`` wrote: ``rows`` files, ``failed`` of them with an ``error``, ``audio_seconds``
    transcribed (seconds), in ``wall_seconds`` (the whole Ray execution, actor start-up and model loads
    included)."""

    rows: int
    failed: int
    audio_seconds: float
    wall_seconds: float

    @property
    def rtfx(self) -> float:
        """Audio seconds per wall second (0 when nothing ran)."""
        return self.audio_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


def output_format(path: str | Path, format: str | None = None) -> str:
    """``"jsonl"`` or ``"parquet"``: ``format`` if given, else from the suffix. Raises OutputError otherwise."""
    if format is not None:
        if format not in FORMATS.values():
            raise OutputError(f"unknown output format {format!r}; use jsonl or parquet")
        return format
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise OutputError(f"--output {path}: name it .jsonl or .parquet (the format follows the suffix)")
    return FORMATS[suffix]


def check_output(path: str | Path, overwrite: bool = False, protected: Iterable[str | Path] = ()) -> None:
    """Raise OutputError when the results cannot be written to ``path``: it exists and ``overwrite`` is False, it
    is a folder or not a regular file, its folder is missing or not writable, or it is one of the ``protected``
    files (the manifest, the audio), which even ``overwrite`` does not replace."""
    path = Path(path)
    resolved = path.resolve()
    if any(resolved == Path(p).resolve() for p in protected):
        raise OutputError(f"--output {path} is the manifest or one of its audio files; write the results elsewhere")
    if path.is_dir():
        raise OutputError(f"--output {path} is a folder; give a path to a .jsonl or .parquet file")
    if path.exists() and not path.is_file():
        raise OutputError(f"--output {path} is not a regular file; give a path to a .jsonl or .parquet file")
    if path.exists() and not overwrite:
        raise OutputError(
            f"--output {path} exists; pass --overwrite to replace it (the Ray mode writes whole files; "
            "parakeet-transcribe --manifest resumes an output instead)"
        )
    folder = resolved.parent
    if not folder.is_dir():
        raise OutputError(f"--output {path}: its folder {folder} does not exist; create it or pick another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"--output {path}: its folder {folder} is not writable; pick another path")


def write_results(ds, path: str | Path, format: str | None = None, *, overwrite: bool = False) -> ResultsSummary:
    """Run ``ds`` (a ``transcribe_dataset`` dataset) and write its rows to ``path`` as one file.

    Args:
        format: ``"jsonl"`` (one manifest mode output line per file: the ``line`` column) or ``"parquet"`` (all the
            row columns, ``rows.row_schema()``); default: from the suffix, ``.jsonl`` or ``.parquet``.
        overwrite: replace an existing file (else OutputError).
    Returns:
        a ResultsSummary.
    Raises:
        OutputError: see ``check_output`` and ``output_format``.
        OSError: the file cannot be written. Ray's own errors (an actor that fails to start) propagate.
        In every case, and on KeyboardInterrupt, nothing is left at ``path`` (an existing file is kept).
    """
    fmt = output_format(path, format)
    check_output(path, overwrite)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    t0 = time.perf_counter()
    try:
        rows, failed, seconds = (_write_jsonl if fmt == "jsonl" else _write_parquet)(ds, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ResultsSummary(rows, failed, seconds, time.perf_counter() - t0)


def _blocks(ds):
    return ds.iter_batches(batch_size=None, batch_format="pyarrow")


def _counts(block) -> tuple[int, int, float]:
    """(rows, rows with an error, audio seconds) of a block of result rows."""
    import pyarrow.compute as pc

    errors = block.column("error")
    return block.num_rows, len(errors) - errors.null_count, pc.sum(block.column("audio_seconds")).as_py() or 0.0


def _write_jsonl(ds, tmp: Path) -> tuple[int, int, float]:
    rows = failed = 0
    seconds = 0.0
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for block in _blocks(ds):
            f.writelines(line + "\n" for line in block.column("line").to_pylist())
            n, bad, s = _counts(block)
            rows, failed, seconds = rows + n, failed + bad, seconds + s
        f.flush()
        os.fsync(f.fileno())
    return rows, failed, seconds


def _write_parquet(ds, tmp: Path) -> tuple[int, int, float]:
    import pyarrow.parquet as pq

    from .rows import row_schema

    rows = failed = 0
    seconds = 0.0
    with pq.ParquetWriter(tmp, row_schema()) as writer:
        for block in _blocks(ds):
            writer.write_table(block.cast(row_schema()))
            n, bad, s = _counts(block)
            rows, failed, seconds = rows + n, failed + bad, seconds + s
    return rows, failed, seconds
