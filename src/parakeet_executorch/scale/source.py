"""What a Ray job transcribes: a NeMo-style JSONL manifest (read and checked whole by manifest mode's reader) or a
list of audio paths, both as manifest entries."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..runtime.manifest_io import ManifestEntry, ManifestError, read_manifest

Source = str | os.PathLike | Iterable[str | os.PathLike]


def read_source(source: Source) -> list[ManifestEntry]:
    """The entries of ``source``, in input order.

    Args:
        source: a manifest path (``str`` or ``PathLike``: relative ``audio_filepath`` values resolved against its
            folder), or any other iterable of audio paths (relative ones resolved against the current folder; each
            becomes the entry ``{"audio_filepath": path}``, numbered from 1 as manifest lines are). One audio file
            is ``[path]``: a lone path is read as a manifest.
    Raises:
        ManifestError: what ``read_manifest`` refuses, no paths, or a path that is empty or not a string/PathLike.
    """
    if isinstance(source, str | os.PathLike):
        return read_manifest(Path(source))
    entries = []
    for number, path in enumerate(source, 1):
        if not isinstance(path, str | os.PathLike) or not str(path):
            raise ManifestError(f"audio path {number} must be a non-empty path (str or PathLike), got {path!r}")
        entries.append(ManifestEntry(number, {"audio_filepath": str(path)}, Path(path).resolve()))
    if not entries:
        raise ManifestError("no audio paths given; pass a manifest or at least one audio path")
    return entries
