"""Which runtime runs a .pte in Python: ``native`` (``native_pte_model``, the C interface over ExecuTorch's runtime
libraries; no torch in the process) or ``pybind`` (``pte_model``, ExecuTorch's Python bindings, which link
libtorch). Both run the same program with the same kernels and give the same transcript; native holds ~370 MiB
less and starts faster. ``auto`` takes native where its library is installed (built with the C++ runner), else
pybind, and says which in the load line."""

from __future__ import annotations

from pathlib import Path

from . import native_pte_model
from .pte_checks import PteModelError

#: The ``--runtime`` choices.
RUNTIMES = ("auto", "native", "pybind")


def resolve_runtime(runtime: str) -> str:
    """``"native"`` or ``"pybind"`` for one of ``RUNTIMES`` (``auto``: native when its library is installed).

    Raises:
        ValueError: not one of ``RUNTIMES``.
    """
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    if runtime == "auto":
        return "native" if native_pte_model.is_available() else "pybind"
    return runtime


def load_pte(path: str | Path, runtime: str = "auto"):
    """Open ``path`` with the chosen runtime: a ``NativePteModel`` or a ``PteModel`` (same methods; numpy or torch
    tensors out).

    Raises:
        PteModelError: as each model class raises; also when ``native`` is asked for and its library is missing
            or does not load (the message says how to build it).
        ValueError: ``runtime`` is not one of ``RUNTIMES``.
    """
    if resolve_runtime(runtime) == "native":
        try:
            return native_pte_model.NativePteModel(path)
        except native_pte_model.NativeRuntimeError as exc:
            raise PteModelError(str(exc)) from None
    from .pte_model import PteModel

    return PteModel(path)


def runtime_name(model) -> str:
    """``"native"`` or ``"pybind"``: which runtime ``model`` (from ``load_pte``) runs on."""
    return "native" if isinstance(model, native_pte_model.NativePteModel) else "pybind"
