"""The ExecuTorch CPU kernels for ``torchao::_linear_fp_act_{n}bit_weight.out`` (n = 1..8), prebuilt in the wheel.

``lib/libfpa_lowbit_executorch.so`` (``csrc/executorch_kernels.cpp`` over the same kernels as eager, threaded
through ExecuTorch's thread pool) registers out-variant kernels with the operator registry of the executorch
wheel's ``libexecutorch.so``.  ExecuTorch's Python runtime (``executorch.runtime.Runtime`` and
``executorch.extension.pybindings.portable_lib``) shares that registry, so after :func:`load` any .pte that calls
these ops runs there::

    import fpa_lowbit
    fpa_lowbit.load_executorch_kernels()      # once per process, before Runtime.load_program(...)

Nothing is compiled at install or at first use: the library is built with the wheel, against the executorch
release recorded in ``lib/executorch_version.txt`` (the runtime's C++ ABI is not stable across releases, so the
loader refuses another version).  A C++ runner links the same sources as a static archive (``lowbit/CMakeLists.txt``,
``FPA_LOWBIT_EXECUTORCH_STATIC=ON``; ``.ci/scripts/build_parakeet_runner.sh`` does).
"""

from __future__ import annotations

import ctypes
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

LIB_NAME = "libfpa_lowbit_executorch.so"
VERSION_FILE = "executorch_version.txt"
#: Environment variable naming another build of the library (a path); skips the version check.
ENV_LIB = "FPA_LOWBIT_EXECUTORCH_LIB"
_LOADED: dict[str, ctypes.CDLL] = {}


def library_dir() -> Path:
    """The folder that holds the prebuilt libraries (``fpa_lowbit/lib``)."""
    return Path(__file__).resolve().parent / "lib"


def built_for() -> str | None:
    """The executorch version the packaged library was built against, or None when it was not built."""
    f = library_dir() / VERSION_FILE
    return f.read_text().strip() or None if f.is_file() else None


def library_path() -> Path:
    """Path of the ExecuTorch kernel library (``$FPA_LOWBIT_EXECUTORCH_LIB`` when set).

    Raises:
        FileNotFoundError: this fpa-lowbit was built without executorch (no library in the wheel), or
            ``$FPA_LOWBIT_EXECUTORCH_LIB`` names a missing file.
        RuntimeError: the installed executorch is not the release the library was built against.
    """
    env = os.environ.get(ENV_LIB)
    if env:
        p = Path(env)
        if not p.is_file():
            raise FileNotFoundError(f"{ENV_LIB}={env} does not exist")
        return p
    p = library_dir() / LIB_NAME
    if not p.is_file():
        raise FileNotFoundError(
            f"fpa-lowbit was built without its ExecuTorch kernels ({p} is missing): install a wheel built with "
            "executorch, or rebuild it where executorch is installed: pip install --no-build-isolation ./lowbit"
        )
    want = built_for()
    try:
        have = version("executorch")
    except PackageNotFoundError:
        raise RuntimeError("executorch is not installed: pip install 'fpa-lowbit[executorch]'") from None
    if want and have != want:
        raise RuntimeError(
            f"fpa-lowbit's ExecuTorch kernels were built for executorch {want} but {have} is installed: "
            f"pip install executorch=={want}, or rebuild fpa-lowbit against {have}"
        )
    return p


def load(path: str | os.PathLike | None = None) -> Path:
    """Register the kernels with ExecuTorch's Python runtime in this process.  Idempotent; returns the path.

    Call it before loading a .pte that uses ``torchao::_linear_fp_act_{n}bit_weight.out`` (else ExecuTorch reports
    ``Failed to load method ..., error: 0x14``, operator missing).

    Raises:
        FileNotFoundError / RuntimeError: see :func:`library_path`.
        RuntimeError: the library loaded but the Python runtime does not see its kernels (an executorch build that
            links its runtime statically into the Python extension).
    """
    # Load the Python runtime first so that libexecutorch.so (the registry) is already mapped.
    from executorch.extension.pybindings import portable_lib

    p = Path(path) if path else library_path()
    key = str(p.resolve())
    if key not in _LOADED:
        _LOADED[key] = ctypes.CDLL(key, mode=ctypes.RTLD_GLOBAL)
    names = set(portable_lib._get_operator_names())
    if "torchao::_linear_fp_act_4bit_weight.out" not in names:
        raise RuntimeError(
            f"loaded {p} but the ExecuTorch Python runtime does not see its kernels; this "
            "executorch build does not share its operator registry with libexecutorch.so"
        )
    return p


def is_loaded() -> bool:
    """Whether :func:`load` has loaded the kernel library into this process."""
    return bool(_LOADED)


def kernel_stats(reset: bool = False) -> tuple[float, int]:
    """``(seconds, calls)`` spent in the ExecuTorch kernels of this process since :func:`load` or the last reset
    (``reset=True`` zeroes them after reading): the numerator of the benchmarks' kernel share of encoder time.

    Raises:
        RuntimeError: the library is not loaded (call :func:`load` first) or has no counters (an older build).
    """
    if not _LOADED:
        raise RuntimeError("the fpa_lowbit ExecuTorch kernels are not loaded: call load() first")
    lib = next(iter(_LOADED.values()))
    try:
        fn = lib.fpa_lowbit_executorch_kernel_stats
    except AttributeError:
        raise RuntimeError("this build of the ExecuTorch kernels keeps no timing counters") from None
    seconds, calls = ctypes.c_double(), ctypes.c_int64()
    fn(ctypes.byref(seconds), ctypes.byref(calls), int(reset))
    return seconds.value, calls.value


def registered_ops() -> list[str]:
    """Names of the ``torchao::`` kernels registered with the ExecuTorch runtime in this process."""
    from executorch.extension.pybindings import portable_lib

    return sorted(n for n in portable_lib._get_operator_names() if n.startswith("torchao::"))
