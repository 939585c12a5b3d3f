"""An exported Parakeet TDT .pte run through the C interface of ``examples/parakeet/capi/parakeet_pte_c.h``
(``libparakeet_pte_c``, loaded with ctypes): ``pte_model.PteModel``'s interface with numpy arrays, and no torch.

Why: ExecuTorch's Python bindings link libtorch, so a process that imports them holds ~370 MiB before it loads a
model (about a 4-bit full-size .pte). The library links the executorch wheel's runtime libraries, its XNNPACK
delegate and CPU kernels and the fpa4w kernels, as the C++ runner does, and opens the program as the C++ runner's
``PteModel`` does: memory-mapped, one set of planned buffers shared by all methods (each output is copied out
here before the next call), one packed copy of each XNNPACK weight.

The library is built with the C++ runner (``.ci/scripts/build_parakeet_runner.sh`` copies it into this package's
``runtime/lib/``); ``$PARAKEET_NATIVE_LIB`` names another build.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..pte_format import REQUIRED_METHODS
from .pte_checks import PteModelError, checked_pte_path, metadata_of, method_load_hint, uses_lowbit_ops
from .runtime_log import RuntimeLog

#: Environment variable naming a build of the library (a path).
ENV_LIB = "PARAKEET_NATIVE_LIB"
LIB_NAME = "libparakeet_pte_c.dylib" if sys.platform == "darwin" else "libparakeet_pte_c.so"

# executorch::aten::ScalarType codes <-> numpy dtypes (bfloat16 has no numpy dtype; no method of the contract
# takes or returns it on CPU).
_DTYPES: dict[int, np.dtype] = {
    0: np.dtype(np.uint8),
    1: np.dtype(np.int8),
    2: np.dtype(np.int16),
    3: np.dtype(np.int32),
    4: np.dtype(np.int64),
    5: np.dtype(np.float16),
    6: np.dtype(np.float32),
    7: np.dtype(np.float64),
    11: np.dtype(np.bool_),
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}
_PK_NONE, _PK_TENSOR, _PK_INT, _PK_DOUBLE, _PK_BOOL, _PK_STRING = range(6)
_MAX_DIMS = 16


class NativeRuntimeError(RuntimeError):
    """The native runtime library is missing or cannot be loaded."""


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("sizes", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
    ]


_LIB: ctypes.CDLL | None = None


def library_path() -> Path | None:
    """Where the native runtime library is: ``$PARAKEET_NATIVE_LIB`` when set, else this package's
    ``runtime/lib/``; None when neither holds it."""
    env = os.environ.get(ENV_LIB)
    if env:
        return Path(env)
    p = Path(__file__).resolve().parent / "lib" / LIB_NAME
    return p if p.is_file() else None


def is_available() -> bool:
    """Whether the native runtime library is installed (see :func:`library_path`)."""
    return library_path() is not None


def _lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is not None:
        return _LIB
    path = library_path()
    rebuild = "build it with .ci/scripts/build_parakeet_runner.sh, or use --runtime pybind"
    if path is None:
        raise NativeRuntimeError(f"the native runtime ({LIB_NAME}) is not built: {rebuild}")
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise NativeRuntimeError(f"{ENV_LIB}={path} {what}; point it at {LIB_NAME}, or unset it")
    try:
        lib = ctypes.CDLL(str(path))
        _declare(lib)
    except (OSError, AttributeError) as exc:
        detail = " ".join(str(exc).split())
        raise NativeRuntimeError(f"{path} is not a usable native runtime ({detail}): {rebuild}") from exc
    _LIB = lib
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of the C interface. Raises AttributeError when a symbol is missing (another
    library, or an older build of this one)."""
    c_int, c_char_p, c_void_p = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p
    lib.pk_last_error.restype = c_char_p
    lib.pk_take_log.restype = c_char_p
    lib.pk_open.argtypes = [c_char_p, c_char_p]
    lib.pk_open.restype = c_void_p
    lib.pk_close.argtypes = [c_void_p]
    lib.pk_method_names.argtypes = [c_void_p]
    lib.pk_method_names.restype = c_char_p
    lib.pk_load_method.argtypes = [c_void_p, c_char_p]
    lib.pk_execute.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_Tensor), ctypes.c_int32]
    lib.pk_num_outputs.argtypes = [c_void_p]
    lib.pk_num_outputs.restype = ctypes.c_int32
    p32, p64 = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64)
    lib.pk_output.argtypes = [
        c_void_p,
        ctypes.c_int32,
        p32,
        p32,
        p32,
        p64,
        ctypes.POINTER(c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        p64,
        ctypes.POINTER(ctypes.c_double),
    ]
    lib.pk_cpu_threads.restype = ctypes.c_int32
    lib.pk_set_cpu_threads.argtypes = [ctypes.c_int32]
    for fn in (lib.pk_load_method, lib.pk_execute, lib.pk_output, lib.pk_set_cpu_threads):
        fn.restype = c_int


# fpa-lowbit's ExecuTorch kernel library, as fpa_lowbit.executorch_kernels finds it (that module's package imports
# torch, which this runtime exists to avoid). The same file ExecuTorch's Python bindings load, so a process using
# both runtimes maps it once and its kernels register once.
_LOWBIT_ENV = "FPA_LOWBIT_EXECUTORCH_LIB"
_LOWBIT_LIBS: dict[str, ctypes.CDLL] = {}


def _executorch_version() -> str:
    """The installed executorch release ("1.5.1"), "" if none: read from its ``version.py`` rather than through
    ``importlib.metadata``, whose import (the ``email`` package and more) adds 1.8 MiB to a runner that asks once."""
    spec = importlib.util.find_spec("executorch")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        version_file = Path(location) / "version.py"
        if version_file.is_file():
            found = re.search(r"""^__version__\s*=\s*['"]([^'"+]+)""", version_file.read_text(), re.MULTILINE)
            if found:
                return found.group(1)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("executorch")
    except PackageNotFoundError:
        return ""


def _load_lowbit_kernels() -> None:
    env = os.environ.get(_LOWBIT_ENV)
    if env:
        path = Path(env)
    else:
        spec = importlib.util.find_spec("fpa_lowbit")
        if spec is None or not spec.submodule_search_locations:
            raise NativeRuntimeError(
                "this .pte uses fpa4w kernels and fpa-lowbit is not installed: pip install ./lowbit"
            )
        lib_dir = Path(list(spec.submodule_search_locations)[0]) / "lib"
        path = lib_dir / "libfpa_lowbit_executorch.so"
        built_for = (lib_dir / "executorch_version.txt").read_text().strip() if path.is_file() else ""
        have = _executorch_version()
        if built_for and have and built_for != have:
            raise NativeRuntimeError(
                f"fpa-lowbit's ExecuTorch kernels were built for executorch {built_for} but {have} is installed: "
                f"pip install executorch=={built_for}, or rebuild fpa-lowbit against {have}"
            )
    if not path.is_file():
        raise NativeRuntimeError(
            f"this .pte uses fpa4w kernels and their library {path} is missing: install an fpa-lowbit wheel built "
            "with executorch (FPA_LOWBIT_EXECUTORCH=ON pip install ./lowbit)"
        )
    key = str(path.resolve())
    if key not in _LOWBIT_LIBS:
        _LOWBIT_LIBS[key] = ctypes.CDLL(key, mode=ctypes.RTLD_GLOBAL)


def _take_log() -> RuntimeLog:
    """What ExecuTorch logged since the last call, as ``runtime_log.RuntimeLog`` (replayed on success)."""
    log = RuntimeLog()
    log.text = _lib().pk_take_log().decode("utf-8", "backslashreplace")
    return log


def _error() -> str:
    # The runtime quotes what it read (a damaged file's identifier): bytes that are not text are escaped.
    return _lib().pk_last_error().decode("utf-8", "backslashreplace")


class NativePteModel:
    """``pte_model.PteModel`` through the native runtime: the four compute methods and ``ModelMetadata``, with
    numpy arrays in and out.

    Args:
        path: the ``model.pte`` written by ``parakeet-export``.
    Raises:
        NativeRuntimeError: the library is missing or does not load.
        PteModelError: missing file, not an ExecuTorch program (with ExecuTorch's error code in words and the
            runtime's reason), a required method or metadata entry missing, or a method that does not load.
    """

    def __init__(self, path: str | Path):
        lib = _lib()
        path = checked_pte_path(path)
        if uses_lowbit_ops(path):
            _load_lowbit_kernels()  # after _lib(): it resolves libexecutorch.so, the registry, through it
        self.path = path
        self._handle = None
        handle = lib.pk_open(os.fsencode(path), None)
        log = _take_log()
        if not handle:
            raise PteModelError(
                f"cannot load {path} as an ExecuTorch program ({_error()}); pass a model.pte written by parakeet-export"
            )
        log.replay()
        self._handle = handle
        names = set(lib.pk_method_names(handle).decode().split())
        self.metadata = metadata_of(path, names, self._constant)
        for name in REQUIRED_METHODS:
            ok = lib.pk_load_method(handle, name.encode()) == 0
            self._replayed_or_raise(
                ok,
                f"cannot load method {name} of {path}",
                method_load_hint,
            )

    def __del__(self):
        if getattr(self, "_handle", None) and _LIB is not None:
            _LIB.pk_close(self._handle)
            self._handle = None

    def _replayed_or_raise(self, ok: bool, what: str, fix: str | Callable[[str], str]) -> None:
        log = _take_log()
        if not ok:
            detail = _error()
            raise PteModelError(f"{what} ({detail}){fix if isinstance(fix, str) else fix(detail)}")
        log.replay()

    def _execute(self, name: str, inputs: list[np.ndarray]) -> list:
        """Runs method ``name``; returns its outputs copied out of the runtime's memory (arrays, ints, floats,
        strings)."""
        lib = _lib()
        arrays = [np.ascontiguousarray(a) for a in inputs]
        tensors = (_Tensor * max(len(arrays), 1))()
        sizes = []
        for i, a in enumerate(arrays):
            if a.dtype not in _CODES:
                raise PteModelError(f"input {i} of method {name} has dtype {a.dtype}, which the runtime does not take")
            sizes.append((ctypes.c_int64 * max(a.ndim, 1))(*a.shape))
            tensors[i] = _Tensor(_CODES[a.dtype], a.ndim, sizes[-1], a.ctypes.data)
        ok = lib.pk_execute(self._handle, name.encode(), tensors, len(arrays)) == 0
        self._replayed_or_raise(ok, f"method {name} of {self.path} failed", "")
        return [self._output(i) for i in range(lib.pk_num_outputs(self._handle))]

    def _output(self, index: int):
        kind, dtype, ndim = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        sizes = (ctypes.c_int64 * _MAX_DIMS)()
        data, nbytes = ctypes.c_void_p(), ctypes.c_size_t()
        int_value, double_value = ctypes.c_int64(), ctypes.c_double()
        if _lib().pk_output(self._handle, index, kind, dtype, ndim, sizes, data, nbytes, int_value, double_value):
            raise PteModelError(f"cannot read an output of {self.path} ({_error()})")
        if kind.value == _PK_TENSOR:
            if dtype.value not in _DTYPES:
                raise PteModelError(f"an output of {self.path} has ExecuTorch dtype {dtype.value}, not read here")
            array = np.empty(tuple(sizes[: ndim.value]), _DTYPES[dtype.value])
            if array.nbytes != nbytes.value:
                raise PteModelError(f"an output of {self.path} holds {nbytes.value} bytes for shape {array.shape}")
            if array.nbytes:
                ctypes.memmove(array.ctypes.data, data.value or 0, array.nbytes)  # the one copy out of the runtime
            return array
        if kind.value in (_PK_INT, _PK_BOOL):
            return int(int_value.value) if kind.value == _PK_INT else bool(int_value.value)
        if kind.value == _PK_DOUBLE:
            return double_value.value
        if kind.value == _PK_STRING:
            return ctypes.string_at(data.value or 0, nbytes.value).decode()
        return None

    def _constant(self, name: str):
        values = self._execute(name, [])
        if name == "durations":
            return [int(v) for v in values]
        value = values[0]
        return value.item() if isinstance(value, np.ndarray) else value

    def preprocessor(self, audio: np.ndarray, length: int) -> tuple[np.ndarray, int]:
        """Log-mel features of a hop-aligned waveform: float32 [S] -> ([1, F, T_mel], valid frames)."""
        features, feature_length = self._execute(
            "preprocessor", [np.asarray(audio, dtype=np.float32), np.array([length], dtype=np.int64)]
        )
        return features, int(feature_length.reshape(-1)[0])

    def encoder(self, features: np.ndarray, feature_length: int) -> tuple[np.ndarray, int]:
        """Projected encoder frames: [1, F, T_mel] -> ([1, T_enc, J], valid encoder frames)."""
        encoded, encoded_length = self._execute("encoder", [features, np.array([feature_length], dtype=np.int64)])
        return encoded, int(encoded_length.reshape(-1)[0])

    def decoder_step(self, token: int, state: tuple[np.ndarray, np.ndarray]):
        """One prediction-network step: (token id, (h, c)) -> (prediction [1, 1, J], (h, c))."""
        prediction, h, c = self._execute("decoder_step", [np.array([[token]], dtype=np.int64), state[0], state[1]])
        return prediction, (h, c)

    def joint(self, encoded_frame: np.ndarray, prediction: np.ndarray) -> tuple[int, int]:
        """Greedy joint step: ([1, 1, J], [1, 1, J]) -> (token id, duration index)."""
        token, duration_index = self._execute("joint", [encoded_frame, prediction])
        return int(token.reshape(-1)[0]), int(duration_index.reshape(-1)[0])

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Zero LSTM state (h, c), each float32 [layers, 1, hidden]."""
        shape = (self.metadata.num_lstm_layers, 1, self.metadata.pred_hidden)
        return np.zeros(shape, np.float32), np.zeros(shape, np.float32)


def native_cpu_threads() -> int:
    """ExecuTorch's CPU thread-pool size in the native runtime (0 when it has none)."""
    threads = int(_lib().pk_cpu_threads())
    _take_log().replay()
    return threads


def set_native_cpu_threads(threads: int) -> None:
    """Resize the native runtime's CPU thread pool (ExecuTorch's ``_unsafe_reset_threadpool``).

    Raises:
        NativeRuntimeError: the pool refused the count, or this runtime has none.
    """
    ok = _lib().pk_set_cpu_threads(threads) == 0
    log = _take_log()
    if not ok:
        raise NativeRuntimeError(_error())
    log.replay()
