"""The preprocessor's float32 arithmetic made PyTorch's: the per-feature normalisation's sums in the order of
PyTorch's CPU ``sum`` kernel, its divisions by the frame count as true divisions, and squares as products.

Why: ``normalize_batch(..., "per_feature")`` divides each mel band's deviation from its mean by ``std + 1e-5``.
Where a band is constant over time (digital silence: every frame's log-mel is ``log(2**-24)``; the low bands of DC;
the high bands of quiet signals, which sit at the log guard), ``x - mean`` is only the rounding residue of the mean
and the normalised value is ``residue / (|residue| + 1e-5)``: anything from 0 to about +-1, decided by the last bit
of one float32 sum and one division. Three departures from NeMo's float32 arithmetic mattered there:

1. Sums. PyTorch's CPU ``sum`` is a cascade (``aten/src/ATen/native/cpu/SumKernel.cpp``: 8-lane vectors, 4
   interleaved accumulators, blocks of 16 summed level by level); ExecuTorch's kernels add the same values in
   another order. With identical inputs to the normalisation, 3.61 s of zeros came out +0.364 in every feature where
   NeMo has -0.276 (the demo model hears "our horse" in it), 3 s of DC up to 2e-3 away.
2. Division by a one-element tensor. ExecuTorch's optimized ``div`` multiplies by the divisor's reciprocal, which
   is not the quotient: with batch 1 the frame count is such a divisor, and one ulp in a constant band's mean
   changes every feature of the band (0.5 s of zeros: 0.12 off after the sums were fixed).
3. ``pow(x, 2)``. PyTorch computes ``x * x`` (``pow_tensor_scalar_optimized_kernel``, PowKernel.cpp);
   ExecuTorch's ``pow.Tensor_Scalar`` calls ``std::pow``, an ulp off for about 1 value in 1200.

What: while ``torch.export`` traces the preprocessor, :func:`torch_order_normalization` replaces
``features.normalize_batch`` (a module-level function of NeMo's that ``FilterbankFeatures.forward`` looks up at call
time; restored on exit) by a function that sends ``"per_feature"`` to :func:`normalize_per_feature`: NeMo's code line
for line, except that its two float sums are :func:`ordered_sum` (the cascade written out as elementwise float32
additions: one IEEE add per element whatever kernel runs it) and its divisors are full tensors. After tracing,
:func:`square_as_product` rewrites the graph's squares. The function is NeMo's and so is every rounding step: eager
results equal NeMo's bit for bit (``tests/test_preprocessor_order.py``).

Row length: NeMo's ``transcribe()`` featurizes the unpadded clip, whose ``1 + samples // hop`` frames are the row the
sums run over (``seq_len`` valid frames, then one frame masked to zero). The runners pad the waveform to whole hops
(and to the traced minimum), which adds frames past ``seq_len``; they are zero in the sums, but a longer row changes
the cascade's grouping. :func:`normalize_per_feature` therefore sums each row over ``seq_len + 1`` frames, the length
of NeMo's unpadded call, and leaves the padded frames out.

Vector width: the cascade's grouping depends on ``Vectorized<float>::size()`` of the build. ``LANES`` (8) is the
width of PyTorch's x86 sum kernel at every ``ATEN_CPU_CAPABILITY`` (default, avx2 and avx512, which runs the avx2
kernel: the sum is registered with ``REGISTER_DISPATCH``, which leaves AVX-512 out). Other builds may differ;
``tests/test_preprocessor_order.py`` checks the host's ``torch.sum`` against :func:`ordered_sum` on every capability
the host has.

What still differs: the ops PyTorch hands to MKL on x86 (the STFT's FFT, the mel matmul, and ``sqrt`` and ``log``
through MKL's vector math, accurate to 1 ulp but not correctly rounded) have no ExecuTorch equivalent with MKL's
rounding; ExecuTorch's pocketfft, GEMM loop and libm round differently in the last bit. NeMo's own output moves by as
much when MKL changes its code path (``MKL_CBWR=COMPATIBLE``: up to 1.2e-4 on low-level noise). For zeros these
ops are exact, and the features equal NeMo's to 2 ulps (the standard deviation's sqrt).
"""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import torch
import torch.nn.functional as F

LANES = 8  # at::vec::Vectorized<float>::size() in PyTorch's sum kernel
ILP = 4  # interleaved accumulators of row_sum (ilp_factor)
BLOCK = 16  # 2 ** level_power: items per cascade level, for rows below 2 ** 20 * ILP * LANES values
LEVELS = 4  # num_levels of multi_row_sum


def _in_order(parts):
    """``((p0 + p1) + p2) + ...``: one float add per element per step."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _sum_dim_in_order(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Left-to-right sum over ``dim`` (static size)."""
    return _in_order(list(torch.unbind(x, dim)))


def _pad_dim_to(x: torch.Tensor, dim: int, multiple: int) -> torch.Tensor:
    size = x.shape[dim]
    extra = -size % multiple
    if not extra:
        return x
    shape = list(x.shape)
    shape[dim] = extra
    return torch.cat([x, x.new_zeros(shape)], dim=dim)


def _upper_levels(block_sums: torch.Tensor, dim: int) -> torch.Tensor:
    """The rest of ``multi_row_sum``'s cascade, from the sums of its first-level blocks along ``dim`` (static size;
    blocks past the row's end are zero).

    The kernel adds items into level 0 in blocks of ``BLOCK``; after each block it adds level 0 into level 1 and,
    at every ``BLOCK``-th block, level 1 into level 2, and so on, with level 3 accumulating without reset; it ends
    with ``((acc0 + acc1) + acc2) + acc3``. That equals summing blocks, then blocks of block sums, then blocks of
    those, each left to right, and the level-3 sums left to right: the partial block, group and supergroup at the
    end are then one add each into their level, as in the kernel's final step, and the zero items after the row's
    end add nothing."""
    x = block_sums
    for _ in range(LEVELS - 2):
        if x.shape[dim] <= BLOCK:  # a single group at this level: the levels above add it to zero
            return _sum_dim_in_order(x, dim)
        x = _pad_dim_to(x, dim, BLOCK)
        shape = list(x.shape)
        x = _sum_dim_in_order(x.reshape(shape[:dim] + [shape[dim] // BLOCK, BLOCK] + shape[dim + 1 :]), dim + 1)
    return _sum_dim_in_order(x, dim)


def ordered_sum(x: torch.Tensor, length: torch.Tensor, max_length: int | None = None) -> torch.Tensor:
    """``x[b, f, :length[b]].sum(-1)`` added in exactly the order of PyTorch's CPU kernel on a contiguous row of
    ``length[b]`` float32 values (``vectorized_inner_sum`` from ``LANES`` values on, ``scalar_inner_sum`` below).

    Args:
        x: float32 [B, F, T] (T may be dynamic); values at and past ``length`` are ignored.
        length: int64 [B], each in 0 .. T.
        max_length: static upper bound of T (the traced maximum when T is dynamic); default T.
    Returns:
        float32 [B, F].

    For a row of n values, with V = n // LANES vectors and S = V // ILP:
    ``row_sum`` over vectors: the S groups of ILP consecutive vectors go through the cascade (ILP x LANES
    accumulators at once), the leftover V - ILP*S vectors are added to accumulator 0, then accumulators 1..3 are
    added to it; ``final = 0 + x[LANES*V] + ... + x[n-1]``, then the LANES lanes of accumulator 0 in order.
    Rows shorter than LANES: the same with ILP scalars in place of vectors.

    Work is proportional to T: the first cascade level runs on T rounded up to whole blocks; only the block sums
    (1/512 of the values) are padded to the static maximum for the levels above.
    """
    if max_length is None:
        max_length = int(x.shape[-1])
    group = ILP * LANES  # values of one cascade item (ILP vectors)
    chunk = group * BLOCK  # values of one first-level block
    if max_length // group >= (1 << 20):
        raise ValueError(f"rows of {max_length} values: PyTorch's cascade uses wider blocks there; not modelled")
    batch, features, frames = x.shape
    blocks_max = -(-max_length // chunk) + 1

    # Each row zero-padded to whole blocks (at least two, so that a traced run-time count of blocks never meets
    # a size-1 broadcast) and zeroed at and past `length`.
    blocks = (frames + chunk - 1) // chunk + 1
    row_length = blocks * chunk
    row = F.pad(x, (0, row_length - frames))
    n = length.reshape(batch, 1, 1)
    row = torch.where(torch.arange(row_length, device=x.device).reshape(1, 1, row_length) < n, row, 0.0)

    def gather(start: torch.Tensor, count: int, end: torch.Tensor) -> list[torch.Tensor]:
        """[row[start + i] if start + i < end else 0 for i < count], each [B, F]."""
        idx = start + torch.arange(count, device=x.device).reshape(1, 1, count)
        values = torch.gather(row, 2, torch.clamp(idx, max=row_length - 1).expand(batch, features, count))
        return list(torch.unbind(torch.where(idx < end, values, 0.0), 2))

    # Vector path.
    vectors = n // LANES
    items = vectors // ILP
    # unfold, not reshape: the tracer cannot prove that a symbolic multiple of `chunk` splits into its factors
    grid = row.unfold(2, chunk, chunk).reshape(batch, features, blocks, BLOCK, ILP, LANES)
    item_index = (
        torch.arange(blocks, device=x.device).reshape(blocks, 1) * BLOCK + torch.arange(BLOCK, device=x.device)
    ).reshape(1, 1, blocks, BLOCK, 1, 1)
    grid = torch.where(item_index < items.reshape(batch, 1, 1, 1, 1, 1), grid, 0.0)
    block_sums = _sum_dim_in_order(grid, 3)  # [B, F, blocks, ILP, LANES]
    block_sums = torch.cat([block_sums, block_sums.new_zeros(batch, features, blocks_max, ILP, LANES)], dim=2)[
        :, :, :blocks_max
    ]
    acc = _upper_levels(block_sums, 2)  # [B, F, ILP, LANES]
    leftover_parts = gather(items * group, (ILP - 1) * LANES, vectors * LANES)
    leftover = torch.stack(leftover_parts, -1).reshape(batch, features, ILP - 1, LANES)
    acc0 = _in_order([acc[..., 0, :]] + list(torch.unbind(leftover, 2)))
    acc0 = _in_order([acc0] + [acc[..., k, :] for k in range(1, ILP)])
    tail = gather(vectors * LANES, LANES - 1, n)
    vector_path = _in_order(tail + list(torch.unbind(acc0, -1)))

    # Scalar path (rows shorter than LANES): ILP scalar accumulators, then the rest of the row into the first.
    scalar_items = n // ILP
    first = torch.where(scalar_items >= 1, row[..., :ILP], 0.0)
    rest = gather(scalar_items * ILP, LANES - 1, n)
    scalar_acc0 = _in_order([first[..., 0]] + rest)
    scalar_path = _in_order([scalar_acc0] + [first[..., k] for k in range(1, ILP)])

    return torch.where(length.reshape(batch, 1) >= LANES, vector_path, scalar_path)


def _not_single(divisor: torch.Tensor, dividend: torch.Tensor) -> torch.Tensor:
    """``divisor`` broadcast to ``dividend``'s shape, as a tensor of its own: ExecuTorch's optimized ``div`` turns a
    one-element divisor into a multiplication by its reciprocal, which is not the IEEE quotient NeMo computes (with
    batch 1 the frame count is such a divisor; one ulp off in a constant band's mean changes its every feature).
    The values are unchanged."""
    return divisor.expand(dividend.shape).clone()


def normalize_per_feature(x, seq_len, max_frames: int | None = None):
    """NeMo's ``features.normalize_batch(x, seq_len, "per_feature")``, line for line, with its two float sums in
    PyTorch's order over NeMo's unpadded row length (see the module docstring), and its divisions by the frame
    count as elementwise divisions (:func:`_not_single`). Returns (normalized, mean, std)."""
    from nemo.collections.asr.parts.preprocessing import features

    batch_size = x.shape[0]
    max_time = x.shape[2]
    # NeMo's check that no row has a single frame runs only with CUDA present (the export traces the CPU path).
    time_steps = torch.arange(max_time, device=x.device).unsqueeze(0).expand(batch_size, max_time)
    valid_mask = time_steps < seq_len.unsqueeze(1)
    # The row NeMo's unpadded call reduces over: seq_len valid frames and the one masked frame after them.
    row_length = torch.clamp(seq_len + 1, max=max_time)
    x_mean_numerator = ordered_sum(torch.where(valid_mask.unsqueeze(1), x, 0.0), row_length, max_frames)
    x_mean_denominator = valid_mask.sum(axis=1)
    x_mean = x_mean_numerator / _not_single(x_mean_denominator.unsqueeze(1), x_mean_numerator)

    # Subtract 1 in the denominator to correct for the bias.
    x_std = torch.sqrt(
        ordered_sum(torch.where(valid_mask.unsqueeze(1), x - x_mean.unsqueeze(2), 0.0) ** 2, row_length, max_frames)
        / _not_single(x_mean_denominator.unsqueeze(1) - 1.0, x_mean)
    )
    x_std = x_std.masked_fill(x_std.isnan(), 0.0)  # edge case: only 1 frame in denominator
    # make sure x_std is not zero
    x_std += features.CONSTANT
    normalized = (x - x_mean.unsqueeze(2)) / x_std.unsqueeze(2)
    normalized.masked_fill_(~valid_mask.unsqueeze(1), 0.0)
    return normalized, x_mean, x_std


@contextmanager
def torch_order_normalization(max_frames: int | None = None):
    """While active, NeMo's featurizer normalises per feature with :func:`normalize_per_feature` (sums in PyTorch's
    CPU order); other normalisation types still go to NeMo's ``normalize_batch``.

    Args:
        max_frames: static upper bound of the feature frames (needed when tracing with a dynamic length; eager calls
            can leave it None)."""
    from nemo.collections.asr.parts.preprocessing import features

    original = features.normalize_batch

    def replacement(x, seq_len, normalize_type):
        if normalize_type != "per_feature":
            return original(x, seq_len, normalize_type)
        return normalize_per_feature(x, seq_len, max_frames=max_frames)

    with mock.patch.object(features, "normalize_batch", replacement):
        yield


def square_as_product(ep) -> int:
    """In an ATen-level ExportedProgram, rewrite ``pow(x, 2)`` as ``x * x``, in place; returns how many.

    That is the arithmetic PyTorch's CPU kernel performs for an exponent of 2 (``pow_tensor_scalar_optimized_kernel``
    in ``aten/src/ATen/native/cpu/PowKernel.cpp``: ``base * base``, one correctly rounded product), while
    ExecuTorch's ``pow.Tensor_Scalar`` calls ``std::pow``, which is off by an ulp for about 1 value in 1200. NeMo's
    featurizer squares three times (the STFT's real and imaginary parts, the magnitude to power, and the deviations
    in the per-feature variance)."""
    pow_scalar = torch.ops.aten.pow.Tensor_Scalar
    graph = ep.graph_module.graph
    count = 0
    for node in graph.nodes:
        if node.op == "call_function" and node.target == pow_scalar and node.args[1] == 2:
            base = node.args[0]
            node.target = torch.ops.aten.mul.Tensor
            node.args = (base, base)
            count += 1
    if count:
        ep.graph_module.recompile()
    return count
