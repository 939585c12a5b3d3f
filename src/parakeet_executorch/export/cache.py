"""A cache of finished exports in the user cache directory, so that re-running ``parakeet-demo`` takes seconds.

An export of a local model file is stored under ``<user cache>/exports/<key>/`` (``user_cache.cache_root``:
``$PARAKEET_CACHE_DIR``, platformdirs' user cache dir, or ``~/.cache/parakeet_executorch``). The key is a SHA-256
over everything that decides the .pte: the model file's SHA-256, the recipe, the backend, the rest of the export
options, this package's version and a hash of its source files (so an edited checkout does not reuse a stale
export), and the versions of executorch, torch, torchao and NeMo. An entry is written into a temporary folder and
renamed into place, so a reader never sees half of one; the newest ``KEEP`` entries are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..file_hash import file_sha256

KEEP = 8  # entries kept; each demo export is ~10 MB
EXPORT_FILES = ("model.pte", "tokenizer.model", "export_report.json")
_KEY_FILE = "key.json"


def _source_hash() -> str:
    """SHA-256 over this package's and fpa_lowbit's Python sources and fpa_lowbit's compiled libraries (paths and
    bytes, in sorted order); the native runtime's library (``runtime/lib``) is left out."""
    import fpa_lowbit

    h = hashlib.sha256()
    for root in (Path(__file__).resolve().parents[1], Path(fpa_lowbit.__file__).resolve().parent):
        files = [*root.rglob("*.py"), *root.rglob("*.so"), *root.rglob("*.dylib")]
        # runtime/lib holds the native runtime's library, which runs exports but takes no part in making them.
        files = [p for p in files if p.parent != root / "runtime" / "lib"]
        for path in sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts):
            h.update(f"{root.name}/{path.relative_to(root)}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _versions() -> dict:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in ("parakeet-executorch", "fpa-lowbit", "executorch", "torch", "torchao", "nemo_toolkit"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def export_key(model_file: Path, backend: str, options: Sequence[str] = ()) -> dict:
    """What identifies an export of ``model_file`` to ``backend`` with the other ``parakeet-export`` options
    ``options`` (everything but ``--model``, ``--backend`` and ``--output-dir``); JSON-serializable."""
    options = list(options)
    recipe = options[options.index("--quantize") + 1] if "--quantize" in options[:-1] else "none"
    return {
        "model_sha256": file_sha256(model_file),
        "backend": backend,
        "recipe": recipe,
        "options": options,
        "sources_sha256": _source_hash(),
        "versions": _versions(),
    }


def _digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def _copy_atomically(src: Path, dst: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".partial")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except BaseException:
        os.unlink(tmp)
        raise


def _store(entry: Path, key: dict, export_dir: Path) -> None:
    """Copy the export into a temporary folder next to ``entry`` and rename it into place."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}.", suffix=".partial"))
    try:
        for name in EXPORT_FILES:
            shutil.copyfile(export_dir / name, tmp / name)
        (tmp / _KEY_FILE).write_text(json.dumps(key, indent=2, sort_keys=True) + "\n")
        try:
            os.rename(tmp, entry)
        except OSError:  # another run stored the same key first: its entry holds the same export
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _prune(root: Path, keep: int) -> None:
    entries = sorted(
        (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def cached_export(
    model: str,
    backend: str,
    export_dir: Path,
    options: Sequence[str] = (),
    *,
    use_cache: bool = True,
    export: Callable[[list[str]], int] | None = None,
) -> int:
    """Put ``parakeet-export --model model --backend backend --output-dir export_dir *options``'s files into
    ``export_dir``: copied from the cache when an export with the same key (:func:`export_key`) is stored there,
    else exported (and stored when it succeeds). A model that is not a local file (a Hugging Face id) is always
    exported, and so is any model with ``use_cache=False``.

    Args:
        export: the export command's ``main`` (default ``export.cli.main``); returns its exit status.
    Returns:
        0 on success, else the export's non-zero exit status.
    Raises:
        OSError: the cache holds an entry that cannot be read or ``export_dir`` cannot be written. A cache folder
            that cannot be written is not an error: the export is then just not stored.
    """
    from ..user_cache import cache_root

    if export is None:
        from .cli import main

        export = main
    export_dir = Path(export_dir)
    argv = ["--model", model, "--backend", backend, "--output-dir", str(export_dir), *options]
    model_file = Path(model)
    if not use_cache or not model_file.is_file():
        return export(argv)
    t0 = time.perf_counter()
    key = export_key(model_file, backend, options)
    root = cache_root() / "exports"
    entry = root / _digest(key)
    if entry.is_dir() and all((entry / name).is_file() for name in EXPORT_FILES):
        export_dir.mkdir(parents=True, exist_ok=True)
        for name in EXPORT_FILES:
            _copy_atomically(entry / name, export_dir / name)
        os.utime(entry)  # most recently used: kept longest by _prune
        print(
            f"[export] cached: {export_dir / 'model.pte'} from {entry} in {time.perf_counter() - t0:.1f} s "
            f"(--no-cache exports again)",
            flush=True,
        )
        return 0
    rc = export(argv)
    if rc == 0:
        try:
            _store(entry, key, export_dir)
            _prune(root, KEEP)
        except OSError as exc:  # a read-only or full cache costs the next run time, not this one its result
            print(f"[export] not cached ({exc})", flush=True)
    return rc
