"""SHA-256 of a file's bytes: the export cache's model key and manifest mode's model and tokenizer fingerprints."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of the file at ``path``, read 1 MiB at a time. Raises OSError when it cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
