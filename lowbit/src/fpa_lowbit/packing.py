"""Bit packing for the low-bit weight format (see :mod:`fpa_lowbit`).

Values are unsigned n-bit integers laid out row-major along K and packed as a
least-significant-bit-first bit stream: value ``i`` of a row occupies bits
``[i*n, (i+1)*n)`` of that row's stream, and byte ``b`` of the packed row holds
bits ``[8b, 8b+8)``.  Each row of K values therefore takes ``K*n/8`` bytes.
"""

from __future__ import annotations

import math

import torch

SUPPORTED_BITWIDTHS = (1, 2, 3, 4, 5, 6, 7, 8)


def check_bitwidth(bitwidth: int) -> None:
    """Raise ``ValueError`` naming ``bitwidth`` unless it is an int in 1..8."""
    if isinstance(bitwidth, bool) or not isinstance(bitwidth, int) or bitwidth not in SUPPORTED_BITWIDTHS:
        raise ValueError(
            f"unsupported bit width {bitwidth!r}: fpa_lowbit supports bitwidth in {list(SUPPORTED_BITWIDTHS)}"
        )


def unit_layout(bitwidth: int) -> tuple[int, int]:
    """Return ``(values_per_unit, bytes_per_unit)``: the smallest whole-byte block of the stream.

    1-bit: (8, 1); 2-bit: (4, 1); 3-bit: (8, 3); 4-bit: (2, 1); 5-bit: (8, 5); 6-bit: (4, 3);
    7-bit: (8, 7); 8-bit: (1, 1).
    """
    check_bitwidth(bitwidth)
    values = 8 // math.gcd(bitwidth, 8)
    return values, values * bitwidth // 8


def _unit_dtype(bits: int) -> torch.dtype:
    if bits <= 8:
        return torch.uint8
    if bits <= 31:
        return torch.int32
    return torch.int64


def packed_row_bytes(k: int, bitwidth: int) -> int:
    """Bytes per packed row of ``k`` n-bit values; raises ``ValueError`` unless ``k % 8 == 0``."""
    check_bitwidth(bitwidth)
    if k % 8 != 0:
        raise ValueError(f"K = {k} must be a multiple of 8 to pack {bitwidth}-bit values")
    return k * bitwidth // 8


def pack_lowbit(q: torch.Tensor, bitwidth: int) -> torch.Tensor:
    """Pack unsigned n-bit integers into bytes.

    Args:
        q: integer tensor ``[N, K]`` (any integer dtype), values in ``[0, 2**bitwidth - 1]``,
            ``K % 8 == 0``.
        bitwidth: n in 1..8.

    Returns:
        ``uint8`` tensor ``[N, K*bitwidth/8]`` on ``q``'s device (LSB-first stream along K).

    Raises:
        ValueError: bad bit width, non-2-D or floating input, K not a multiple of 8,
            or a value outside ``[0, 2**bitwidth - 1]``.
    """
    check_bitwidth(bitwidth)
    if q.dim() != 2:
        raise ValueError(f"pack_lowbit expects a 2-D [N, K] tensor, got shape {tuple(q.shape)}")
    if q.is_floating_point() or q.is_complex() or q.dtype == torch.bool:
        raise ValueError(f"pack_lowbit expects an integer tensor, got {q.dtype}")
    n_rows, k = q.shape
    nbytes = packed_row_bytes(k, bitwidth)
    qmax = (1 << bitwidth) - 1
    if q.numel() and (int(q.min()) < 0 or int(q.max()) > qmax):
        raise ValueError(
            f"values out of range for {bitwidth}-bit packing: min {int(q.min())}, max {int(q.max())}, "
            f"allowed [0, {qmax}]"
        )
    vals, unit_bytes = unit_layout(bitwidth)
    dt = _unit_dtype(vals * bitwidth)
    units = q.reshape(n_rows, k // vals, vals).to(dt)
    shifts = torch.arange(vals, device=q.device, dtype=dt) * bitwidth
    word = (units << shifts).sum(dim=-1, dtype=dt) if dt != torch.uint8 else _or_reduce(units << shifts)
    byte_shifts = torch.arange(unit_bytes, device=q.device, dtype=dt) * 8
    out = ((word.unsqueeze(-1) >> byte_shifts) & 0xFF).to(torch.uint8)
    return out.reshape(n_rows, nbytes).contiguous()


def _or_reduce(x: torch.Tensor) -> torch.Tensor:
    # Bit fields never overlap, so OR == sum; sum in int16 then narrow.
    return x.to(torch.int16).sum(dim=-1).to(torch.uint8)


def unpack_lowbit(
    packed: torch.Tensor, bitwidth: int, k: int | None = None, dtype: torch.dtype = torch.uint8
) -> torch.Tensor:
    """Inverse of :func:`pack_lowbit`.

    Args:
        packed: ``uint8`` tensor ``[N, K*bitwidth/8]``.
        bitwidth: n in 1..8.
        k: expected K (checked against the packed width when given).
        dtype: result dtype (``uint8`` by default; a float dtype gives q converted to float).

    Returns:
        tensor ``[N, K]`` of values in ``[0, 2**bitwidth - 1]``.

    Raises:
        ValueError: bad bit width, wrong dtype/rank, or a width inconsistent with ``k``.
    """
    check_bitwidth(bitwidth)
    if packed.dtype != torch.uint8 or packed.dim() != 2:
        raise ValueError(
            f"unpack_lowbit expects a 2-D uint8 tensor, got {packed.dtype} with shape {tuple(packed.shape)}"
        )
    n_rows, nbytes = packed.shape
    vals, unit_bytes = unit_layout(bitwidth)
    if nbytes % unit_bytes != 0:
        raise ValueError(f"packed width {nbytes} is not a multiple of {unit_bytes} for {bitwidth}-bit values")
    kk = nbytes // unit_bytes * vals
    if k is not None and k != kk:
        raise ValueError(f"packed width {nbytes} holds K = {kk} {bitwidth}-bit values, expected K = {k}")
    mask = (1 << bitwidth) - 1
    if unit_bytes == 1:
        if vals == 1:
            return packed.to(dtype)
        shifts = torch.arange(vals, device=packed.device, dtype=torch.uint8) * bitwidth
        q = (packed.unsqueeze(-1) >> shifts) & mask
        return q.reshape(n_rows, kk).to(dtype)
    dt = _unit_dtype(vals * bitwidth)
    units = packed.reshape(n_rows, nbytes // unit_bytes, unit_bytes).to(dt)
    byte_shifts = torch.arange(unit_bytes, device=packed.device, dtype=dt) * 8
    word = (units << byte_shifts).sum(dim=-1, dtype=dt)
    shifts = torch.arange(vals, device=packed.device, dtype=dt) * bitwidth
    q = (word.unsqueeze(-1) >> shifts) & mask
    return q.reshape(n_rows, kk).to(dtype)
