"""The ExecuTorch CPU kernel library for ``torchao::_linear_fp_act_{n}bit_weight.out`` (n = 1..8).

The C++ source (``csrc/linear_fp_act_lowbit.cpp``) registers out-variant kernels with the
portable runtime's operator registry, which lives in the executorch wheel's
``libexecutorch.so``.  The Python runtime (``executorch.runtime.Runtime`` and
``executorch.extension.pybindings.portable_lib``) links that same shared runtime, so loading
the kernel library into the process with :func:`load` makes a .pte that calls these ops
runnable there.  A C++ runner links the library (see ``csrc/CMakeLists.txt``).

:func:`library_path` builds the library on first use with CMake against the installed wheel's
SDK (``lib/cmake/executorch``) into a cache directory keyed by the source and executorch
version; set ``PARAKEET_LOWBIT_KERNELS_LIB`` to use a prebuilt library instead.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

LIB_NAME = "libparakeet_lowbit_kernels.so"
STATIC_LIB_NAME = "libparakeet_lowbit_kernels.a"
_LOADED: dict[str, ctypes.CDLL] = {}


def source_dir() -> Path:
    """Directory with ``CMakeLists.txt`` and the kernel source."""
    return Path(__file__).resolve().parent / "csrc"


def executorch_cmake_dir() -> Path:
    """The executorch wheel's CMake package directory (``<executorch>/lib/cmake``).

    Raises ``RuntimeError`` if executorch is not installed or ships no CMake config.
    """
    try:
        import executorch
    except ImportError as exc:  # pragma: no cover
        raise RuntimeError("executorch is not installed; pip install executorch") from exc
    root = Path(list(executorch.__path__)[0])
    cfg = root / "lib" / "cmake" / "executorch" / "executorch-config.cmake"
    if not cfg.is_file():
        raise RuntimeError(f"the installed executorch ({root}) ships no C++ SDK ({cfg} missing)")
    return cfg.parent.parent


def _cache_key() -> str:
    if not (source_dir() / "CMakeLists.txt").is_file():
        raise RuntimeError(
            f"the kernel sources are missing from {source_dir()} (this installation did not ship "
            "parakeet_executorch/lowbit/csrc as package data); set PARAKEET_LOWBIT_KERNELS_LIB to a "
            "prebuilt library or install from a source checkout"
        )
    h = hashlib.sha256()
    for f in sorted(source_dir().iterdir()):
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    try:
        from executorch.version import __version__ as etv
    except Exception:  # pragma: no cover
        etv = "unknown"
    h.update(etv.encode())
    h.update(str(executorch_cmake_dir()).encode())
    return h.hexdigest()[:16]


def default_cache_dir() -> Path:
    """``$PARAKEET_CACHE_DIR`` or ``$XDG_CACHE_HOME/parakeet_executorch`` (``~/.cache/...``)."""
    base = os.environ.get("PARAKEET_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parakeet_executorch"
    )
    return Path(base) / "lowbit_kernels"


def library_path(
    build: bool = True,
    cache_dir: str | os.PathLike | None = None,
    native: bool = True,
    verbose: bool = False,
    static: bool = False,
) -> Path:
    """Path of the kernel shared library, building it with CMake if needed.

    Args:
        static: return the static archive instead (``libparakeet_lowbit_kernels.a``, for linking
            whole into a C++ runner: ``-DPARAKEET_EXTRA_KERNEL_LIBRARIES=<this path>``).
        build: build when missing (False: raise ``FileNotFoundError`` instead).
        cache_dir: where builds are kept (default :func:`default_cache_dir`).
        native: compile with ``-march=native`` (the library is built for this machine).
        verbose: print the CMake output.

    Raises:
        FileNotFoundError: not built and ``build=False``, or ``PARAKEET_LOWBIT_KERNELS_LIB``
            names a missing file.
        RuntimeError: no ``cmake`` / C++ compiler, or the build failed (message has the log tail).
    """
    env = os.environ.get("PARAKEET_LOWBIT_KERNELS_LIB")
    if env and not static:
        p = Path(env)
        if not p.is_file():
            raise FileNotFoundError(f"PARAKEET_LOWBIT_KERNELS_LIB={env} does not exist")
        return p
    out_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    name = STATIC_LIB_NAME if static else LIB_NAME
    target = out_dir / f"{_cache_key()}{'-native' if native else ''}{'-static' if static else ''}" / name
    if target.is_file():
        return target
    if not build:
        raise FileNotFoundError(f"kernel library not built at {target}; call library_path(build=True)")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError(
            "building the low-bit ExecuTorch kernels needs cmake >= 3.28 (pip install cmake) and a C++17 compiler"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmds = [
            [
                cmake,
                "-S",
                str(source_dir()),
                "-B",
                tmp,
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DCMAKE_PREFIX_PATH={executorch_cmake_dir()}",
                f"-DPARAKEET_LOWBIT_NATIVE={'ON' if native else 'OFF'}",
                f"-DPARAKEET_LOWBIT_STATIC={'ON' if static else 'OFF'}",
            ],
            [cmake, "--build", tmp, "-j", str(max(1, os.cpu_count() or 1))],
        ]
        for cmd in cmds:
            res = subprocess.run(cmd, capture_output=True, text=True)
            if verbose:
                print(res.stdout, res.stderr)
            if res.returncode != 0:
                tail = (res.stdout + res.stderr)[-4000:]
                raise RuntimeError(f"building the low-bit ExecuTorch kernels failed ({' '.join(cmd)}):\n{tail}")
        built = Path(tmp) / name
        if not built.is_file():
            raise RuntimeError(f"the build finished but produced no {name} in {tmp}")
        os.replace(built, target)  # atomic: concurrent builders end with one complete file
    return target


def load(path: str | os.PathLike | None = None) -> Path:
    """Load the kernel library into this process so ExecuTorch's Python runtime can run .pte files
    that call ``torchao::_linear_fp_act_{n}bit_weight.out``.  Idempotent; returns the path.

    Raises:
        RuntimeError: the library loaded but its kernels are not visible to the Python runtime
            (e.g. an executorch build that links the runtime statically into its extension).
    """
    # Load the Python runtime first so libexecutorch.so (the registry) is already mapped.
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


def registered_ops() -> list[str]:
    """Names of the ``torchao::`` kernels registered with the ExecuTorch runtime in this process."""
    from executorch.extension.pybindings import portable_lib

    return sorted(n for n in portable_lib._get_operator_names() if n.startswith("torchao::"))
