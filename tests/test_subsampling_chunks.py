"""The subsampling's conv stack in time chunks (export/xnnpack/subsampling_chunks.py): NeMo's numbers exactly, and
chunked only as far as the largest convolution output needs."""

from __future__ import annotations

import math

import pytest
import torch


def _conv_outputs_bytes(stack, frames: int, bins: int) -> list[int]:
    """Bytes of every Conv2d output of ``stack`` (NeMo's own forward) on a zero input of ``frames`` x ``bins``."""
    sizes = []
    hooks = [
        layer.register_forward_hook(lambda m, i, o: sizes.append(o.numel() * o.element_size()))
        for layer in stack
        if isinstance(layer, torch.nn.Conv2d)
    ]
    try:
        with torch.no_grad():
            stack(torch.zeros(1, frames, bins), torch.tensor([frames]))
    finally:
        for h in hooks:
            h.remove()
    return sizes


def _two_rows(frames: int, bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[2, frames, bins] random features and their [2] lengths: the second row 6 frames shorter (at least 1), its
    padding 3.0 rather than zero, so that a frame read from outside the valid window would show."""
    x = torch.randn(2, frames, bins)
    lengths = torch.tensor([frames, max(1, frames - 6)])
    x[1, int(lengths[1]) :] = 3.0
    return x, lengths


@pytest.mark.parametrize("chunks", [1, 2, 3, 5, 8])
def test_chunks_give_nemos_exact_numbers(nemo_model, chunks):
    """Bit-identical outputs and valid lengths against NeMo's ``MaskedConvSequential.forward`` for every length from
    one frame up to past the chunks' halos, with two rows of different valid lengths whose padding is not zero (so
    a frame read from outside the valid window would show)."""
    from parakeet_executorch.export.xnnpack.subsampling_chunks import chunked_masked_conv_forward

    stack = nemo_model.encoder.pre_encode.conv
    bins = nemo_model.encoder._feat_in
    torch.manual_seed(chunks)
    for frames in (1, 2, 3, 7, 8, 9, 16, 17, 40, 101, 333):
        x, lengths = _two_rows(frames, bins)
        with torch.no_grad():
            ref, ref_len = stack(x, lengths)
            out, out_len = chunked_masked_conv_forward(stack, x, lengths, chunks=chunks)
        assert out.shape == ref.shape, (frames, chunks)
        assert torch.equal(out_len, ref_len), (frames, chunks)
        assert torch.equal(out, ref), (frames, chunks, (out - ref).abs().max().item())


@pytest.mark.parametrize("chunks", [2, 5])
def test_chunks_with_the_first_convolution_over_its_taps_give_nemos_numbers(nemo_model, chunks):
    """With the first convolution's taps weight registered (as the export does: a 1x1 convolution over its taps),
    the chunked stack gives NeMo's outputs to float rounding (its GEMM sums the taps in its own order) and the same
    lengths."""
    from parakeet_executorch.export.xnnpack.subsampling_chunks import (
        TAPS_WEIGHT,
        chunked_masked_conv_forward,
        taps_weight,
    )

    stack = nemo_model.encoder.pre_encode.conv
    bins = nemo_model.encoder._feat_in
    first = stack[0]
    weight = taps_weight(first)
    assert weight is not None and all(taps_weight(layer) is None for layer in list(stack)[1:])
    first.register_buffer(TAPS_WEIGHT, weight)
    try:
        torch.manual_seed(chunks)
        for frames in (1, 9, 40, 333):
            x, lengths = _two_rows(frames, bins)
            with torch.no_grad():
                ref, ref_len = stack(x, lengths)
                out, out_len = chunked_masked_conv_forward(stack, x, lengths, chunks=chunks)
            assert torch.equal(out_len, ref_len), (frames, chunks)
            torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    finally:
        del first._buffers[TAPS_WEIGHT]


def test_chunk_count_follows_the_largest_convolution_output(nemo_model):
    """One pass while every convolution output fits the byte budget; past it, enough chunks that the largest one
    (measured on NeMo's own forward) is split into pieces of at most the budget."""
    from parakeet_executorch.export.xnnpack.subsampling_chunks import chunk_count

    stack = nemo_model.encoder.pre_encode.conv
    bins = nemo_model.encoder._feat_in
    for frames in (101, 2001, 6001):
        largest = max(_conv_outputs_bytes(stack, frames, bins))
        for budget in (largest, largest // 2, largest // 7 + 1, 2**20):
            expected = max(1, math.ceil(largest / budget))
            assert chunk_count(stack, frames, bins, budget) == expected, (frames, budget)


def test_stacks_it_cannot_chunk_keep_one_pass(nemo_model):
    """A layer of unknown time geometry (NeMo's causal convolution here) is named, and the export keeps the single
    pass for it."""
    import copy

    from nemo.collections.asr.parts.submodules.causal_convs import CausalConv2D

    from parakeet_executorch.export.xnnpack.encoder_forwards import xnnpack_friendly_encoder
    from parakeet_executorch.export.xnnpack.subsampling_chunks import chunkable

    encoder = copy.deepcopy(nemo_model.encoder)
    assert chunkable(encoder.pre_encode.conv) is None
    first = encoder.pre_encode.conv[0]
    encoder.pre_encode.conv[0] = CausalConv2D(
        first.in_channels, first.out_channels, first.kernel_size[0], stride=first.stride[0], padding=None
    )
    reason = chunkable(encoder.pre_encode.conv)
    assert reason is not None and "CausalConv2D" in reason
    report: dict = {}
    with xnnpack_friendly_encoder(encoder, report=report, max_feature_frames=6001):
        pass
    assert report["subsampling_chunks"] == 0
    assert "CausalConv2D" in report["subsampling_chunks_skipped"]


@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_projected_chunks_give_nemos_subsampling(nemo_model, chunks):
    """The stack in chunks with ``ConvSubsampling.out`` applied to each chunk's frames gives NeMo's
    ``ConvSubsampling.forward``: the valid lengths exactly, the values to the linear's float rounding, with a padded
    row whose padding is not zero."""
    from parakeet_executorch.export.xnnpack.subsampling_chunks import chunked_masked_conv_forward

    pre = nemo_model.encoder.pre_encode
    bins = nemo_model.encoder._feat_in
    torch.manual_seed(chunks)
    for frames in (1, 9, 17, 101, 333):
        x = torch.randn(2, frames, bins)
        lengths = torch.tensor([frames, max(1, frames - 6)])
        x[1, int(lengths[1]) :] = 3.0
        with torch.no_grad():
            ref, ref_len = pre(x, lengths)
            out, out_len = chunked_masked_conv_forward(pre.conv, x, lengths, chunks=chunks, project=pre.out)
        assert out.shape == ref.shape, (frames, chunks)
        assert torch.equal(out_len, ref_len), (frames, chunks)
        assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5), (frames, chunks, (out - ref).abs().max().item())


def test_export_projects_the_chunks_unless_nemo_would_split(nemo_model):
    """Under ``xnnpack_friendly_encoder`` with a bound that needs chunks, ``pre_encode`` projects each chunk and still
    returns NeMo's output; it is restored on exit; and a subsampling that NeMo splits by batch or channel
    (``subsampling_conv_chunking_factor`` above 1) keeps NeMo's forward."""
    import copy

    from parakeet_executorch.export.xnnpack.encoder_forwards import xnnpack_friendly_encoder

    encoder = copy.deepcopy(nemo_model.encoder)
    x = torch.randn(1, 120, encoder._feat_in)
    lengths = torch.tensor([120])
    with torch.no_grad():
        ref, ref_len = encoder.pre_encode(x, lengths)
    report: dict = {}
    with xnnpack_friendly_encoder(encoder, report=report, max_feature_frames=6001), torch.no_grad():
        assert report["subsampling_chunks"] > 1
        assert "forward" in encoder.pre_encode.__dict__
        out, out_len = encoder.pre_encode(x, lengths)
    assert "forward" not in encoder.pre_encode.__dict__
    assert torch.equal(out_len, ref_len)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5)

    encoder.pre_encode.subsampling_conv_chunking_factor = 2
    with xnnpack_friendly_encoder(encoder, max_feature_frames=6001):
        assert "forward" not in encoder.pre_encode.__dict__
