"""Triton kernels for ``torchao::_linear_fp_act_4bit_weight`` on CUDA.

Small M (``ops.SMALL_M`` rows or fewer, GEMV-like): :func:`linear_4bit`, described below.
Larger M: :func:`linear_4bit_large_m`, one Triton kernel that dequantizes the weight in A's
dtype, then one cuBLAS GEMM.

One program computes ``BLOCK_N`` outputs of one activation row over a slice of K.  Per step it
loads ``BLOCK_N x BLOCK_K/2`` packed bytes, splits each byte into its low nibble (even k) and
high nibble (odd k), and reduces per group::

    y[m, n] = sum_g S[n, g] * (sum_{k in g} q[n, k] * A[m, k]) + Z[n, g] * (sum_{k in g} A[m, k])

so the dequantized weight is never formed (not even per tile: the scale and the offset are
applied once per group).  Accumulation is in float32; the result is rounded to A's dtype once.
When there are too few programs to fill the GPU, K is split (``SPLIT_K``) and the float32
partial sums are added by PyTorch.

Importing this module needs ``triton``; :mod:`fpa_lowbit.ops` falls back to its
PyTorch-level kernel when the import fails (see ``ops.cuda_backend()``).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

#: Output rows (N) per program.
BLOCK_N = 16
#: K values per step (a multiple of every supported group size: 32, 64, 128, 256).
BLOCK_K = 256
#: Aim for at least this many programs per streaming multiprocessor before splitting K.
_PROGRAMS_PER_SM = 2


@triton.jit
def _linear_4bit_gemv_kernel(
    A,
    B,
    S,
    Z,
    P,
    M,
    N,
    K,
    G,
    stride_am,
    stride_ak,
    stride_bn,
    stride_sn,
    stride_zn,
    stride_ps,
    stride_pm,
    k_per_split,
    GROUP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    m = tl.program_id(2)
    NG: tl.constexpr = BLOCK_K // GROUP  # groups per step
    HG: tl.constexpr = GROUP // 2  # bytes per group

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_g = tl.arange(0, NG)
    offs_j = tl.arange(0, HG)
    # byte offset inside one step: [NG, HG]
    byte_off = offs_g[:, None] * HG + offs_j[None, :]

    a_row = A + m.to(tl.int64) * stride_am
    b_rows = B + offs_n.to(tl.int64)[:, None, None] * stride_bn  # [BLOCK_N, 1, 1]
    s_rows = S + offs_n.to(tl.int64)[:, None] * stride_sn  # [BLOCK_N, 1]
    z_rows = Z + offs_n.to(tl.int64)[:, None] * stride_zn

    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    k_start = pid_k * k_per_split
    for k0 in range(k_start, k_start + k_per_split, BLOCK_K):
        g_idx = k0 // GROUP + offs_g  # [NG]
        g_mask = g_idx < G  # K % GROUP == 0, so a group is either wholly in range or not
        # activations: even k (low nibbles) and odd k (high nibbles), [NG, HG]
        k_even = k0 + 2 * byte_off
        a_mask = g_mask[:, None]
        a_e = tl.load(a_row + k_even * stride_ak, mask=a_mask, other=0.0).to(tl.float32)
        a_o = tl.load(a_row + (k_even + 1) * stride_ak, mask=a_mask, other=0.0).to(tl.float32)
        a_sum = tl.sum(a_e + a_o, axis=1)  # [NG]
        # packed weight bytes: [BLOCK_N, NG, HG]
        b_mask = n_mask[:, None, None] & g_mask[None, :, None]
        b = tl.load(b_rows + (k0 // 2 + byte_off)[None, :, :], mask=b_mask, other=0)
        q_lo = (b & 0xF).to(tl.float32)
        q_hi = (b >> 4).to(tl.float32)
        dot = tl.sum(q_lo * a_e[None, :, :] + q_hi * a_o[None, :, :], axis=2)  # [BLOCK_N, NG]
        sz_mask = n_mask[:, None] & g_mask[None, :]
        s = tl.load(s_rows + g_idx[None, :], mask=sz_mask, other=0.0).to(tl.float32)
        z = tl.load(z_rows + g_idx[None, :], mask=sz_mask, other=0.0).to(tl.float32)
        acc += tl.sum(dot * s + z * a_sum[None, :], axis=1)

    p_ptr = P + pid_k.to(tl.int64) * stride_ps + m.to(tl.int64) * stride_pm + offs_n
    tl.store(p_ptr, acc.to(P.dtype.element_ty), mask=n_mask)


@triton.jit
def _dequant_4bit_kernel(
    B,
    S,
    Z,
    W,
    N,
    K,
    G,
    stride_bn,
    stride_sn,
    stride_zn,
    stride_wn,
    GROUP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """``W[n, k] = q[n, k] * S[n, k // GROUP] + Z[n, k // GROUP]`` in W's dtype (for large M)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)  # output columns, stored contiguously
    mask = (offs_n < N)[:, None] & (offs_k < K)[None, :]
    rows = offs_n.to(tl.int64)[:, None]
    # each byte is loaded for both of its nibbles (the second load hits L1)
    b = tl.load(B + rows * stride_bn + (offs_k // 2)[None, :], mask=mask, other=0)
    q = (b >> ((offs_k & 1) * 4).to(tl.uint8)[None, :]) & 0xF
    g = offs_k // GROUP
    s = tl.load(S + rows * stride_sn + g[None, :], mask=mask, other=0.0).to(tl.float32)
    z = tl.load(Z + rows * stride_zn + g[None, :], mask=mask, other=0.0).to(tl.float32)
    w = (q.to(tl.float32) * s + z).to(W.dtype.element_ty)
    tl.store(W + rows * stride_wn + offs_k[None, :], w, mask=mask)


def dequantize_4bit(
    B: torch.Tensor, S: torch.Tensor, Z: torch.Tensor, group_size: int, dtype: torch.dtype
) -> torch.Tensor:
    """The whole dequantized weight ``[N, K]`` in ``dtype`` from 4-bit ``B [N, K/2]`` (one kernel)."""
    N, K = B.shape[0], B.shape[1] * 2
    W = torch.empty((N, K), dtype=dtype, device=B.device)
    if N == 0 or K == 0:
        return W
    S = S if S.stride(1) == 1 else S.contiguous()
    Z = Z if Z.stride(1) == 1 else Z.contiguous()
    B = B if B.stride(1) == 1 else B.contiguous()
    bn, bk = 16, 256
    grid = (triton.cdiv(N, bn), triton.cdiv(K, bk))
    _dequant_4bit_kernel[grid](
        B,
        S,
        Z,
        W,
        N,
        K,
        K // group_size,
        B.stride(0),
        S.stride(0),
        Z.stride(0),
        W.stride(0),
        GROUP=group_size,
        BLOCK_N=bn,
        BLOCK_K=bk,
        num_warps=4,
    )
    return W


def linear_4bit_large_m(
    A: torch.Tensor, B: torch.Tensor, group_size: int, S: torch.Tensor, Z: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Large-M path: dequantize the weight with one Triton kernel, then one cuBLAS GEMM.

    The dequantized weight (``N x K`` in A's dtype) lives only for the call; at large M the GEMM
    dominates and cuBLAS's tensor-core kernels beat any fused dequant-in-the-loop kernel here."""
    W = dequantize_4bit(B, S, Z, group_size, A.dtype)
    if out is None:
        return torch.mm(A, W.t())
    if out.is_contiguous():
        return torch.mm(A, W.t(), out=out)
    out.copy_(torch.mm(A, W.t()))
    return out


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _num_sms(device: torch.device) -> int:
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def linear_4bit(
    A: torch.Tensor,
    B: torch.Tensor,
    group_size: int,
    S: torch.Tensor,
    Z: torch.Tensor,
    out: torch.Tensor | None = None,
    split_k: int | None = None,
) -> torch.Tensor:
    """``A @ ŵᵀ`` for 4-bit torchao-packed ``B [N, K/2]`` with group scales/offsets ``S, Z [N, K/g]``.

    Operands must already be validated (``ops.check_linear_args``) and on one CUDA device.
    ``split_k`` forces the number of K slices (default: chosen from the GPU's size).
    Returns ``[M, N]`` in A's dtype (``out`` when given).
    """
    M, K = A.shape
    N = B.shape[0]
    G = K // group_size
    if out is None:
        out = torch.empty((M, N), dtype=A.dtype, device=A.device)
    if M == 0 or N == 0:
        return out
    B = B if B.stride(1) == 1 else B.contiguous()
    S = S if S.stride(1) == 1 else S.contiguous()
    Z = Z if Z.stride(1) == 1 else Z.contiguous()
    steps = triton.cdiv(K, BLOCK_K)
    n_blocks = triton.cdiv(N, BLOCK_N)
    if split_k is None:
        want = _PROGRAMS_PER_SM * _num_sms(A.device)
        split_k = max(1, min(steps, triton.cdiv(want, n_blocks * M)))
    split_k = max(1, min(int(split_k), steps))
    steps_per_split = triton.cdiv(steps, split_k)
    split_k = triton.cdiv(steps, steps_per_split)
    k_per_split = steps_per_split * BLOCK_K
    direct = split_k == 1 and out.stride(1) == 1
    if direct:
        P = out
        stride_ps, stride_pm = 0, out.stride(0)
    else:
        P = torch.empty((split_k, M, N), dtype=torch.float32, device=A.device)
        stride_ps, stride_pm = P.stride(0), P.stride(1)
    grid = (n_blocks, split_k, M)
    _linear_4bit_gemv_kernel[grid](
        A,
        B,
        S,
        Z,
        P,
        M,
        N,
        K,
        G,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        S.stride(0),
        Z.stride(0),
        stride_ps,
        stride_pm,
        k_per_split,
        GROUP=group_size,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        num_warps=4,
    )
    if not direct:
        out.copy_(P[0] if split_k == 1 else P.sum(dim=0))
    return out
