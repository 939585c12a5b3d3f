"""Registration of ``torchao::_linear_fp_act_{n}bit_weight`` (n = 1..8) and ``torchao::_pack_weight_{n}bit``.

Schemas are torchao's::

    _pack_weight_{n}bit(Tensor W) -> Tensor
    _linear_fp_act_{n}bit_weight(Tensor A, Tensor B, int group_size, Tensor S, Tensor Z) -> Tensor
    _linear_fp_act_{n}bit_weight.out(Tensor A, Tensor B, int group_size, Tensor S, Tensor Z, *,
                                     Tensor(a!) out) -> Tensor(a!)

Where torchao's own MPS library is loadable (a Mac with a torchao source build), it is loaded
first and its definitions and MPS kernels are used; this module then only adds the kernels
that library lacks (CPU, CUDA).  Otherwise this module defines the ops and registers Meta
(fake, symbolic M), CPU, CUDA and MPS kernels.  Call :func:`register` (idempotent; importing
``fpa_lowbit`` calls it).
"""

from __future__ import annotations

import logging
import os
import warnings

import torch

from . import _native
from .packing import pack_lowbit, unit_layout
from .qparams import ACT_DTYPES, GROUP_SIZES

log = logging.getLogger(__name__)

OP_BITWIDTHS = tuple(range(1, 9))
_LIB: torch.library.Library | None = None
_REGISTERED = False
#: Which library supplies the MPS kernels: "torchao" (source build loaded) or "fpa_lowbit".
MPS_PROVIDER = "fpa_lowbit"
#: Rows of packed weight processed per step of the CPU/CUDA kernels (bounds temporary memory).
_CHUNK_ELEMS = int(os.environ.get("PARAKEET_LOWBIT_CHUNK_ELEMS", str(1 << 19)))
#: The same for M > SMALL_M, where the chunk is dequantized into a buffer for one large GEMM.
_CHUNK_ELEMS_LARGE_M = int(os.environ.get("PARAKEET_LOWBIT_CHUNK_ELEMS_LARGE_M", str(1 << 20)))
#: The same on CUDA (both paths): fewer, larger launches; temporaries of at most 64 MiB in fp32.
_CHUNK_ELEMS_CUDA = int(os.environ.get("PARAKEET_LOWBIT_CHUNK_ELEMS_CUDA", str(1 << 24)))
#: At or below this many activation rows the kernel never forms S*q+Z (per-group identity path).
SMALL_M = 16


def linear_op_name(bitwidth: int) -> str:
    """``"_linear_fp_act_{n}bit_weight"`` for bit width n."""
    return f"_linear_fp_act_{bitwidth}bit_weight"


def linear_op(bitwidth: int):
    """The ``torch.ops.torchao`` overload packet for bit width n (after :func:`register`)."""
    register()
    return getattr(torch.ops.torchao, linear_op_name(bitwidth))


def check_linear_args(
    A: torch.Tensor, B: torch.Tensor, group_size: int, S: torch.Tensor, Z: torch.Tensor, bitwidth: int
) -> tuple[int, int, int]:
    """Validate operands of ``_linear_fp_act_{n}bit_weight``; return ``(M, K, N)``.

    Rules: A is 2-D ``[M, K]`` fp32/fp16/bf16; B uint8 ``[N, K*n/8]``; group_size in
    {32, 64, 128, 256}; ``K % 8 == 0``; ``K % group_size == 0``; S and Z ``[N, K/group_size]``
    with A's dtype; all on one device.  Raises ``ValueError`` naming the broken rule.
    M may be symbolic (no rule depends on it here; Metal's ``N % 4`` rule is checked by
    :func:`fpa_lowbit.check_linear_shape` and by the MPS kernel).
    """
    name = f"torchao::{linear_op_name(bitwidth)}"
    if A.dim() != 2:
        raise ValueError(f"{name}: A must be 2-D [M, K], got shape {tuple(A.shape)}")
    if A.dtype not in ACT_DTYPES:
        raise ValueError(f"{name}: A must be float32, float16 or bfloat16, got {A.dtype}")
    if B.dtype != torch.uint8 or B.dim() != 2:
        raise ValueError(f"{name}: B must be a 2-D uint8 tensor, got {B.dtype} {tuple(B.shape)}")
    if group_size not in GROUP_SIZES:
        raise ValueError(f"{name}: group_size must be one of {list(GROUP_SIZES)}, got {group_size}")
    M, K = A.shape
    N = B.shape[0]
    if K % 8 != 0:
        raise ValueError(f"{name}: K = {K} must be a multiple of 8")
    if K % group_size != 0:
        raise ValueError(f"{name}: K = {K} must be a multiple of group_size = {group_size}")
    if B.shape[1] != K * bitwidth // 8:
        raise ValueError(
            f"{name}: B must be [N, K*{bitwidth}/8] = [N, {K * bitwidth // 8}] for K = {K}, got {tuple(B.shape)}"
        )
    G = K // group_size
    for label, t in (("S", S), ("Z", Z)):
        if t.dim() != 2 or t.shape[0] != N or t.shape[1] != G:
            raise ValueError(f"{name}: {label} must be [N, K/group_size] = [{N}, {G}], got {tuple(t.shape)}")
        if t.dtype != A.dtype:
            raise ValueError(f"{name}: {label} must have A's dtype {A.dtype}, got {t.dtype}")
    # All on the CPU is the common case and four flag reads; comparing device objects costs ~2 us per call.
    if not (A.is_cpu and B.is_cpu and S.is_cpu and Z.is_cpu):
        for label, t in (("S", S), ("Z", Z), ("B", B)):
            if t.device != A.device:
                raise ValueError(f"{name}: {label} is on {t.device} but A is on {A.device}")
    return M, K, N


def _compute_dtype(A: torch.Tensor) -> torch.dtype:
    # CPU half-precision GEMMs are slow and less accurate: accumulate in fp32 there.
    if A.device.type == "cpu":
        return torch.float32
    return A.dtype


def _planes(Bc: torch.Tensor, bitwidth: int):
    """Yield ``(slot, plane)``: plane ``uint8 [rows, K/vals]`` holds value ``slot`` of every unit.

    A unit is the smallest whole-byte block of the LSB-first stream (``vals`` values in
    ``unit_bytes`` bytes); value ``i`` of a unit starts at bit ``i*n``, possibly crossing a
    byte boundary (3, 5, 6, 7 bits).  Only byte-wide integer ops are used.
    """
    vals, unit_bytes = unit_layout(bitwidth)
    mask = (1 << bitwidth) - 1
    rows = Bc.shape[0]
    bv = Bc.view(rows, -1, unit_bytes)
    for i in range(vals):
        bit = i * bitwidth
        b, r = divmod(bit, 8)
        x = bv[:, :, b]
        if r:
            x = torch.bitwise_right_shift(x, r)
        if r + bitwidth > 8:
            x = torch.bitwise_or(x, torch.bitwise_left_shift(bv[:, :, b + 1], 8 - r))
        if r + bitwidth != 8:
            x = torch.bitwise_and(x, mask)
        yield i, x


def linear_reference_kernel(A, B, group_size, S, Z, bitwidth: int, out: torch.Tensor | None = None):
    """PyTorch-level kernel used for CPU and CUDA (and MPS for shapes PyTorch's int4 kernel cannot take).

    The weight is processed in row chunks of about ``_CHUNK_ELEMS`` values (so temporaries stay
    in cache and memory is bounded).  Within a chunk, the packed bytes are split into "planes":
    plane ``s`` holds value ``s`` of every packing unit (e.g. the low and the high nibbles of
    each byte for 4 bits), extracted with byte-wide shifts and masks only, so values are never
    interleaved back into K order.  Each plane is scaled in place of its group
    (``q * S + Z``) and multiplied with the matching strided slice ``A[:, s::vals]`` by one
    GEMM/GEMV, accumulating into the chunk's output.  The full-size dequantized weight is never
    formed.

    Shapes as in :func:`check_linear_args`; returns ``[M, N]`` in A's dtype (written to
    ``out`` when given, which must be ``[M, N]`` of A's dtype and device).
    """
    M, K, N = check_linear_args(A, B, group_size, S, Z, bitwidth)
    if out is None:
        out = torch.empty((M, N), dtype=A.dtype, device=A.device)
    elif tuple(out.shape) != (M, N) or out.dtype != A.dtype or out.device != A.device:
        raise ValueError(
            f"out must be [{M}, {N}] {A.dtype} on {A.device}, got {tuple(out.shape)} {out.dtype} on {out.device}"
        )
    if M == 0 or N == 0:
        return out
    cdt = _compute_dtype(A)
    G = K // group_size
    vals, _ = unit_layout(bitwidth)
    kv = K // vals
    a = A.to(cdt)
    a_slots = ([a[:, s::vals].contiguous() for s in range(vals)] if vals > 1 else [a]) if M <= SMALL_M else None
    small = M <= SMALL_M
    if A.device.type == "cuda":
        rows = max(1, _CHUNK_ELEMS_CUDA // K)
    else:
        rows = max(1, (_CHUNK_ELEMS if small else _CHUNK_ELEMS_LARGE_M) // K)
    asum = a.view(M, G, group_size).sum(dim=-1)  # [M, G]: the zero term is Z @ asum^T
    for n0 in range(0, N, rows):
        n1 = min(N, n0 + rows)
        nc = n1 - n0
        sc = S[n0:n1].to(cdt).unsqueeze(-1)  # [nc, G, 1]
        zc = Z[n0:n1].to(cdt)  # [nc, G]
        if small:
            # y^T = Z @ asum^T + sum_planes (q_plane * S) @ A[:, plane::vals]^T   -> [nc, M]
            acc = torch.mm(zc, asum.t())
            for slot, plane in _planes(B[n0:n1], bitwidth):
                w = torch.mul(plane.view(nc, G, -1), sc).view(nc, kv)
                acc.addmm_(w, a_slots[slot].t())  # type: ignore[index]  # set whenever small
            out[:, n0:n1] = acc.t()
        else:
            # Write each plane's q into its K positions of a chunk buffer, scale it in one pass,
            # then one GEMM: y = A @ (q * S)^T + asum @ Z^T   -> [M, nc]
            wbuf = torch.empty((nc, G, group_size // vals, vals), dtype=cdt, device=A.device)
            for slot, plane in _planes(B[n0:n1], bitwidth):
                wbuf[..., slot].copy_(plane.view(nc, G, -1))
            wbuf.mul_(sc.unsqueeze(-1))
            out[:, n0:n1] = torch.addmm(torch.mm(asum, zc.t()), a, wbuf.view(nc, K).t())
    return out


#: Cached result of importing :mod:`.triton_kernels` (None: not tried yet; False: unavailable).
_TRITON_KERNELS = None


def _triton_kernels():
    """The Triton kernel module, or None when triton cannot be imported (or
    ``PARAKEET_LOWBIT_CUDA_BACKEND=torch`` is set)."""
    global _TRITON_KERNELS
    if _TRITON_KERNELS is None:
        _TRITON_KERNELS = False
        if os.environ.get("PARAKEET_LOWBIT_CUDA_BACKEND", "").lower() != "torch":
            try:
                from . import triton_kernels

                _TRITON_KERNELS = triton_kernels
            except Exception as exc:  # no triton (CPU-only builds): PyTorch-level kernel
                log.info("triton not available (%s); CUDA lowbit ops use the PyTorch-level kernel", exc)
    return _TRITON_KERNELS or None


def cuda_backend() -> str:
    """Which kernels serve the 4-bit op on CUDA: ``"triton"`` (:mod:`.triton_kernels`: at
    ``M <= SMALL_M`` fused unpack, dequant and dot per group, no dequantized weight; at larger M
    one dequantize kernel then a cuBLAS GEMM) or ``"torch"`` (:func:`linear_reference_kernel`).
    Other bit widths always use the PyTorch-level kernel."""
    return "triton" if _triton_kernels() is not None else "torch"


def _cuda_kernel(A, B, group_size, S, Z, bitwidth: int, out=None):
    """CUDA kernel: Triton for 4-bit when available (see :func:`cuda_backend`), else the PyTorch-level kernel."""
    tk = _triton_kernels() if bitwidth == 4 else None
    if tk is None:
        return linear_reference_kernel(A, B, group_size, S, Z, bitwidth, out=out)
    M, K, N = check_linear_args(A, B, group_size, S, Z, bitwidth)
    if out is not None and (tuple(out.shape) != (M, N) or out.dtype != A.dtype or out.device != A.device):
        raise ValueError(
            f"out must be [{M}, {N}] {A.dtype} on {A.device}, got {tuple(out.shape)} {out.dtype} on {out.device}"
        )
    if M <= SMALL_M:
        return tk.linear_4bit(A, B, group_size, S, Z, out=out)
    return tk.linear_4bit_large_m(A, B, group_size, S, Z, out=out)


_CPU_FALLBACK_WARNED = False


def cpu_backend() -> str:
    """Which kernels serve the ops on CPU in eager: ``"native"`` (the compiled kernels, :mod:`._native`: GEMV over
    packed 4-bit weights at M <= 4, register-blocked GEMM over expanded weight panels otherwise, the CPU's widest
    instruction set) or ``"torch"`` (:func:`linear_reference_kernel`: when the compiled library is missing, or
    ``FPA_LOWBIT_CPU_BACKEND=torch`` is set)."""
    if os.environ.get("FPA_LOWBIT_CPU_BACKEND", "").lower() == "torch":
        return "torch"
    return "native" if _native.available() else "torch"


# os.environ's own dict (bytes keys on POSIX): a lookup there takes 0.05 us against os.environ.get's 1 us, which
# is a tenth of a whole product at one activation row. It is the dict that os.environ's setitem and delitem (and
# so monkeypatch.setenv) update, so no change of the variable is missed.
_ENV_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
_BACKEND_KEY = b"FPA_LOWBIT_CPU_BACKEND"


def cpu_backend_is_native() -> bool:
    """``cpu_backend() == "native"``, in the fewest steps (it is asked on every CPU linear call)."""
    if _ENV_DATA is None or _BACKEND_KEY in _ENV_DATA:
        return cpu_backend() == "native"
    return _native._lib is not None or _native.available()


def _cpu_kernel(A, B, group_size, S, Z, bitwidth: int, out=None):
    """CPU kernel: the native library (see :func:`cpu_backend`), else the PyTorch-level kernel with a warning."""
    global _CPU_FALLBACK_WARNED
    if cpu_backend_is_native():
        M, K, N = check_linear_args(A, B, group_size, S, Z, bitwidth)
        if out is not None and (tuple(out.shape) != (M, N) or out.dtype != A.dtype or out.device != A.device):
            raise ValueError(
                f"out must be [{M}, {N}] {A.dtype} on {A.device}, got {tuple(out.shape)} {out.dtype} on {out.device}"
            )
        return _native.linear(A, B, group_size, S, Z, bitwidth, out=out)
    if not _CPU_FALLBACK_WARNED and os.environ.get("FPA_LOWBIT_CPU_BACKEND", "").lower() != "torch":
        _CPU_FALLBACK_WARNED = True
        warnings.warn(
            f"fpa_lowbit: {_native.unavailable_reason()}; CPU ops use the slower PyTorch-level kernel. "
            "Install fpa-lowbit from a wheel, or build it: pip install ./lowbit",
            RuntimeWarning,
            stacklevel=3,
        )
    return linear_reference_kernel(A, B, group_size, S, Z, bitwidth, out=out)


def _mps_kernel(A, B, group_size, S, Z, bitwidth: int, out=None):
    """MPS kernel (not run in this project's CI): PyTorch's int4pack matmul for 4-bit, else the
    PyTorch-level kernel.  Enforces Metal's ``N % 4 == 0 unless M == 1`` rule."""
    M, K, N = check_linear_args(A, B, group_size, S, Z, bitwidth)
    if M > 1 and N % 4 != 0:
        raise ValueError(f"torchao::{linear_op_name(bitwidth)} on MPS: N = {N} must be a multiple of 4 when M > 1")
    if bitwidth == 4 and N % 8 == 0 and K % 32 == 0:
        # PyTorch's MPS int4 kernel reads torchao's 4-bit bytes as they are; its zero is applied to
        # (q - 8): w = (q - 8) * S + Zt  =>  Zt = Z + 8 * S.
        sz = torch.stack([S, Z + 8 * S], dim=-1).transpose(0, 1).contiguous()  # [G, N, 2]
        y = torch._weight_int4pack_mm(A.contiguous(), B, group_size, sz)
        if out is None:
            return y
        out.copy_(y)
        return out
    return linear_reference_kernel(A, B, group_size, S, Z, bitwidth, out=out)


def _try_load_torchao_mps() -> bool:
    """Load torchao's own MPS op library when it exists (source build on a Mac). True if loaded."""
    global MPS_PROVIDER
    if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        return False
    try:
        import torchao.experimental.ops.mps  # noqa: F401  (loads libtorchao_ops_mps_aten and Meta kernels)
    except Exception as exc:  # not built: report and use ours
        log.info("torchao MPS op library not available (%s); using fpa_lowbit kernels", exc)
        return False
    MPS_PROVIDER = "torchao"
    return True


def _has_op(name: str, overload: str = "default") -> bool:
    try:
        packet = getattr(torch.ops.torchao, name)
    except (AttributeError, RuntimeError):
        return False
    return overload in packet.overloads()


def _has_kernel(qualname: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)


def register() -> None:
    """Define (if missing) and implement the torchao low-bit ops for n = 1..8.  Idempotent."""
    global _LIB, _REGISTERED
    if _REGISTERED:
        return
    import torchao  # noqa: F401  (its library must be loaded before we decide what is missing)

    _try_load_torchao_mps()
    lib = torch.library.Library("torchao", "FRAGMENT")
    for n in OP_BITWIDTHS:
        _register_bitwidth(lib, n)
    _LIB = lib
    _REGISTERED = True


def _register_bitwidth(lib: torch.library.Library, n: int) -> None:
    lin = linear_op_name(n)
    pack = f"_pack_weight_{n}bit"
    ours_lin = not _has_op(lin)
    if ours_lin:
        lib.define(f"{lin}(Tensor A, Tensor B, int group_size, Tensor S, Tensor Z) -> Tensor")
    ours_out = not _has_op(lin, "out")
    if ours_out:
        lib.define(
            f"{lin}.out(Tensor A, Tensor B, int group_size, Tensor S, Tensor Z, *, Tensor(a!) out) -> Tensor(a!)"
        )
    if not _has_op(pack):
        lib.define(f"{pack}(Tensor W) -> Tensor")

    def functional(A, B, group_size, S, Z, _n=n):
        return _cpu_kernel(A, B, group_size, S, Z, _n)

    def out_variant(A, B, group_size, S, Z, *, out, _n=n):
        return _cpu_kernel(A, B, group_size, S, Z, _n, out=out)

    def cuda_functional(A, B, group_size, S, Z, _n=n):
        return _cuda_kernel(A, B, group_size, S, Z, _n)

    def cuda_out(A, B, group_size, S, Z, *, out, _n=n):
        return _cuda_kernel(A, B, group_size, S, Z, _n, out=out)

    def mps_functional(A, B, group_size, S, Z, _n=n):
        return _mps_kernel(A, B, group_size, S, Z, _n)

    def mps_out(A, B, group_size, S, Z, *, out, _n=n):
        return _mps_kernel(A, B, group_size, S, Z, _n, out=out)

    def meta(A, B, group_size, S, Z, _n=n):
        check_linear_args(A, B, group_size, S, Z, _n)
        return A.new_empty((A.shape[0], B.shape[0]))

    def meta_out(A, B, group_size, S, Z, *, out, _n=n):
        check_linear_args(A, B, group_size, S, Z, _n)
        return out

    def pack_fn(W, _n=n):
        if W.dim() != 2:
            raise ValueError(f"torchao::_pack_weight_{_n}bit: W must be 2-D [N, K], got {tuple(W.shape)}")
        return pack_lowbit(W, _n)

    def pack_meta(W, _n=n):
        return W.new_empty((W.shape[0], W.shape[1] * _n // 8), dtype=torch.uint8)

    for op, key, fn in (
        (lin, "Meta", meta),
        (f"{lin}.out", "Meta", meta_out),
        (lin, "CPU", functional),
        (f"{lin}.out", "CPU", out_variant),
        (lin, "CUDA", cuda_functional),
        (f"{lin}.out", "CUDA", cuda_out),
        (lin, "MPS", mps_functional),
        (f"{lin}.out", "MPS", mps_out),
        (pack, "CPU", pack_fn),
        (pack, "CUDA", pack_fn),
        (pack, "MPS", pack_fn),
        (pack, "Meta", pack_meta),
    ):
        if not _has_kernel(f"torchao::{op}", key):
            lib.impl(op, fn, key)
