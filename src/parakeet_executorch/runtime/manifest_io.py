"""Manifest mode's files: the NeMo-style JSONL manifest (read and checked whole before anything runs), the lines an
earlier run already finished in the output (the resume keys), and appends of one whole line at a time.

An output line is the input object plus the result (``pred_text`` and timestamp levels, or ``error``) and the three
key fields: ``resolved_audio_filepath`` (the audio's absolute path), ``pte_sha256`` (the model file's SHA-256) and
``settings`` (what else changes the line's content). A line is finished for a rerun when it is complete (ends with
a newline, or is the last line and a whole results object), is a JSON object, and carries all three with this run's
values. An existing output that holds anything but results lines is refused untouched; a torn last line (a run
killed while writing it) is cut off before anything is appended.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

KEY_AUDIO = "resolved_audio_filepath"
KEY_MODEL = "pte_sha256"
KEY_SETTINGS = "settings"
# What a run writes besides the input's keys; an input that holds them (an earlier output fed back in as a manifest)
# loses them, so that no stale result survives next to the new one.
RESULT_KEYS = ("pred_text", "error", "warnings", "tokens", "words", "segments", KEY_AUDIO, KEY_MODEL, KEY_SETTINGS)


class ManifestError(ValueError):
    """A manifest or output path the run cannot use: missing or unreadable manifest, a line that is not UTF-8 or
    strict JSON or not an object with a string ``audio_filepath`` (the message names the line), an output path that
    is the manifest, an audio file, not a regular file or not writable, or a file that is not manifest results."""


@dataclass(frozen=True)
class ManifestEntry:
    """One manifest line: its 1-based line number, the object as read, and its audio path resolved against the
    manifest's folder (as NeMo resolves a relative ``audio_filepath``)."""

    line: int
    record: dict
    audio: Path


def read_manifest(path: str | Path) -> list[ManifestEntry]:
    """Read and check a whole JSONL manifest; blank lines are skipped.

    Raises:
        ManifestError: the file is missing or unreadable, has no entries, or a line is not UTF-8 (a leading
            byte-order mark is skipped), not strict JSON (``NaN``/``Infinity`` refused) or not an object with a
            non-empty string ``audio_filepath`` (the message gives ``path:line``).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {path}") from None
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {' '.join(str(exc).split())}") from exc
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (utf-8-sig)
        data = data[3:]
    folder = path.absolute().parent
    entries = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError(
                f"{path}:{number}: not UTF-8 (byte {exc.start + 1}); save the manifest as UTF-8"
            ) from None
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{path}:{number}: not JSON ({exc.msg}, column {exc.colno})") from None
        except ValueError as exc:
            raise ManifestError(f"{path}:{number}: {exc}") from None
        if not isinstance(record, dict):
            raise ManifestError(f"{path}:{number}: not a JSON object")
        if "audio_filepath" not in record:
            raise ManifestError(f'{path}:{number}: no "audio_filepath" (a non-empty string)')
        audio = record["audio_filepath"]
        if not isinstance(audio, str) or not audio:
            raise ManifestError(
                f'{path}:{number}: "audio_filepath" must be a non-empty string (a path), got {json.dumps(audio)}'
            )
        entries.append(ManifestEntry(number, record, (folder / audio).resolve()))
    if not entries:
        raise ManifestError(f"manifest {path} has no entries")
    return entries


def result_line(entry: ManifestEntry, fields: dict, pte_sha256: str, settings: dict) -> dict:
    """The output line of ``entry``: its input object without earlier result keys (``RESULT_KEYS``), the result
    ``fields`` (``pred_text`` and timestamp levels, or ``error``; ``warnings``), then the three key fields. Manifest
    mode and the Ray mode (``parakeet_executorch.scale``) both write exactly this."""
    record = {k: v for k, v in entry.record.items() if k not in RESULT_KEYS}
    return {**record, **fields, KEY_AUDIO: str(entry.audio), KEY_MODEL: pte_sha256, KEY_SETTINGS: settings}


def encode_line(record: dict) -> str:
    """One output line's JSON text, without its newline (UTF-8 kept as is, not ``\\u`` escaped)."""
    return json.dumps(record, ensure_ascii=False)


def _no_constant(name: str):
    raise ValueError(f"{name} is not strict JSON (write a number, a string or null)")


def check_output_path(manifest: str | Path, output: str | Path, audio: Iterable[Path] = ()) -> None:
    """Raise ``ManifestError`` when ``output`` cannot take the results: it is the manifest itself or one of its
    ``audio`` files, a folder, something other than a regular file (a pipe, a device), in a folder that is missing
    or not writable, or an existing file that is not writable."""
    manifest, output = Path(manifest), Path(output)
    if output.resolve() == manifest.resolve() or (output.exists() and manifest.exists() and output.samefile(manifest)):
        raise ManifestError(f"--output {output} is the manifest itself; write the results to another file")
    if output.is_dir():
        raise ManifestError(f"--output {output} is a folder; give a path to a .jsonl file")
    if output.exists() and not output.is_file():
        raise ManifestError(f"--output {output} is not a regular file; give a path to a .jsonl file")
    resolved = output.resolve()
    if any(resolved == a for a in audio):
        raise ManifestError(f"--output {output} is one of the manifest's audio files; write the results elsewhere")
    folder = resolved.parent
    if not folder.is_dir():
        raise ManifestError(f"--output {output}: its folder {folder} does not exist; create it or pick another path")
    if output.exists():
        if not os.access(output, os.W_OK):
            raise ManifestError(f"--output {output} is not writable; fix its permissions or pick another path")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise ManifestError(f"--output {output}: its folder {folder} is not writable; pick another path")


@dataclass
class OutputScan:
    """What an existing output holds (``scan_output``): the lines a rerun skips, how many other results lines it
    keeps (another model or other settings), and how to mend its end before appending (``repair``)."""

    done: dict[str, list[bool]]
    others: int = 0
    cut: int = 0  # bytes of a torn last line to cut off
    add_newline: bool = False  # a complete last line that lacks only its newline


def scan_output(output: str | Path, pte_sha256: str, settings: dict) -> OutputScan:
    """Read an existing ``output`` without changing it: the lines a rerun with the model ``pte_sha256`` and these
    ``settings`` skips ({resolved audio path: [failed?, ...] one per line, in file order}).

    Raises:
        ManifestError: the file holds something other than manifest results: a complete line (or a last line
            without newline that does not start with ``{``) that is not a JSON object with both key fields.
    """
    path = Path(output)
    if not path.exists():
        return OutputScan({})
    with open(path, "rb") as f:  # a regular file (check_output_path)
        data = f.read()
    done: dict[str, list[bool]] = defaultdict(list)
    scan = OutputScan(done)
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        record = _results_line(raw)
        if record is None:
            raise ManifestError(
                f"--output {path} holds something other than manifest results (line {number}); pick another path"
            )
        _count(scan, record, pte_sha256, settings)
    if tail:
        record = _results_line(tail)
        if record is not None:
            scan.add_newline = True
            _count(scan, record, pte_sha256, settings)
        elif tail.lstrip().startswith(b"{"):
            scan.cut = len(tail)
        else:
            raise ManifestError(
                f"--output {path} holds something other than manifest results (line {len(lines) + 1}); "
                "pick another path"
            )
    scan.done = dict(done)
    return scan


def _results_line(raw: bytes) -> dict | None:
    try:
        record = json.loads(raw)
    except ValueError:  # JSONDecodeError, or UnicodeDecodeError from bytes
        return None
    if isinstance(record, dict) and isinstance(record.get(KEY_AUDIO), str) and isinstance(record.get(KEY_MODEL), str):
        return record
    return None


def _count(scan: OutputScan, record: dict, pte_sha256: str, settings: dict) -> None:
    if record[KEY_MODEL] == pte_sha256 and record.get(KEY_SETTINGS) == settings:
        scan.done[record[KEY_AUDIO]].append("error" in record)
    else:
        scan.others += 1


def repair(output: str | Path, scan: OutputScan) -> None:
    """Mend the end of ``output`` as ``scan`` found it: cut off a torn last line, or end a complete one."""
    if not (scan.cut or scan.add_newline):
        return
    with open(output, "r+b") as f:
        if scan.cut:
            f.truncate(f.seek(0, os.SEEK_END) - scan.cut)
        else:
            f.seek(0, os.SEEK_END)
            f.write(b"\n")
        f.flush()
        os.fsync(f.fileno())


class LineWriter:
    """Appends whole lines to a file: each record is encoded first and written with one ``os.write`` on an
    ``O_APPEND`` descriptor (no Python buffer), so a killed run leaves at most one torn last line. ``close`` fsyncs.
    """

    def __init__(self, path: str | Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict) -> None:
        data = memoryview((encode_line(record) + "\n").encode("utf-8"))
        while data:  # a regular file takes it in one call; the loop covers a short write (signal, full disk)
            data = data[os.write(self.fd, data) :]

    def close(self) -> None:
        try:
            os.fsync(self.fd)
        finally:
            os.close(self.fd)

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
