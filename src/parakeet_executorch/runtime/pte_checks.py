"""What both runtimes check when they open a .pte (``pte_model`` through ExecuTorch's pybindings,
``native_pte_model`` through the C interface): the file exists, every method of the contract is there, and the
metadata its constant methods hold."""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path

from ..pte_format import METADATA_METHODS, OPTIONAL_METADATA, REQUIRED_METHODS, ModelMetadata


class PteModelError(RuntimeError):
    """The .pte is missing, unreadable, lacks a required method, or was given input it does not support."""


def checked_pte_path(path: str | Path) -> Path:
    """``path`` as a Path.

    Raises:
        PteModelError: it is a folder, or not there.
    """
    path = Path(path)
    if path.is_dir():
        raise PteModelError(f"model path {path} is a folder, not a .pte: pass the model.pte inside it")
    if not path.is_file():
        raise PteModelError(f"model file not found: {path}. Export one with parakeet-export.")
    if path.stat().st_size == 0:
        raise PteModelError(f"model file {path} is empty (0 bytes): export it again with parakeet-export")
    return path


def method_load_hint(detail: str) -> str:
    """What to tell the user after a method failed to load, from the runtime's error ``detail``
    (``et_errors.explain``'s text, which names the code): a damaged file for InvalidProgram (0x23), else a backend
    or kernel library the runtime lacks (OperatorMissing, a delegate that cannot initialise)."""
    if "0x23" in detail or "InvalidProgram" in detail:
        return "; the .pte is damaged or truncated: export it again with parakeet-export"
    return "; the .pte may need a backend or kernel library this runtime lacks"


def metadata_of(path: Path, names: set[str], constant: Callable[[str], object]) -> ModelMetadata:
    """The .pte's ``ModelMetadata``, each field read by ``constant(method name)`` from its constant method.

    Args:
        path: the .pte (for messages).
        names: the program's method names.
        constant: runs a constant method and returns its value (a list for ``durations``).
    Raises:
        PteModelError: a required compute or metadata method is missing from ``names``.
    """
    missing = [m for m in REQUIRED_METHODS + METADATA_METHODS if m not in names and m not in OPTIONAL_METADATA]
    if missing:
        raise PteModelError(f"{path} lacks method(s) {', '.join(missing)}; re-export it with parakeet-export")
    return ModelMetadata(**{f: constant(f) for f in METADATA_METHODS if f in names})  # type: ignore[arg-type]


def uses_lowbit_ops(path: Path) -> bool:
    """Whether the program calls fpa-lowbit's ``torchao::_linear_fp_act_*`` kernels (their library must be loaded)."""
    # Operator names are stored as plain strings in the program's flatbuffer. Searched through a memory map so that
    # a multi-GB .pte is not copied into memory just before the runtime loads it.
    if path.stat().st_size == 0:
        return False  # mmap refuses empty files; the runtime then reports the file as not a program
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"_linear_fp_act_") != -1
