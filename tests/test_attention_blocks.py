"""The relative-position attention in query blocks (export/xnnpack/attention_blocks.py) against NeMo's own forward.

Eager only: the lowered encoder with blocks is compared with NeMo in test_xnnpack_partitions.py (its 60 s bound gives
the tiny model more than one block).
"""

from __future__ import annotations

import math

import pytest
import torch

from parakeet_executorch.export.xnnpack.attention_blocks import (
    BLOCK_BYTES,
    encoder_frames,
    query_block_count,
    shift_block,
)


def test_block_shift_reads_nemos_rows():
    """Each block's shifted rows, computed from only the columns the block reads, are NeMo's ``rel_shift`` rows
    followed by its ``[..., :T]`` (the padded zero column is never read)."""
    from nemo.collections.asr.parts.submodules.multi_head_attention import RelPositionMultiHeadAttention

    heads = 2
    for frames in (1, 2, 5, 17, 40):
        x = torch.randn(1, heads, frames, 2 * frames - 1) + 3.0  # no exact zeros
        ref = RelPositionMultiHeadAttention.rel_shift(None, x)[0, :, :, :frames]
        for c in range(1, frames + 1):
            for i0 in range(0, frames - c + 1):
                cols = x[0, :, i0 : i0 + c, frames - i0 - c : 2 * frames - 1 - i0]
                ours = shift_block(cols, frames)
                assert torch.equal(ours, ref[:, i0 : i0 + c]), (frames, c, i0)
                assert bool((ours != 0).all())


@pytest.mark.parametrize("blocks", [1, 2, 3, 7])
def test_blocked_attention_matches_nemo(nemo_model, blocks):
    """One attention layer of the tiny model, NeMo's forward against the rewrite at every block count, with and
    without padded frames: the valid queries' rows agree to float rounding, at lengths below and above the
    block count (blocks of one query, and padding rows in the last block)."""
    from parakeet_executorch.export.xnnpack import encoder_forwards

    encoder = nemo_model.encoder
    attention = encoder.layers[0].self_attn
    d_model = attention.linear_q.in_features
    torch.manual_seed(blocks)
    masks = encoder_forwards._MaskCache()
    forward = encoder_forwards._make_attention_forward(masks, attention.forward, encoder.pos_enc, blocks)
    for frames in (1, 2, blocks + 1, 29):
        x = torch.randn(1, frames, d_model)
        for valid in sorted({frames, max(1, frames - 3)}):
            pad = torch.arange(frames)[None] >= valid
            att_mask = pad[:, None, :] | pad[:, :, None]  # [1, T, T], as ConformerEncoder builds it (no context)
            with torch.no_grad():
                x_pos, pos_emb = encoder.pos_enc(x)
                ref = attention(x_pos, x_pos, x_pos, att_mask, pos_emb=pos_emb)
                ours = forward(attention, x_pos, x_pos, x_pos, att_mask, pos_emb=pos_emb)
            assert ours.shape == ref.shape
            diff = (ours[:, :valid] - ref[:, :valid]).abs().max().item()
            assert diff < 1e-5, (blocks, frames, valid, diff)
            assert bool(torch.isfinite(ours).all())


def test_block_count_fits_the_budget():
    """The count is the fewest blocks whose unshifted product ([heads, c, T + c - 1] floats) fits the budget: at
    v3's size (8 heads) and a 60 s bound (751 encoder frames) more than one, at 20 s (251) one."""

    def block_bytes(heads: int, frames: int, k: int) -> int:
        c = math.ceil(frames / k)
        return heads * c * (frames + c - 1) * 4

    for heads, frames in ((8, 751), (8, 251), (4, 751), (8, 7501), (1, 3)):
        n = query_block_count(heads, frames, 4)
        assert block_bytes(heads, frames, n) <= BLOCK_BYTES
        assert n == 1 or block_bytes(heads, frames, n - 1) > BLOCK_BYTES
    assert query_block_count(8, 751, 4) > 1
    assert query_block_count(8, 251, 4) == 1


def test_encoder_frames_follow_the_subsampling(nemo_model):
    """``encoder_frames`` is the length NeMo's subsampling gives, at lengths around its stride."""
    pre = nemo_model.encoder.pre_encode
    for feature_frames in (1, 7, 8, 9, 100, 6001):
        with torch.no_grad():
            _, length = pre(torch.zeros(1, feature_frames, nemo_model.encoder._feat_in), torch.tensor([feature_frames]))
        assert encoder_frames(pre, feature_frames) == int(length.item())
