"""Module-level rewrites that let XNNPACK take the whole FastConformer encoder in a few large partitions.

Why: lowered as traced, the encoder split into hundreds of XNNPACK delegates (343 on the full-size model) around
ops that the XNNPACK partitioner of executorch 1.5.1 rejects; every boundary costs a round trip through the
portable kernels, and lowering time grows with the number of partitions (23 min for the full model).

Two levels, both numerically equivalent to NeMo (same maths, at most a different float summation order); the
graph level is :mod:`.view_rewrites`.

1. Module level, :func:`xnnpack_friendly_encoder` -- a context manager that, while a NeMo ``ConformerEncoder`` is
   traced by ``torch.export``, swaps the ``forward`` of some of its submodules (the instances only; NeMo's classes and
   files are untouched, and everything is restored on exit):

   ``LayerNorm`` -> mean and variance as two ``linear`` ops against a constant ``1/D`` row.
       XNNPACK has no layer-norm op (``native_layer_norm`` x5 per layer stayed portable), and its ``mean.dim`` only
       reduces the two inner dims of a 4-D tensor. A [1, D] weight of ``1/D`` gives ``sum(x)/D`` on its GEMM kernel;
       ``(x - mean) * rsqrt(var + eps) * w + b`` is the definition of layer norm (biased variance, as PyTorch).
       1/D is exact for D a power of two (64, 1024); only the summation order differs.

   ``RelPositionMultiHeadAttention`` -> the same attention in 3-D (batch 1 dropped: [heads, time, d_k]).
       In 4-D, every ``matmul`` became expand + view + bmm + view with two symbolic sizes, which XNNPACK's reshape
       cannot take, so each layer split three times. In 3-D the bmm operands and results need no such view.
       The relative shift stays on the portable kernels: NeMo's pad, view, slice, view, slice have run-time sizes,
       which XNNPACK's static reshape/slice cannot express. Here it is one ``as_strided`` read of the same elements
       (``attention_blocks.shift_block``), one portable copy of [heads, T, T] instead of a pad and three copies of
       about twice that; it is pure data movement, identical to NeMo's ``rel_shift``, and the only per-layer cut of
       the graph (one per query block, below).
       Given the export's longest input, the attention is computed in query blocks (``attention_blocks.py``), so
       that neither XNNPACK's workspace nor the memory plan is sized by a whole layer's [heads, T, 2T-1] product at
       the bound. Then, for the memory plan's sake (its fullest instruction is inside a block): each layer slices
       its relative positions from ``pos_enc.pe`` itself (the rows ``RelPositionalEncoding.forward`` gives every
       layer), so that no [2T - 1, d_model] value stays alive from the first layer to the last, and projects them
       before its queries, keys and values exist; and the keys' and values' layouts are made in a delegate of
       their own before the first block (a zero-valued term links them into the queries), so that the linears'
       outputs are freed before the blocks' values are made.
       Masking: ``masked_fill(mask, -10000)`` then softmax then ``masked_fill(mask, 0)`` -> ``scores + fill`` then
       softmax, with float ``fill = mask * -10000`` made once per mask tensor (XNNPACK has no ``where``). Each mask,
       broadcast over the heads, costs a pass over [heads, T, T]; the two multiplies that NeMo's fills would need
       (``scores * keep`` before the softmax, ``attn * keep`` after it) are left out: at v3's size and 60 s they were
       30 ms of the encoder's 2.1 s, and the encoder ran 1.04-1.06x faster without them. In a row of a valid query
       the masked keys are padding (or outside the attention context): NeMo gives them exactly -10000, here
       ``score - 10000``; either way their softmax weight is exp(<= -10000 + score spread) = 0.0, and the unmasked
       entries and the row's sum are the same numbers, so valid frames are bit-identical. Rows of padded queries
       (every key masked) differ: NeMo zeroes them, here they hold a softmax of shifted scores. Those frames are
       beyond the valid length: later layers mask them as keys (weight 0.0) and the convolution zeroes them before
       its depthwise step, so no valid frame ever reads them, and the runners decode only ``encoded[:, :length]``.
       Positional projection: ``linear_pos`` (no bias) maps the relative-position rows, which are constants of the
       model (``RelPositionalEncoding.pe``, fitted to the longest input), so its product with every row of the
       table is computed once at export and stored as ``[heads, d_k, positions]``; at run time each layer slices
       its table around the centre exactly as ``RelPositionalEncoding.forward`` slices ``pe``. Each row of a GEMM
       depends only on its own input row, so the values are those of ``linear_pos(pos_emb)`` up to summation
       order. This removes a GEMM of 2T-1 rows per layer (8 % of the encoder's linear work at v3's size) and the
       permute of its result. Only for a float ``linear_pos`` and only while the table is at most
       ``pos_table_max_ratio`` x the weight's size (1.47 x at v3's size and 60 s; a 600 s export would need 14.6 x,
       1.5 GB at v3's size, and keeps the run-time GEMM).

   ``ConformerConvolution`` -> GLU as two 1x1 convolutions (the two halves of ``pointwise_conv1``'s weight) and
       ``a * sigmoid(g)``; pad masking as ``x * keep``.
       ``glu(x, dim=1)`` decomposes into two channel slices of a tensor with a run-time length, which XNNPACK's
       static slice rejects; each output channel of a 1x1 conv depends only on its own weight row, so the halves
       compute the same values. ``masked_fill(pad, 0)`` -> ``x * keep`` as above (exact for finite x).
       In a quantized model the pointwise convolutions are already linears (``pointwise.py``, value and gate
       halves); they then run as linears on the [B, T, C] input, with the transpose only around the depthwise
       convolution.

   ``ConformerFeedForward`` -> the same two linears and activation on the [B T, d_model] rows.
       Traced on [1, T, d], the quantized linears (custom ops outside XNNPACK, 2-D in and out) leave a reshape of
       their [T, 4096] output to [1, T, 4096] before the activation and one back after it; XNNPACK runs each as a
       copy into a value of its own (12 MB apiece at v3's size and a 60 s bound, in its shared workspace). On rows
       the activation reads the linear's output as it is; only the [T, d_model]
       input and output are reshaped. Each output row depends only on its own input row, so the values are the same.

   ``MaskedConvSequential`` (the subsampling's masked conv stack) -> the time mask as a [B, 1, T, 1] float that
       broadcasts, instead of NeMo's ``mask.unsqueeze(1).expand(B, C, T, F)`` before each layer.
       XNNPACK takes no ``expand`` with a run-time size, so every mask was materialised by the portable
       ``expand_copy`` (at v3's size and 60 s, 256 x 3000 x 64 floats, 196 MB, for one of them) and then read
       again by the multiply: 18 ``expand_copy`` calls, 193 ms of a 6.75 s encoder. XNNPACK's multiply
       broadcasts; ``x * 1.0`` and ``x * 0.0`` are the same numbers whether the mask was expanded or broadcast.
       Given the export's longest input, the stack is also computed in time chunks (``subsampling_chunks.py``), so
       that XNNPACK's workspace is not sized by its first convolution's output at the bound; ``ConvSubsampling``
       then applies its output linear to each chunk's frames before the chunks are joined.
"""

from __future__ import annotations

import functools
import types
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from ..pointwise import GluInputLinear, PointwiseLinear
from .attention_blocks import blocked_attention_context, encoder_frames, query_block_count
from .subsampling_chunks import (
    TAPS_WEIGHT,
    chunk_count,
    chunkable,
    chunked_masked_conv_forward,
    projected_subsampling_forward,
    splits_at,
    taps_weight,
)

_INF_FILL = -10000.0  # NeMo's INF_VAL in multi_head_attention.py


class _MaskCache:
    """Float forms of a boolean mask (True = masked), each made once per traced mask tensor (not once per layer)
    and only where used: ``keep`` (1 where valid, 0 where masked) for the convolution's pad mask, ``fill`` (0 where
    valid, -10000 where masked) for the attention's."""

    def __init__(self):
        self._entries: dict[tuple[int, str], tuple] = {}

    def _get(self, mask: torch.Tensor, kind: str, make):
        key = (id(mask), kind)
        hit = self._entries.get(key)
        if hit is None or hit[0] is not mask:  # an id can be reused once its tensor is gone
            hit = (mask, make())
            self._entries[key] = hit
        return hit[1]

    def keep(self, mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self._get(mask, "keep", lambda: torch.logical_not(mask).to(dtype))

    def fill(self, mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self._get(mask, "fill", lambda: mask.to(dtype) * _INF_FILL)

    def fill_blocks(self, mask: torch.Tensor, dtype: torch.dtype, blocks: int):
        """``(b, c)`` -> [1, c, T]: rows ``[b c, b c + c)`` of ``fill`` zero-padded to ``blocks * c`` rows (the
        query blocks of ``attention_blocks.py``), each block's rows cut once per mask tensor."""

        def make_padded():
            fill = self.fill(mask, dtype)
            c = (fill.size(1) + blocks - 1) // blocks
            return F.pad(fill, (0, 0, 0, blocks * c - fill.size(1)))

        def block(b: int, c) -> torch.Tensor:
            padded = self._get(mask, f"fill/{blocks}", make_padded)
            return self._get(mask, f"fill/{blocks}/{b}", lambda: padded[:, b * c : (b + 1) * c])

        return block


def _layer_norm_forward(self, x):
    avg = self._xnn_avg_row  # [1, D] of 1/D
    mean = F.linear(x, avg)
    centred = x - mean
    var = F.linear(centred * centred, avg)
    y = centred * torch.rsqrt(var + self.eps)
    if self.weight is not None:
        y = y * self.weight
    if self.bias is not None:
        y = y + self.bias
    return y


def _feed_forward_forward(self, x):
    """NeMo's ``ConformerFeedForward.forward`` (conformer_modules.py) on the rows of x [B, T, d_model]."""
    rows = self.linear1(x.reshape(-1, x.size(-1)))
    rows = self.linear2(self.dropout(self.activation(rows)))
    return rows.view(x.size(0), x.size(1), rows.size(-1))


def _position_table(pos_enc, attention, front: int = 0) -> torch.Tensor:
    """``linear_pos`` applied to every row of ``pos_enc.pe``: [heads, d_k, front + rows], the layout ``bmm`` takes,
    with ``front`` zero columns first (read only by the padding rows of the last query block,
    ``attention_blocks.py``)."""
    rows = pos_enc.pe[0].to(attention.linear_pos.weight.dtype)
    projected = F.linear(rows, attention.linear_pos.weight)  # [rows, H * d_k]
    table = projected.view(rows.size(0), attention.h, attention.d_k).permute(1, 2, 0)
    return F.pad(table, (front, 0)).contiguous()


def _slices_own_positions(pos_enc) -> bool:
    """Whether an attention layer may slice its relative positions from ``pos_enc.pe`` itself, as
    ``RelPositionalEncoding.forward`` (embedding.py) does without a cache: an eval-mode ``RelPositionalEncoding``
    (its ``dropout_emb`` is then the identity)."""
    return pos_enc is not None and type(pos_enc).__name__ == "RelPositionalEncoding" and not pos_enc.training


def _zero_link(values: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """[1, heads, 1] zeros computed from ``values`` (3-D, [heads, a, b] each; finite), to add to [T, heads, d_k]
    queries so that they are made after ``values`` (``mean`` of a 4-D view because XNNPACK's reduces the two inner
    dims of a 4-D tensor). The ``squeeze`` stays a portable op on a [1, heads, 1, 1] value: with a ``view``, which
    XNNPACK takes, the partitioner joined the link and the queries' add into the keys' delegate, and the memory
    plan came out 2.9 MiB larger at v3's width and a 60 s bound (40.8 against 37.9 MiB, the same values alive at its
    fullest instruction: the planner packs them differently)."""
    means = [(value.unsqueeze(0) * 0.0).mean(dim=(2, 3), keepdim=True) for value in values]
    return functools.reduce(torch.add, means).squeeze(0).transpose(0, 1)


def _position_columns(attention, pos_enc, pos_emb, length: int, blocks: int):
    """``(start, c)`` -> [H, d_k, length + c - 1]: columns ``[start, start + length + c - 1)`` of the relative
    positions' projection for ``length`` frames (positions length-1 .. -(length-1), as
    ``RelPositionalEncoding.forward`` slices ``pe`` with cache_len 0) after ``blocks - 1`` zero columns.

    From the precomputed table when there is one and it was made for this ``pe`` (``pe``'s rows are a function of
    its length alone, NeMo's ``extend_pe`` and ``program._fit_relative_positions`` alike, so equal lengths mean equal
    rows; identity cannot be checked: ``torch.export`` swaps buffers for fake tensors while tracing); else
    ``linear_pos(pos_emb)`` at run time (of the layer's own slice of ``pe`` where it may take one)."""
    table = getattr(attention, "_xnn_pos_table", None)
    front = blocks - 1
    if table is not None and pos_enc is not None and pos_enc.pe.size(1) + front == table.size(-1):
        first = pos_enc.pe.size(1) // 2 + 1 - length  # the window's first column in the table, less its zeros

        def from_table(start, c):
            return table[:, :, first + start : first + start + length + c - 1]

        return from_table
    h, d_k = attention.h, attention.d_k
    if _slices_own_positions(pos_enc):
        # The same rows as ``pos_emb``, sliced again in each layer: the encoder's one ``pos_emb`` would stay alive
        # from the first layer to the last ([2T - 1, d_model], 6 MB at v3's size and a 60 s bound, held at the
        # memory plan's fullest instruction inside every attention), while a layer's own slice dies at its
        # ``linear_pos``.
        first = pos_enc.pe.size(1) // 2 + 1 - length
        # [2T - 1, d_model] by a portable select: a reshape of the [1, 2T - 1, d_model] slice would be taken into
        # the next XNNPACK delegate, which then runs after the queries', keys' and values' linears.
        pos_emb = pos_enc.pe[:, first : first + 2 * length - 1][0]
    window = attention.linear_pos(pos_emb).view(-1, h, d_k).permute(1, 2, 0)  # [H, d_k, 2 length - 1]
    if front:
        window = F.pad(window, (front, 0))

    def from_window(start, c):
        return window if blocks == 1 else window[:, :, start : start + length + c - 1]

    return from_window


def _make_attention_forward(masks: _MaskCache, original, pos_enc=None, blocks: int = 1):
    def forward(self, query, key, value, mask, pos_emb=None, cache=None):
        if cache is not None or query.size(0) != 1 or pos_emb is None or pos_emb.size(0) != 1:
            return original(query, key, value, mask, pos_emb=pos_emb, cache=cache)
        h, d_k = self.h, self.d_k
        frames = query.size(1)
        # The positions first: their [2T - 1, d_model] values are made and freed before the queries, keys and
        # values exist.
        columns = _position_columns(self, pos_enc, pos_emb, frames, blocks)
        q = self.linear_q(query).view(-1, h, d_k)  # [T, H, d_k]
        k = self.linear_k(key).view(-1, h, d_k)
        v = self.linear_v(value).view(-1, h, d_k)
        k_t, v_h = k.permute(1, 2, 0), v.transpose(0, 1)  # [H, d_k, T], [H, T, d_k]
        if blocks > 1:
            # The queries (before their padding, a portable op) depend on the keys' and values' layouts, so that
            # those are made in a delegate of their own, before the first block: otherwise the partitioner puts
            # them in the first block's delegate, which then holds the linears' outputs and their layouts, both,
            # beside the block's products (the memory plan's fullest instruction).
            q = q + _zero_link((k_t, v_h))
        fill_block = None
        if mask is not None:
            fill = masks.fill(mask, q.dtype)  # [1, T, T] broadcasts over heads
            fill_block = (lambda b, c: fill) if blocks == 1 else masks.fill_blocks(mask, q.dtype, blocks)
        out = blocked_attention_context(
            q,
            self.pos_bias_u,
            self.pos_bias_v,
            k_t,
            v_h,
            columns,
            fill_block,
            self.s_d_k,
            blocks,
        )  # [T, H, d_k]
        return self.linear_out(out.contiguous().view(1, -1, h * d_k))

    return forward


def _make_conv_forward(masks: _MaskCache, original):
    def forward(self, x, pad_mask=None, cache=None):
        if cache is not None or self.pointwise_activation != "glu_" or self.norm_type == "layer_norm":
            return original(x, pad_mask=pad_mask, cache=cache)
        pw1, pw2 = self.pointwise_conv1, self.pointwise_conv2
        if isinstance(pw1, GluInputLinear):  # a quantized model (pointwise.py): linears on [B, T, C], no transposes
            x = F.linear(x, pw1.value.weight, pw1.value.bias) * torch.sigmoid(
                F.linear(x, pw1.gate.weight, pw1.gate.bias)
            )
            x = x.transpose(1, 2)
        else:
            x = x.transpose(1, 2)
            x = F.conv1d(x, self._xnn_pw1_w_a, self._xnn_pw1_b_a) * torch.sigmoid(
                F.conv1d(x, self._xnn_pw1_w_g, self._xnn_pw1_b_g)
            )
        if pad_mask is not None:
            keep = masks.keep(pad_mask, x.dtype)  # [1, T] broadcasts as [1, 1, T]
            x = x * keep
        x = self.depthwise_conv(x)
        x = self.batch_norm(x)
        x = self.activation(x)
        if isinstance(pw2, PointwiseLinear):
            return F.linear(x.transpose(1, 2), pw2.weight, pw2.bias)
        return pw2(x).transpose(1, 2)

    return forward


def _time_keep(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[B, 1, T, 1] in ``x``'s dtype: 1 for the first ``lengths[b]`` time steps of x [B, C, T, F], else 0."""
    steps = torch.arange(x.size(2), device=x.device)
    return (steps.unsqueeze(0) < lengths.unsqueeze(1)).to(x.dtype)[:, None, :, None]


def _masked_conv_forward(self, x, lengths):
    """NeMo's ``MaskedConvSequential.forward`` (subsampling.py) with broadcast masks: the input [B, T, F] gets a
    channel axis, every layer sees its input with the frames past the valid length zeroed, the valid length follows
    each strided layer by the convolution output-size formula, and the output is masked once more."""
    from nemo.collections.asr.parts.submodules.subsampling import calculate_conv_output_size

    x = x.unsqueeze(1)
    valid = lengths.clone().float()
    keep = _time_keep(x, valid.long())
    for layer in self:
        x = layer(x * keep)
        if getattr(layer, "stride", (1, 1)) != (1, 1):
            # NeMo's CausalConv2D keeps its own left and right padding.
            padding = (layer._left_padding, layer._right_padding) if hasattr(layer, "_left_padding") else layer.padding
            valid = calculate_conv_output_size(valid, layer.kernel_size[0], layer.stride[0], padding)
            keep = _time_keep(x, valid.long())
    return x * keep, valid.long()


def _projection_for(encoder, stack, max_feature_frames):
    """``encoder.pre_encode.out`` when ``stack`` is the conv stack of a 2-D ``ConvSubsampling`` that NeMo would not
    split at the bound (so the stack may project its chunks, ``subsampling_chunks.projected_subsampling_forward``),
    else None."""
    from nemo.collections.asr.parts.submodules.subsampling import ConvSubsampling

    pre = getattr(encoder, "pre_encode", None)
    if type(pre) is not ConvSubsampling or pre.conv is not stack or not pre.conv2d_subsampling:
        return None
    if splits_at(pre, int(max_feature_frames)):
        return None
    return pre.out


POS_TABLE_MAX_RATIO = 2.0


def _position_table_for(pos_enc, attention, max_ratio: float, front: int = 0):
    """The precomputed positional table for ``attention`` (with ``front`` zero columns first), or None with the
    reason it is not worth one."""
    if pos_enc is None or type(pos_enc).__name__ != "RelPositionalEncoding" or pos_enc.training:
        return None, "the encoder has no RelPositionalEncoding in eval mode"
    weight = attention.linear_pos.weight
    if type(weight) not in (torch.Tensor, torch.nn.Parameter) or not weight.is_floating_point():
        return None, "linear_pos is quantized"
    ratio = pos_enc.pe.size(1) / weight.size(1)  # table rows x d_model against d_model x d_model
    if ratio > max_ratio:
        return None, f"the table would be {ratio:.2f} x linear_pos's weight (limit {max_ratio:g} x)"
    return _position_table(pos_enc, attention, front), None


@contextmanager
def xnnpack_friendly_encoder(
    encoder: torch.nn.Module,
    pos_table_max_ratio: float | None = None,
    report: dict | None = None,
    max_feature_frames: int | None = None,
):
    """While active, ``encoder``'s LayerNorms, feed-forwards, relative-position attentions and conv modules trace into
    XNNPACK-friendly graphs (see the module docstring). Apply it around ``torch.export`` of the encoder only, after
    the model has its final dtype and device and after its relative-position table is fitted to the longest input.
    Eager outputs stay equal to NeMo's (tests check 1e-5).

    Args:
        encoder: NeMo ``ConformerEncoder`` (eval mode).
        pos_table_max_ratio: precompute ``linear_pos`` over the relative-position table when the table has at most
            this many times as many rows as ``linear_pos`` has inputs (its stored size against the weight's);
            None: ``POS_TABLE_MAX_RATIO`` (2).
        report: if given, receives ``positional_tables`` (layers with a precomputed table), ``positional_table_mb``
            (their float bytes), ``positional_table_skipped`` (the reason, when no layer got one),
            ``subsampling_chunks`` (the chunk count: 1 when one pass fits the budget, 0 when the stack cannot be
            chunked or no bound was given), ``subsampling_chunks_skipped`` (why not, for 0) and
            ``attention_query_blocks`` (the query blocks each attention layer is computed in; 1: one pass).
        max_feature_frames: the longest input the export supports, in feature frames. Given, the subsampling's
            conv stack is computed in time chunks (``subsampling_chunks.py``) and the attention in query blocks
            (``attention_blocks.py``), their counts fitted to it; None: both in one pass."""
    from nemo.collections.asr.parts.submodules.conformer_modules import ConformerConvolution, ConformerFeedForward
    from nemo.collections.asr.parts.submodules.multi_head_attention import RelPositionMultiHeadAttention
    from nemo.collections.asr.parts.submodules.subsampling import MaskedConvSequential

    if pos_table_max_ratio is None:
        pos_table_max_ratio = POS_TABLE_MAX_RATIO
    masks = _MaskCache()
    pos_enc = getattr(encoder, "pos_enc", None)
    patched: list[tuple[torch.nn.Module, list[str]]] = []
    tables: list[torch.Tensor] = []
    skipped: str | None = None
    chunks = 0
    chunks_skipped: str | None = "no max_feature_frames given"
    blocks = 1

    def add_buffer(mod, name, tensor, names):
        mod.register_buffer(name, tensor)
        names.append(name)

    try:
        for mod in encoder.modules():
            names: list[str] = []
            if isinstance(mod, torch.nn.LayerNorm) and len(mod.normalized_shape) == 1:
                d = mod.normalized_shape[0]
                ref = mod.weight if mod.weight is not None else next(encoder.parameters())
                add_buffer(mod, "_xnn_avg_row", torch.full((1, d), 1.0 / d, dtype=ref.dtype, device=ref.device), names)
                mod.forward = types.MethodType(_layer_norm_forward, mod)  # type: ignore[method-assign]
            elif type(mod) is MaskedConvSequential:
                assert isinstance(mod, torch.nn.Sequential)
                chunks_skipped = chunkable(mod) if max_feature_frames is not None else chunks_skipped
                if max_feature_frames is not None and chunks_skipped is None:
                    chunks = chunk_count(mod, max_feature_frames, int(getattr(encoder, "_feat_in")))  # noqa: B009
                if chunks > 1:
                    for layer in mod:
                        weight = taps_weight(layer)
                        if weight is not None:
                            layer_names: list[str] = []
                            add_buffer(layer, TAPS_WEIGHT, weight, layer_names)
                            patched.append((layer, layer_names))
                    project = _projection_for(encoder, mod, max_feature_frames)
                    forward = functools.partial(chunked_masked_conv_forward, chunks=chunks, project=project)
                    mod.forward = types.MethodType(forward, mod)  # type: ignore[method-assign]
                    if project is not None:
                        pre = getattr(encoder, "pre_encode")  # noqa: B009
                        pre.forward = types.MethodType(projected_subsampling_forward, pre)
                        patched.append((pre, []))
                else:
                    mod.forward = types.MethodType(_masked_conv_forward, mod)  # type: ignore[method-assign]
            elif type(mod) is RelPositionMultiHeadAttention and not getattr(mod, "use_pytorch_sdpa", False):
                if max_feature_frames is not None:
                    frames = encoder_frames(getattr(encoder, "pre_encode"), max_feature_frames)  # noqa: B009
                    heads, bias = getattr(mod, "h"), getattr(mod, "pos_bias_u")  # noqa: B009
                    blocks = query_block_count(int(heads), frames, bias.element_size())
                table, skipped = _position_table_for(pos_enc, mod, pos_table_max_ratio, front=blocks - 1)
                if table is not None:
                    tables.append(table)
                    add_buffer(mod, "_xnn_pos_table", table, names)
                forward = _make_attention_forward(masks, mod.forward, pos_enc, blocks)
                mod.forward = types.MethodType(forward, mod)
            elif type(mod) is ConformerFeedForward:
                mod.forward = types.MethodType(_feed_forward_forward, mod)
            elif isinstance(mod, ConformerConvolution) and isinstance(mod.pointwise_conv1, GluInputLinear):
                mod.forward = types.MethodType(_make_conv_forward(masks, mod.forward), mod)
            elif isinstance(mod, ConformerConvolution):
                conv = mod.pointwise_conv1
                half = conv.out_channels // 2
                w = conv.weight.detach()
                add_buffer(mod, "_xnn_pw1_w_a", w[:half].clone(), names)
                add_buffer(mod, "_xnn_pw1_w_g", w[half:].clone(), names)
                b = conv.bias.detach() if conv.bias is not None else None
                mod._xnn_pw1_b_a = None if b is None else torch.nn.Parameter(b[:half].clone(), requires_grad=False)
                mod._xnn_pw1_b_g = None if b is None else torch.nn.Parameter(b[half:].clone(), requires_grad=False)
                names += ["_xnn_pw1_b_a", "_xnn_pw1_b_g"]
                mod.forward = types.MethodType(_make_conv_forward(masks, mod.forward), mod)
            else:
                continue
            patched.append((mod, names))
        if report is not None:
            report["positional_tables"] = len(tables)
            report["positional_table_mb"] = sum(t.numel() * t.element_size() for t in tables) / 1e6
            report["positional_table_skipped"] = None if tables else skipped
            report["subsampling_chunks"] = chunks
            report["subsampling_chunks_skipped"] = None if chunks else chunks_skipped
            report["attention_query_blocks"] = blocks
        yield encoder
    finally:
        for mod, names in patched:
            mod.__dict__.pop("forward", None)
            for name in names:
                if name in mod._buffers:
                    del mod._buffers[name]
                elif name in mod._parameters:
                    del mod._parameters[name]
                else:
                    mod.__dict__.pop(name, None)
