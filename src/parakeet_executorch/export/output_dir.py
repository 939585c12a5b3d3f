"""The export's ``--output-dir``: checked for writability before the (slow) model load, removed again if the export
fails before writing anything into it; the export's files are written into it atomically."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class OutputDirError(ValueError):
    """``--output-dir`` cannot hold the export: the message names the path, the reason and the fix."""


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def prepare_output_dir(path: str | Path) -> list[Path]:
    """Create ``path`` (and missing parents) and prove that a file can be written in it.

    Args:
        path: the export's output folder.
    Returns:
        The folders this call created, deepest first (``remove_created`` takes them away again).
    Raises:
        OutputDirError: ``path`` or one of its parents is a file, or the folder cannot be created or written
            (read-only, permission denied, a pseudo-filesystem such as /proc); nothing is left behind.
    """
    path = Path(path)
    existing = _first_existing(path.absolute())
    if not existing.is_dir():
        what = "is not a folder" if existing == path.absolute() else f"lies under {existing}, which is not a folder"
        raise OutputDirError(f"--output-dir {path} {what}; pass a folder (it is created if missing)")
    created = [p for p in (path.absolute(), *path.absolute().parents) if not os.path.lexists(p)]
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check.", suffix=".partial")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        remove_created(created)
        reason = exc.strerror or str(exc)
        raise OutputDirError(
            f"--output-dir {path} is not writable: creating a file there failed ({reason}); "
            "pass a folder you can write to"
        ) from exc
    return created


def remove_created(created: list[Path]) -> None:
    """Remove the folders ``prepare_output_dir`` created, deepest first, as far as they are still empty."""
    for folder in created:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (something was written) or already gone: keep it and everything above it


@contextmanager
def output_dir(path: str | Path) -> Iterator[Path]:
    """``prepare_output_dir`` for the body; when the body raises, the folders it created are removed if empty."""
    created = prepare_output_dir(path)
    try:
        yield Path(path)
    except BaseException:
        remove_created(created)
        raise


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder renamed into place (mode 0644).

    Raises:
        OSError: the write or the rename failed; the temporary file is removed and ``path`` is untouched.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; an exported model is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
