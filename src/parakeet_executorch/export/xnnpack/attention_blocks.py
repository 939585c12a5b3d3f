"""NeMo's relative-position attention computed in query blocks, so that its largest values are one block's.

Why: XNNPACK plans a delegate's internal values at their upper-bound shapes and shares one workspace, sized by the
largest delegate, among all delegates; the executorch memory plan likewise holds the values that cross delegate
boundaries at their upper bounds. In one pass, each attention layer writes ``matrix_bd`` as [heads, T, 2T-1]
floats, then ``matrix_ac``, the shifted ``matrix_bd``, the scores and the softmax as [heads, T, T]: at v3's size
(8 heads) and a 60 s bound (T = 751 encoder frames) 36 MB and 18 MB apiece, the largest values of the whole encoder
once the subsampling runs in time chunks. Computed in ``n`` blocks of queries one after the other (the export keeps
the traced order, ``node_order.py``), a layer holds one block's values at a time.

The algorithm, for a query block of rows ``[i0, i0 + c)`` (every row of the scores depends only on its own query):

* ``matrix_ac`` rows: ``(q_u[i0:i0+c]) @ k^T``, [heads, c, T].
* ``matrix_bd`` rows: NeMo's ``rel_shift`` reads row ``i`` of the unshifted product at columns
  ``T - 1 - i + j`` (:func:`shift_block`), so the block's rows read columns
  ``[T - i0 - c, 2T - 1 - i0)`` of the position table's window: the block multiplies ``q_v[i0:i0+c]`` by those
  ``T + c - 1`` columns only, and shifts with the same strided read (row ``r`` from column ``c - 1 - r``).
* scores, mask, softmax and the product with the values are row-wise as in NeMo.

The block size is ``c = ceil(T / n)`` at run time, with ``n`` fixed at export from the bound; the queries are
zero-padded to ``n c`` rows so that every block exists whatever T is, and the position table has ``n - 1`` zero
columns in front, which only the padding rows read. The blocks' outputs are concatenated, time outermost, and cut to
T rows. Each output row is computed from the same numbers as in one pass (the same dot products over ``d_k`` and
the same softmax over the row); only a kernel's blocking of the products may differ, so the values agree to float
rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

# The budget for one block's largest value (the unshifted ``matrix_bd`` rows, [heads, c, T + c - 1]), in bytes. At
# v3's size and a 60 s bound: 6 blocks of 126 queries, 3.5 MB each; at a 20 s bound one block (the one-pass
# forward, 4.0 MB). With 8 MiB (3 blocks of 251 queries) the attention's values set the memory plan's peak, 8.7 MiB
# above this budget's at 60 s, for no measurable speed difference.
BLOCK_BYTES = 4 * 2**20


def encoder_frames(pre_encode: torch.nn.Module, feature_frames: int) -> int:
    """Encoder frames that NeMo's ``ConvSubsampling`` (subsampling.py) makes of ``feature_frames`` feature frames,
    by its own ``calc_length``; ``feature_frames`` back for a ``pre_encode`` without those attributes (a linear
    pre-encoder keeps the length)."""
    from nemo.collections.asr.parts.submodules.subsampling import calc_length

    if not hasattr(pre_encode, "_sampling_num"):
        return feature_frames
    geometry = {name: getattr(pre_encode, name) for name in ("_left_padding", "_right_padding", "_kernel_size")}
    frames = calc_length(
        torch.tensor([feature_frames]),
        all_paddings=geometry["_left_padding"] + geometry["_right_padding"],
        kernel_size=geometry["_kernel_size"],
        stride=getattr(pre_encode, "_stride"),  # noqa: B009
        ceil_mode=getattr(pre_encode, "_ceil_mode"),  # noqa: B009
        repeat_num=getattr(pre_encode, "_sampling_num"),  # noqa: B009
    )
    return int(frames.item())


def query_block_count(heads: int, max_frames: int, dtype_bytes: int, block_bytes: int = BLOCK_BYTES) -> int:
    """Query blocks for at most ``max_frames`` encoder frames: the fewest ``n`` whose block's unshifted
    ``matrix_bd`` ([heads, c, T + c - 1] with ``c = ceil(T / n)``, ``dtype_bytes`` per element) fits in
    ``block_bytes``; 1 (one pass) when the whole fits, never more than ``max_frames``."""
    for n in range(1, max_frames + 1):
        c = math.ceil(max_frames / n)
        if heads * c * (max_frames + c - 1) * dtype_bytes <= block_bytes:
            return n
    return max(1, max_frames)


def shift_block(x: torch.Tensor, width: int) -> torch.Tensor:
    """NeMo's ``rel_shift`` for a block of query rows: ``out[h, r, j] = x[h, r, j + c - 1 - r]`` for x of
    [heads, c, width + c - 1], out [heads, c, width]; with ``c = width`` it is the whole matrix's shift.

    NeMo pads a zero column, views the [T, 2T] rows as [2T, T], drops the first row, views the rest as [T, 2T-1]
    and keeps T columns: following one element through gives ``out[h, i, j] = x[h, i, j + T - 1 - i]`` (never the
    zero column). For rows ``[i0, i0 + c)`` given only the columns from ``T - i0 - c`` on, that is the read above:
    ``as_strided`` with strides (c * cols, cols - 1, 1) and offset c - 1, one copy of the same elements."""
    h, rows, cols = x.size()
    x = x.contiguous()
    return x.as_strided((h, rows, width), (rows * cols, cols - 1, 1), rows - 1)


def blocked_attention_context(
    q: torch.Tensor,
    bias_u: torch.Tensor,
    bias_v: torch.Tensor,
    k_t: torch.Tensor,
    v: torch.Tensor,
    position_columns: Callable[[int, int], torch.Tensor],
    fill_block: Callable[[int, int], torch.Tensor] | None,
    scale: float,
    blocks: int,
) -> torch.Tensor:
    """The attention's context rows of NeMo's ``RelPositionMultiHeadAttention.forward`` (multi_head_attention.py,
    ``matrix_ac + rel_shift(matrix_bd)``, scaled, masked, softmax, times the values), in ``blocks`` query blocks
    (module docstring), batch 1 dropped.

    Args:
        q: [T, heads, d_k] float queries (``linear_q``'s output).
        bias_u, bias_v: [heads, d_k] NeMo's ``pos_bias_u`` / ``pos_bias_v``.
        k_t: [heads, d_k, T] keys, transposed for ``bmm``.
        v: [heads, T, d_k] values.
        position_columns: ``(start, c)`` -> [heads, d_k, T + c - 1], the projected relative positions of columns
            ``[start, start + T + c - 1)`` of the window ``linear_pos(pos_emb)`` (2T - 1 columns, positions T-1 down
            to -(T-1)) with ``blocks - 1`` zero columns in front, so ``start >= 0`` always (``start`` is a symbolic
            int at trace time).
        fill_block: ``(b, c)`` -> [1, c, T], rows ``[b c, b c + c)`` of the additive mask (0 keep, -10000
            masked) zero-padded to ``blocks * c`` rows; None: no mask.
        scale: NeMo's ``s_d_k`` (sqrt(d_k)).
        blocks: the block count n, fixed at export (:func:`query_block_count`).

    Returns:
        [T, heads, d_k] float, the context rows (before ``linear_out``).
    """
    frames = q.size(0)
    c = (frames + blocks - 1) // blocks
    if blocks > 1:
        q = F.pad(q, (0, 0, 0, 0, 0, blocks * c - frames))
    outputs: list[torch.Tensor] = []
    contexts: list[torch.Tensor] = []
    zeros = q.new_zeros((q.size(1), q.size(2), 1))
    for b in range(blocks):
        q_b = q[b * c : (b + 1) * c] if blocks > 1 else q
        if contexts:
            # An exact no-op that makes this block's products depend on the previous block's output: each added
            # value is a sum of finite numbers times 0.0. Without it the blocks are independent, and the XNNPACK
            # partitioner puts every block's products in one delegate, all alive at once. A bmm (not a slice,
            # which XNNPACK does not take on a tensor with a run-time size) keeps the link inside the delegate.
            q_b = q_b + torch.bmm(contexts[-1], zeros).transpose(0, 1)  # [c, H, 1] broadcasts over d_k
        q_u = (q_b + bias_u).transpose(0, 1)  # [H, c, d_k]
        q_v = (q_b + bias_v).transpose(0, 1)
        matrix_bd = torch.bmm(q_v, position_columns((blocks - 1) + frames - (b + 1) * c, c))  # [H, c, T + c - 1]
        matrix_ac = torch.bmm(q_u, k_t)  # [H, c, T]
        scores = (matrix_ac + shift_block(matrix_bd, frames)) / scale
        if fill_block is not None:
            scores = scores + fill_block(b, c)
        attn = torch.softmax(scores, dim=-1)
        contexts.append(torch.bmm(attn, v))  # [H, c, d_k]
        outputs.append(contexts[-1].transpose(0, 1))  # [c, H, d_k]
    if blocks == 1:
        return outputs[0]
    # Time outermost, so the cut to T rows is contiguous whatever T is (cut along an inner axis, torch.export's
    # contiguity checks would guard on T != n c).
    return torch.cat(outputs, dim=0)[:frames]
