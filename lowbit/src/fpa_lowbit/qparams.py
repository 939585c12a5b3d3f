"""Choosing scales and zeros for the low-bit format: min-max and HQQ.

Both return ``(q, S, Z)`` with ``q`` uint8 ``[N, K]`` in ``[0, 2**n - 1]`` and ``S``, ``Z``
``[N, K/group_size]`` in the requested dtype, so that ``w ≈ q * S + Z`` groupwise.
``q`` is always computed from the *stored* (rounded to ``dtype``) S and Z, so the
dequantized weight is the best the stored parameters can give.

Constant groups (all weights equal) get ``S = 1``, ``Z = w`` and ``q = 0``: finite and exact.
"""

from __future__ import annotations

import torch

from .packing import check_bitwidth

ALGORITHMS = ("min_max", "hqq")
#: Accepted spellings of the algorithm names.
ALGORITHM_ALIASES = {"minmax": "min_max", "min-max": "min_max"}


def normalize_algorithm(algorithm) -> str:
    """``"min_max"`` or ``"hqq"`` from a name, an alias (``"minmax"``) or torchao's enum; ``ValueError`` otherwise."""
    algo = getattr(algorithm, "value", algorithm)
    algo = ALGORITHM_ALIASES.get(algo, algo)
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown uintx_choose_qparams_algorithm {algorithm!r}: use one of {list(ALGORITHMS)}")
    return algo


GROUP_SIZES = (32, 64, 128, 256)
ACT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_group_size(group_size: int) -> None:
    """Raise ``ValueError`` unless ``group_size`` is one of 32, 64, 128, 256."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size not in GROUP_SIZES:
        raise ValueError(f"unsupported group_size {group_size!r}: must be one of {list(GROUP_SIZES)}")


def _grouped(weight: torch.Tensor, group_size: int, bitwidth: int, dtype: torch.dtype) -> torch.Tensor:
    check_bitwidth(bitwidth)
    check_group_size(group_size)
    if dtype not in ACT_DTYPES:
        raise ValueError(f"scale/zero dtype must be one of float32, float16, bfloat16; got {dtype}")
    if weight.dim() != 2 or not weight.is_floating_point():
        raise ValueError(f"weight must be a 2-D floating tensor [N, K], got {weight.dtype} {tuple(weight.shape)}")
    n, k = weight.shape
    if k % group_size != 0:
        raise ValueError(f"K = {k} breaks rule K % group_size == 0 (group_size = {group_size})")
    w = weight.detach().to(torch.float32)
    if not bool(torch.isfinite(w).all()):
        raise ValueError("weight contains NaN or Inf; cannot choose quantization parameters")
    return w.reshape(n, k // group_size, group_size)


def _finish(
    wg: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bitwidth: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Store S, Z in ``dtype``, fix constant/degenerate groups, and quantize with the stored values."""
    qmax = (1 << bitwidth) - 1
    gmin = wg.amin(dim=-1)
    gmax = wg.amax(dim=-1)
    const = gmax == gmin
    s = scale.to(dtype)
    z = zero.to(dtype)
    # Degenerate groups: a scale that rounded to 0 / non-finite in dtype, or a constant group.
    bad = const | ~torch.isfinite(s.float()) | (s.float() <= 0) | ~torch.isfinite(z.float())
    s = torch.where(bad, torch.ones_like(s), s)
    z = torch.where(bad, gmin.to(dtype), z)
    sf = s.float().unsqueeze(-1)
    zf = z.float().unsqueeze(-1)
    q = torch.round((wg - zf) / sf).clamp_(0, qmax)
    q = torch.where(bad.unsqueeze(-1), torch.zeros_like(q), q)
    n = wg.shape[0]
    return q.to(torch.uint8).reshape(n, -1), s.contiguous(), z.contiguous()


def choose_qparams_min_max(weight: torch.Tensor, bitwidth: int, group_size: int, dtype: torch.dtype = torch.float32):
    """Min-max asymmetric parameters: ``S = (max - min) / (2**n - 1)``, ``Z = min`` per group.

    Args:
        weight: float tensor ``[N, K]``, ``K % group_size == 0``, finite.
        bitwidth: n in 1..8.
        group_size: 32, 64, 128 or 256.
        dtype: dtype of S and Z (float32, float16, bfloat16).

    Returns:
        ``(q uint8 [N, K], S dtype [N, K/g], Z dtype [N, K/g])``.

    Raises:
        ValueError: bad bit width / group size / dtype / shape, or non-finite weights.
    """
    wg = _grouped(weight, group_size, bitwidth, dtype)
    qmax = (1 << bitwidth) - 1
    gmin = wg.amin(dim=-1)
    gmax = wg.amax(dim=-1)
    return _finish(wg, (gmax - gmin) / qmax, gmin, bitwidth, dtype)


def _shrink_lp_(x: torch.Tensor, abs_x: torch.Tensor, scratch: torch.Tensor, beta: float, p: float) -> torch.Tensor:
    # Generalised soft-thresholding, the proximal operator of |x|^p (p < 1):
    #   sign(x) * relu(|x| - (1 / beta) * max(|x|, 1e-8) ** (p - 1)),
    # written into abs_x (which holds |x| on entry); scratch is overwritten.
    torch.clamp_min(abs_x, 1e-8, out=scratch).pow_(p - 1).mul_(1.0 / beta)
    abs_x.sub_(scratch).relu_()
    return abs_x.mul_(torch.sign(x, out=scratch))


#: Elements of the weight each HQQ block iterates on: its five work buffers (2.5 MB) stay in the CPU's caches for
#: all the solver's iterations, where whole-weight buffers went to memory ~20 times per iteration (a 4096 x 1024
#: weight: 0.48 -> 0.30 s on the 2-core benchmark machine; 2**16 and 2**18 were slower).
HQQ_BLOCK_ELEMENTS = 1 << 17


def _hqq_best_zero(wg, inv_s, zero, qmax, iters, p, beta, kappa):
    """HQQ's zero-point iterations for grouped weights ``wg`` [rows, groups, group_size] (see choose_qparams_hqq);
    returns the best zero [rows, groups, 1].

    Every op is per element or per group, so the rows are solved in blocks of ``HQQ_BLOCK_ELEMENTS`` (cache-sized)
    with the same bits as the whole tensor at once (tests compare with the textbook iteration).
    """
    rows = wg.shape[0]
    step = max(1, HQQ_BLOCK_ELEMENTS // max(1, wg[0].numel()))
    buffers = [wg.new_empty((min(step, rows), *wg.shape[1:])) for _ in range(4)]
    best = torch.empty_like(zero)
    for start in range(0, rows, step):
        block = slice(start, start + step)
        n = wg[block].shape[0]
        best[block] = _hqq_block(
            wg[block], inv_s[block], zero[block], [b[:n] for b in buffers], qmax, iters, p, beta, kappa
        )
    return best


def _hqq_block(wg, inv_s, zero, buffers, qmax, iters, p, beta, kappa):
    # The textbook iteration (see the comments), computed in four preallocated buffers: the same ops in the same
    # order, so the same bits, without allocating ~20 weight-sized tensors per iteration.
    best_zero = zero.clone()
    best_err = torch.full_like(zero, float("inf"))
    wq, wr, d, a = buffers
    for _ in range(iters):
        torch.mul(wg, inv_s, out=wq).add_(zero).round_().clamp_(0, qmax)  # wq = round(w * inv_s + zero), clamped
        torch.sub(wq, zero, out=wr).div_(inv_s)  # wr = (wq - zero) / inv_s
        torch.sub(wg, wr, out=d)  # d = w - wr
        err = torch.abs(d, out=a).mean(dim=-1, keepdim=True)  # a = |d|
        better = err < best_err
        best_err = torch.where(better, err, best_err)
        best_zero = torch.where(better, zero, best_zero)
        we = _shrink_lp_(d, a, wr, beta, p)  # we = shrink_lp(d), in a
        torch.sub(wg, we, out=d).mul_(inv_s)
        zero = torch.sub(wq, d, out=d).mean(dim=-1, keepdim=True)  # zero = mean(wq - (w - we) * inv_s)
        beta *= kappa
    return best_zero


def choose_qparams_hqq(
    weight: torch.Tensor,
    bitwidth: int,
    group_size: int,
    dtype: torch.dtype = torch.float32,
    iters: int = 20,
    p: float = 0.7,
    beta: float = 10.0,
    kappa: float = 1.01,
):
    """HQQ (half-quadratic) parameters: min-max scale, zero refined by an lp-norm proximal solver.

    The zero of each group is optimised to minimise ``||w - dequant(quant(w))||_p^p`` (p < 1,
    robust to outliers) by alternating a generalised soft-threshold on the error with a
    closed-form zero update; the best iterate (by mean absolute error) is kept.  The zero
    may end up non-integer; it is stored as ``Z = -zero * S``.

    Args:
        weight: float tensor ``[N, K]``, ``K % group_size == 0``, finite.
        bitwidth: n in 1..8.
        group_size: 32, 64, 128 or 256.
        dtype: dtype of S and Z.
        iters, p, beta, kappa: solver settings (iterations, lp exponent, penalty and its growth).

    Returns:
        ``(q uint8 [N, K], S dtype [N, K/g], Z dtype [N, K/g])``.

    Raises:
        ValueError: as :func:`choose_qparams_min_max`.
    """
    wg = _grouped(weight, group_size, bitwidth, dtype)
    qmax = float((1 << bitwidth) - 1)
    gmin = wg.amin(dim=-1, keepdim=True)
    gmax = wg.amax(dim=-1, keepdim=True)
    inv_s = (qmax / (gmax - gmin)).clamp(max=2e4)  # multiplier: q = w * inv_s + zero
    zero = -gmin * inv_s
    best_zero = _hqq_best_zero(wg, inv_s, zero, qmax, iters, p, beta, kappa)
    scale = (1.0 / inv_s).squeeze(-1)
    return _finish(wg, scale, (-best_zero / inv_s).squeeze(-1), bitwidth, dtype)


def choose_qparams(
    weight: torch.Tensor, bitwidth: int, group_size: int, algorithm: str = "hqq", dtype: torch.dtype = torch.float32
):
    """Dispatch to :func:`choose_qparams_min_max` (``"min_max"``, alias ``"minmax"``) or :func:`choose_qparams_hqq`
    (``"hqq"``).

    Raises ``ValueError`` for an unknown algorithm name.
    """
    algo = normalize_algorithm(algorithm)
    if algo == "min_max":
        return choose_qparams_min_max(weight, bitwidth, group_size, dtype)
    return choose_qparams_hqq(weight, bitwidth, group_size, dtype)


def dequantize(
    q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, group_size: int, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Reference dequantization ``ŵ = q * S + Z`` per group, computed in ``dtype``.

    Args: q ``[N, K]`` (integers), scale and zero ``[N, K/group_size]``.
    Returns: ``[N, K]`` tensor of ``dtype``.
    """
    n, k = q.shape
    qg = q.to(dtype).reshape(n, k // group_size, group_size)
    return (qg * scale.to(dtype).unsqueeze(-1) + zero.to(dtype).unsqueeze(-1)).reshape(n, k)
