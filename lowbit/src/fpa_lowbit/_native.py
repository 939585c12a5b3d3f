"""The native CPU kernels for PyTorch eager: ``lib/libfpa_lowbit_cpu.so`` through ctypes.

The library exposes a C ABI over raw pointers (``csrc/c_api.cpp``), so one binary serves every torch version; it
is loaded once, on first use.  It picks the widest instruction set the CPU has (AVX-512, AVX2 + FMA, NEON, or the
portable level) at run time; ``FPA_LOWBIT_ISA`` caps that choice and ``isa=`` forces one level per call.
Threads: sized by ``torch.get_num_threads()`` at each call, on torch's own intra-op pool where torch runs on OpenMP
(the library is handed the address of the ``GOMP_parallel`` that torch loaded; see :func:`eager_thread_pool`), else on
the library's own pool.  ``FPA_LOWBIT_EAGER_POOL=own`` keeps the own pool (for comparisons).
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

LIB_NAME = "libfpa_lowbit_cpu.so"
ABI_VERSION = 3
#: Instruction-set levels, as the library numbers them.
ISAS = {"auto": 0, "portable": 1, "avx2": 2, "avx512": 3, "neon": 4}

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_error: str | None = None


def library_path() -> Path:
    return Path(__file__).resolve().parent / "lib" / LIB_NAME


def _load() -> ctypes.CDLL | None:
    global _lib, _error
    if _lib is not None:  # the per-call path: no lock once loaded
        return _lib
    with _lock:
        if _lib is not None or _error is not None:
            return _lib
        p = library_path()
        if not p.is_file():
            _error = f"{p} is missing (this fpa-lowbit was installed without its compiled kernels)"
            return None
        try:
            lib = ctypes.CDLL(str(p))
        except OSError as exc:
            _error = f"{p} could not be loaded: {exc}"
            return None
        if lib.fpa_lowbit_abi_version() != ABI_VERSION:
            _error = f"{p} has ABI version {lib.fpa_lowbit_abi_version()}, this Python code expects {ABI_VERSION}"
            return None
        i64, i32, vp = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
        lib.fpa_lowbit_linear_f32.argtypes = [vp, i64, i64, vp, i64, i32, i32, vp, vp, vp, vp, i32, i32]
        lib.fpa_lowbit_linear_f32.restype = i32
        lib.fpa_lowbit_isa_available.argtypes = [i32]
        lib.fpa_lowbit_isa_name.restype = ctypes.c_char_p
        lib.fpa_lowbit_isa_name.argtypes = [i32]
        lib.fpa_lowbit_fma_peak_gflops.argtypes = [i32, i32]
        lib.fpa_lowbit_fma_peak_gflops.restype = ctypes.c_double
        lib.fpa_lowbit_error_message.restype = ctypes.c_char_p
        lib.fpa_lowbit_error_message.argtypes = [i32]
        lib.fpa_lowbit_set_openmp.argtypes = [vp]
        _share_torch_openmp(lib)
        _lib = lib
        return lib


def _share_torch_openmp(lib: ctypes.CDLL) -> None:
    """Hand the library torch's OpenMP runtime (``GOMP_parallel``, which LLVM's libomp exports too) when torch's
    intra-op pool is OpenMP, so the kernels' tasks run on the threads torch's own ops use.  A second pool beside
    torch's loses on a few cores: between torch's ops its OpenMP workers spin waiting for the next parallel region
    and take turns with the second pool's threads."""
    if os.environ.get("FPA_LOWBIT_EAGER_POOL", "").lower() == "own":
        return
    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return
    try:
        gomp_parallel = ctypes.CDLL(None).GOMP_parallel  # the runtime torch loaded into the global namespace
    except (AttributeError, OSError):
        return
    lib.fpa_lowbit_set_openmp(ctypes.cast(gomp_parallel, ctypes.c_void_p).value)


def eager_thread_pool() -> str | None:
    """Where the eager kernels' threads come from: ``"openmp"`` (torch's intra-op pool), ``"own"`` (the library's
    pool), or None without the library."""
    lib = _load()
    if lib is None:
        return None
    return "openmp" if lib.fpa_lowbit_uses_openmp() else "own"


def available() -> bool:
    """True when the compiled CPU kernels are installed and loadable."""
    return _load() is not None


def unavailable_reason() -> str | None:
    """Why :func:`available` is False (None when it is True)."""
    _load()
    return _error


def isa_available(isa: str) -> bool:
    """True when this CPU and build can run the level (``"portable"``, ``"avx2"``, ``"avx512"``, ``"neon"``)."""
    lib = _load()
    return lib is not None and isa in ISAS and bool(lib.fpa_lowbit_isa_available(ISAS[isa]))


def best_isa() -> str | None:
    """The level ``"auto"`` resolves to here (after ``FPA_LOWBIT_ISA``), or None without the library."""
    lib = _load()
    return None if lib is None else lib.fpa_lowbit_isa_name(lib.fpa_lowbit_best_isa()).decode()


def fma_peak_gflops(isa: str = "auto", num_threads: int | None = None) -> float:
    """This CPU's FMA ceiling in GFLOP/s at one level (a register-only loop of independent vector FMAs on
    ``num_threads`` threads, default ``torch.get_num_threads()``; about 0.1 s).  0.0 when the level is unavailable.

    Raises:
        RuntimeError: the library is unavailable.
    """
    lib = _load()
    if lib is None:
        raise RuntimeError(f"fpa_lowbit native CPU kernels unavailable: {_error}")
    threads = torch.get_num_threads() if num_threads is None else num_threads
    return float(lib.fpa_lowbit_fma_peak_gflops(ISAS[isa], threads))


def linear(
    A: torch.Tensor,
    B: torch.Tensor,
    group_size: int,
    S: torch.Tensor,
    Z: torch.Tensor,
    bitwidth: int,
    out: torch.Tensor | None = None,
    isa: str = "auto",
    num_threads: int | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``A @ dequant(B)ᵀ (+ bias)`` on the CPU: A ``[M, K]`` float32/float16/bfloat16, B uint8 ``[N, K*n/8]``, S/Z
    ``[N, K/group_size]`` and the optional bias ``[N]`` in A's dtype; returns ``[M, N]`` in A's dtype (into ``out``
    when given).  The bias is added in the kernel, after the product (the same rounding as adding it afterwards).

    Half-precision operands are widened to float32 and the result rounded once.  Arguments are assumed checked
    (:func:`fpa_lowbit.check_linear_args`); the library checks the shape rules again.

    Raises:
        RuntimeError: the library is unavailable, the level is unknown or unavailable, the bias is not ``[N]`` on
            the CPU, or the library rejects the arguments (its message says which rule).
    """
    lib = _load()
    if lib is None:
        raise RuntimeError(f"fpa_lowbit native CPU kernels unavailable: {_error}")
    if isa not in ISAS:
        raise RuntimeError(f"unknown instruction-set level {isa!r}; one of {sorted(ISAS)}")
    M, K = A.shape
    N = B.shape[0]
    f32 = torch.float32
    same = A.dtype == f32 == S.dtype == Z.dtype
    if same and A.is_contiguous() and S.is_contiguous() and Z.is_contiguous() and B.is_contiguous():
        a, s, z, b = A, S, Z, B  # the common case: no conversion calls at all
    else:
        a, s, z, b = (A.to(f32).contiguous(), S.to(f32).contiguous(), Z.to(f32).contiguous(), B.contiguous())
    bias_ptr = None
    if bias is not None:
        if bias.shape != (N,) or bias.device.type != "cpu":
            raise RuntimeError(
                f"fpa_lowbit native kernel: bias must be [N] = [{N}] on the CPU, got {tuple(bias.shape)} on "
                f"{bias.device}"
            )
        bias = bias if bias.dtype == f32 and bias.is_contiguous() else bias.to(f32).contiguous()
        bias_ptr = bias.data_ptr()
    direct = out is not None and out.dtype == torch.float32 and out.is_contiguous()
    y = out if out is not None and direct else torch.empty((M, N), dtype=torch.float32)
    threads = torch.get_num_threads() if num_threads is None else num_threads
    rc = lib.fpa_lowbit_linear_f32(
        a.data_ptr(), M, K, b.data_ptr(), N, bitwidth, group_size, s.data_ptr(), z.data_ptr(), bias_ptr,
        y.data_ptr(), ISAS[isa], threads,
    )  # fmt: skip
    if rc != 0:
        raise RuntimeError(f"fpa_lowbit native kernel ({isa}): {lib.fpa_lowbit_error_message(rc).decode()}")
    if direct:
        return y
    if out is not None:
        out.copy_(y)
        return out
    return y if A.dtype == torch.float32 else y.to(A.dtype)


@dataclass(frozen=True)
class WeightPlan:
    """A quantized weight's operands as the library takes them, prepared once so that a call at one activation
    row (token-by-token generation, where Python's per-call work is as long as the product) only adds the
    activation and output pointers.  It holds the tensors it points into, so the pointers stay valid while the
    plan lives; :meth:`matches` says whether it still describes a weight's current tensors.

    Attributes:
        packed, scale, zero: the weight's uint8 ``[N, K*n/8]`` and float32 ``[N, K/group_size]`` CPU tensors.
        bias: float32 ``[N]`` or None.  K, N: the product's shape (the format is in ``args``).
    """

    packed: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    bias: torch.Tensor | None
    K: int
    N: int
    args: tuple  # (B, N, nbit, group_size, S, Z, bias) as the C function takes them, after A, M and K

    def matches(self, packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bias) -> bool:
        """True when the plan was made from exactly these tensor objects and their storage has not moved since
        (a plan copied along with its weight, or a tensor given new storage in place, no longer matches)."""
        a = self.args
        return (
            self.packed is packed
            and self.scale is scale
            and self.zero is zero
            and self.bias is bias
            and packed.data_ptr() == a[0]
            and scale.data_ptr() == a[4]
            and zero.data_ptr() == a[5]
            and (bias is None or bias.data_ptr() == a[6])
        )


def make_plan(
    packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bitwidth: int, group_size: int, bias=None
) -> WeightPlan | None:
    """A :class:`WeightPlan` for a weight whose operands the library can take as they are (CPU, contiguous,
    float32 scale/zero and bias, uint8 ``[N, K*n/8]``), else None (the caller takes :func:`linear`)."""
    f32 = torch.float32
    tensors = (packed, scale, zero) if bias is None else (packed, scale, zero, bias)
    if any(t.device.type != "cpu" or not t.is_contiguous() for t in tensors):
        return None
    if scale.dtype != f32 or zero.dtype != f32 or packed.dtype != torch.uint8 or scale.dim() != 2:
        return None
    N, K = scale.shape[0], scale.shape[1] * group_size
    if tuple(packed.shape) != (N, K * bitwidth // 8) or tuple(zero.shape) != tuple(scale.shape):
        return None
    if bias is not None and (bias.dtype != f32 or tuple(bias.shape) != (N,)):
        return None
    args = (
        packed.data_ptr(), N, bitwidth, group_size, scale.data_ptr(), zero.data_ptr(),
        None if bias is None else bias.data_ptr(),
    )  # fmt: skip
    return WeightPlan(packed, scale, zero, bias, K, N, args)


def linear_planned(A: torch.Tensor, plan: WeightPlan) -> torch.Tensor:
    """``A @ dequant(weight)ᵀ (+ bias)`` for a float32, contiguous, 2-D CPU ``A [M, K]`` (the caller checks that;
    K must be ``plan.K``), with the weight's operands from ``plan``; returns float32 ``[M, N]``.  The same product
    and bits as :func:`linear` on the same operands, with a fraction of its Python work.

    Raises:
        RuntimeError: the library is unavailable or rejects the arguments (its message says which rule).
    """
    lib = _lib if _lib is not None else _load()
    if lib is None:
        raise RuntimeError(f"fpa_lowbit native CPU kernels unavailable: {_error}")
    M = A.shape[0]
    y = torch.empty((M, plan.N), dtype=torch.float32)
    rc = lib.fpa_lowbit_linear_f32(A.data_ptr(), M, plan.K, *plan.args, y.data_ptr(), 0, torch.get_num_threads())
    if rc != 0:
        raise RuntimeError(f"fpa_lowbit native kernel: {lib.fpa_lowbit_error_message(rc).decode()}")
    return y
