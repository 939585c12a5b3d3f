"""The subsampling's masked conv stack computed in time chunks, so that its largest intermediate is one chunk's.

Why: XNNPACK plans a delegate's internal values at their upper-bound shapes, and its workspace (one arena shared by
all delegates, sized by the largest) is allocated on the first call whatever the input's length. In one pass the
subsampling's first convolution writes [channels, T/2, F/2] floats: at v3's size (256 channels, 128 mel bands)
65 MB at a 20 s bound and 196 MB at 60 s, the largest value of the whole encoder at the 20 s bound, and it stays
resident for the life of the process. Computed depth-first over time chunks, the stack holds one chunk's values at
a time (XNNPACK frees a value after its last use), and the arena shrinks to what the next-largest delegate needs.

The algorithm: let L be the stack's output frames (a run-time size) and n a chunk count fixed at export. Each chunk
computes ``c = ceil(L / n)`` output frames; chunk ``k`` covers output frames ``[k c, (k + 1) c)``. Walking the layers
backwards, a layer with time kernel ``K``, stride ``s`` and padding ``p`` needs input frames
``[s a - p, s a - p + s (m - 1) + K)`` for output frames ``[a, a + m)``; so every level of chunk ``k`` is a window
of a length that depends on ``c`` only (tight upper bounds for XNNPACK) at a start that is affine in ``k c``. The
input features are zero-padded once (a few frames before, up to ``n c`` output frames' worth after: the features
are small) so that every chunk's window exists; each convolution then runs with no time padding, and the zeros
that NeMo's padding would insert come from the masks instead: before every layer that mixes frames, and on the
output (NeMo's ``MaskedConvSequential.forward`` masks before every layer; the others work frame by frame), the
chunk's values are multiplied by ``keep``, which is 1 at the global frame indices ``0 <= t < valid`` of that level
and 0 elsewhere (frames before the start, which are NeMo's zero padding, and frames at or past the valid length,
which NeMo masks). Every output frame therefore reads the same numbers as
in NeMo's single pass (bit-identical: the same products summed in the same order per output element); the
chunks' outputs are concatenated and cut to L frames.

The first convolution (one input channel) runs as a 1x1 convolution over its taps when the export registers its
weight as [C_out, K_t K_f, 1, 1] (:data:`TAPS_WEIGHT`, :func:`taps_weight`): one strided read gathers each chunk's
taps as K_t K_f input channels. XNNPACK's K_t x K_f convolution keeps an indirection buffer of one pointer per
output position and tap (14.5 MB for this layer at v3's size and a 60 s bound, held for the life of the process);
a 1x1 convolution runs as a plain GEMM and needs none. The products are the same, summed in the GEMM kernel's
order (float rounding). Each chunk's input then depends on the previous chunk's output through a zero-valued term
(:func:`_link`): without it the chunks are independent, and the partitioner put every chunk's first convolution
output into one delegate, all alive at once.

Only stacks of ``Conv2d`` layers with symmetric time padding and no dilation, and element-wise activations, are
chunked (NeMo's ``dw_striding`` and ``striding``); anything else (a ``CausalConv2D``) keeps the single pass, and
:func:`chunkable` says why.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# The budget for the largest value, in bytes, divided among the chunks. At v3's size (256 channels, 128 mel
# bands) the first convolution writes 65.6 MB at a 20 s bound in one pass: 8 chunks, each writing 8.2 MiB (its
# share plus the halo frames it recomputes).
CHUNK_BYTES = 8 * 2**20

_ELEMENTWISE = (torch.nn.ReLU, torch.nn.SiLU, torch.nn.GELU, torch.nn.Identity, torch.nn.Hardtanh, torch.nn.Sigmoid)


def _time_geometry(layer: torch.nn.Module) -> tuple[int, int, int] | None:
    """(kernel, stride, padding) along time for a chunkable layer, (1, 1, 0) for an element-wise one, else None."""
    if type(layer) is torch.nn.Conv2d:
        if layer.dilation[0] != 1 or layer.padding_mode != "zeros" or isinstance(layer.padding, str):
            return None
        return layer.kernel_size[0], layer.stride[0], layer.padding[0]
    if isinstance(layer, _ELEMENTWISE):
        return 1, 1, 0
    return None


def _geometries(stack: torch.nn.Sequential) -> list[tuple[int, int, int]]:
    """:func:`_time_geometry` of every layer of a stack that :func:`chunkable` accepts.

    Raises:
        ValueError: a layer has no known time geometry (the reason :func:`chunkable` gives).
    """
    geometry = [_time_geometry(layer) for layer in stack]
    known = [g for g in geometry if g is not None]
    if len(known) != len(geometry):
        raise ValueError(f"cannot compute this subsampling in chunks: {chunkable(stack)}")
    return known


def _frequency_padding(conv: torch.nn.Conv2d) -> int:
    return int(conv.padding[1])  # a number: _time_geometry refuses string paddings


def chunkable(stack: torch.nn.Sequential) -> str | None:
    """None if :func:`chunked_masked_conv_forward` can compute ``stack`` (a NeMo ``MaskedConvSequential``), else
    the reason it cannot (the first layer it does not know)."""
    for layer in stack:
        if _time_geometry(layer) is None:
            return f"{type(layer).__name__} is not a Conv2d with symmetric time padding or an element-wise activation"
    return None


def chunk_count(
    stack: torch.nn.Sequential, max_input_frames: int, feature_bins: int, chunk_bytes: int = CHUNK_BYTES
) -> int:
    """Chunks for inputs of at most ``max_input_frames`` feature frames of ``feature_bins`` bins: the largest
    value a convolution of ``stack`` writes in one pass over that input ([channels, frames, bins] of its weight's
    dtype), over ``chunk_bytes``, rounded up; 1 (one pass) when it fits."""
    frames, bins, largest = max_input_frames, feature_bins, 0
    for layer, (kernel, stride, pad) in zip(stack, _geometries(stack)):
        frames = (frames + 2 * pad - kernel) // stride + 1
        if type(layer) is torch.nn.Conv2d:
            bins = (bins + 2 * _frequency_padding(layer) - layer.kernel_size[1]) // layer.stride[1] + 1
            largest = max(largest, layer.out_channels * frames * bins * layer.weight.element_size())
    return max(1, math.ceil(largest / chunk_bytes))


def _window_keep(ramp: torch.Tensor, first_outside: torch.Tensor) -> torch.Tensor:
    """[B, 1, len, 1]: 1 where ``ramp[i] < first_outside[b]`` (both integer-valued floats), else 0, in ops that
    XNNPACK runs (a subtraction and a clamp: ``clamp(first_outside - ramp, 0, 1)`` is 1 for a difference >= 1 and
    0 for one <= 0)."""
    return torch.clamp(first_outside - ramp, 0.0, 1.0)


TAPS_WEIGHT = "_xnn_taps_weight"


def taps_weight(conv: torch.nn.Module) -> torch.Tensor | None:
    """For a Conv2d with one input channel, its weight as a 1x1 convolution's over the taps, [C_out, K_t K_f, 1, 1]
    (registered on it as ``TAPS_WEIGHT`` while the encoder is traced, so that XNNPACK sees a constant); None for any
    other layer."""
    if type(conv) is not torch.nn.Conv2d or conv.in_channels != 1 or conv.groups != 1:
        return None
    return conv.weight.detach().reshape(conv.out_channels, -1, 1, 1).clone()


def _conv_no_time_padding(h: torch.Tensor, conv: torch.nn.Conv2d) -> torch.Tensor:
    """``conv`` on h [B, C_in, T, F] with its frequency padding and no time padding: [B, C_out, T', F']. With its
    ``TAPS_WEIGHT`` (one input channel), as a 1x1 convolution over the taps, which one strided read gathers as
    [B, K_t K_f, T', F'] channels: XNNPACK runs a 1x1 convolution as a plain GEMM, with no indirection buffer, and
    keeps it channels last like the convolutions that follow (a GEMM on [positions, taps] rows would need
    transposes to and from channels first around it, each a copy of the layer's output)."""
    pad = _frequency_padding(conv)
    weight = getattr(conv, TAPS_WEIGHT, None)
    if weight is None or conv.in_channels != 1 or conv.groups != 1:
        return F.conv2d(h, conv.weight, conv.bias, conv.stride, (0, pad), 1, conv.groups)
    (kt, kf), (st, sf) = conv.kernel_size, conv.stride
    x = (F.pad(h, (pad, pad)) if pad else h).contiguous()  # [B, 1, T, F + 2 pad]
    batch, _, frames, bins = x.size()
    t_out = (frames - kt) // st + 1
    f_out = (bins - kf) // sf + 1
    taps = x.as_strided(
        (batch, kt, kf, t_out, f_out), (frames * bins, bins, 1, st * bins, sf), x.storage_offset()
    ).reshape(batch, kt * kf, t_out, f_out)
    return F.conv2d(taps, weight, conv.bias)


def _link(previous: torch.Tensor) -> torch.Tensor:
    """[B, 1, 1, 1] zeros computed from ``previous`` (a chunk's output, [B, c, ...]), so that the next chunk's input
    depends on it and the partitioner keeps the chunks in separate, successive delegates."""
    flat = previous.reshape(previous.size(0), 1, previous.size(1), -1)
    return (flat * 0.0).mean(dim=(2, 3), keepdim=True)


def chunked_masked_conv_forward(self, x: torch.Tensor, lengths: torch.Tensor, chunks: int, project=None):
    """NeMo's ``MaskedConvSequential.forward`` (subsampling.py) in ``chunks`` time chunks (module docstring).

    NeMo masks the input of every layer; here only the inputs of layers that mix time frames (time kernel > 1) and
    the output are masked. The others are per frame (activations, 1x1 convolutions), so a frame NeMo zeroes
    before one of them only changes that frame, which the next masking zeroes again: every output value is the
    same.

    Args:
        x: [B, T, F] float features (T feature frames).
        lengths: [B] int64 valid feature frames.
        chunks: the chunk count n, fixed at export (:func:`chunk_count`).
        project: None, or ``ConvSubsampling.out`` (a linear from C F' to d_model): then each chunk's masked frames
            are flattened to [B, c, C F'] and projected before the chunks are joined, as
            :func:`projected_subsampling_forward` needs.

    Returns:
        ([B, C, L, F'] float, [B] int64 valid output frames), the same values as NeMo's forward; with ``project``,
        ([B, L, d_model] float, [B] int64), the values of ``project`` on NeMo's flattened output.
    """
    from nemo.collections.asr.parts.submodules.subsampling import calculate_conv_output_size

    geometry = _geometries(self)
    x = x.unsqueeze(1)
    sizes = [x.size(2)]
    for kernel, stride, pad in geometry:
        sizes.append((sizes[-1] + 2 * pad - kernel) // stride + 1)
    out_frames = sizes[-1]
    per_chunk = (out_frames + chunks - 1) // chunks

    # Each layer input's window as (scale, offset, length): frames [scale * k * c + offset, ... + length) for chunk
    # k, walking back from the chunk's output frames [k c, k c + c).
    windows = [(1, 0, per_chunk)]
    for kernel, stride, pad in reversed(geometry):
        scale, offset, length = windows[0]
        windows.insert(0, (stride * scale, stride * offset - pad, stride * (length - 1) + kernel))

    # Zero frames before the first window and after the last, so that every chunk's input window exists.
    scale0, offset0, length0 = windows[0]
    before = -offset0
    after = scale0 * (chunks - 1) * per_chunk + offset0 + length0 - sizes[0]
    padded = F.pad(x, (0, 0, before, after))

    # Valid frames per layer input, updated after each strided layer exactly as NeMo does it (its padding argument
    # is the layer's (time, frequency) padding pair, summed).
    valid = [lengths.clone().float()]
    for layer in self:
        if getattr(layer, "stride", (1, 1)) != (1, 1):
            valid.append(calculate_conv_output_size(valid[-1], layer.kernel_size[0], layer.stride[0], layer.padding))
        else:
            valid.append(valid[-1])
    valid_frames = [v.long() for v in valid]
    valid_float = [v.to(x.dtype).view(-1, 1, 1, 1) for v in valid_frames]

    # Masks: a frame ramp per masked layer, made once; per chunk only the valid end moves.
    chunk_step = torch.scalar_tensor(per_chunk, dtype=x.dtype, device=x.device)
    ramps: dict = {}

    def keep(level: int, k: int) -> torch.Tensor:
        scale, offset, length = windows[level]
        if level not in ramps:
            ramp = torch.arange(length, dtype=x.dtype, device=x.device).view(1, 1, -1, 1)
            # Chunk 0's window starts before frame 0 (NeMo's zero padding): ramp + offset < 0 there. Constants are
            # Python floats so that the graph holds no integer scalars to convert at run time.
            front = torch.clamp(ramp + float(offset + 1), 0.0, 1.0) if offset < 0 else None
            ramps[level] = (ramp, front)
        ramp, front = ramps[level]
        end = valid_float[level] - float(offset) - float(scale * k) * chunk_step
        mask = _window_keep(ramp, end)
        return mask * front if k == 0 and front is not None else mask

    outputs: list[torch.Tensor] = []
    for k in range(chunks):
        start0 = scale0 * k * per_chunk + offset0
        h = padded[:, :, start0 + before : start0 + before + length0]
        if outputs and any(getattr(layer, TAPS_WEIGHT, None) is not None for layer in self):
            h = h + _link(outputs[-1])
        for level, (layer, (kernel, _, _)) in enumerate(zip(self, geometry)):
            if kernel > 1:
                h = h * keep(level, k)
            h = _conv_no_time_padding(h, layer) if type(layer) is torch.nn.Conv2d else layer(h)
        if project is not None:
            # The output mask of this chunk's frames (NeMo masks the whole output), then the frames flattened as
            # ConvSubsampling flattens them and projected: each output frame of the linear reads only its own frame.
            h = (h * keep(len(geometry), k)).transpose(1, 2)
            outputs.append(project(h.reshape(h.size(0), h.size(1), -1)))  # [B, c, d_model]
            continue
        outputs.append(h.transpose(1, 2))  # [B, c, C, F']: time outermost, so the cut below is contiguous
    y = torch.cat(outputs, dim=1) if chunks > 1 else outputs[0]
    # The first L of the n c frames. With time outermost (batch 1) that slice is contiguous whatever L is; cut along
    # an inner axis, torch.export's contiguity checks would guard on L != n c at the traced length, and the
    # program would refuse the lengths where they are equal.
    y = y[:, :out_frames]
    if project is not None:
        return y, valid_frames[-1]
    final = torch.arange(out_frames, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    keep_out = _window_keep(final, valid_float[-1].view(-1, 1, 1, 1))
    # [B, C, L, F'] as NeMo returns it, a view whose transpose back (ConvSubsampling.forward's) is contiguous.
    return (y * keep_out).transpose(1, 2), valid_frames[-1]


def projected_subsampling_forward(self, x: torch.Tensor, lengths: torch.Tensor):
    """NeMo's ``ConvSubsampling.forward`` (subsampling.py) for 2-D subsampling that NeMo does not split by batch or
    channel at the export's bound (:func:`splits_at`), when its conv stack's forward is
    :func:`chunked_masked_conv_forward` with ``project=self.out``: the stack returns the projected frames, so this
    only calls it.

    Why: joined before the linear, the chunks' outputs ([B, c, C, F'], C F' = 4096 at v3's size) and their
    concatenation are alive at once, two [T, 4096] values (12 MB apiece at a 60 s bound) that sized XNNPACK's
    workspace; projected first, each chunk leaves [B, c, d_model], a quarter of that. (The stack is called as a
    module, not as a function of ``self.conv``: while ``torch.export`` traces, a submodule read as an attribute is a
    proxy subclass of its class, which the stack's exact-type checks would refuse.)

    Args:
        x: [B, T, F] float features (T feature frames); lengths: [B] int64 valid feature frames.

    Returns:
        ([B, L, d_model] float, [B] int64 valid encoder frames), NeMo's values up to the linear's summation order.
    """
    return self.conv(x, lengths)


def splits_at(pre_encode: torch.nn.Module, max_feature_frames: int) -> bool:
    """True when NeMo's ``ConvSubsampling.forward`` would split a [1, max_feature_frames, F] input by batch or channel
    (its ``subsampling_conv_chunking_factor``: always for a factor above 1, past 2**31 elements per convolution for
    1), so that :func:`projected_subsampling_forward`, which never splits, must not stand in for it."""
    factor = getattr(pre_encode, "subsampling_conv_chunking_factor", -1)
    if factor == -1:
        return False
    if factor != 1:
        return True
    channels, stride, bins = (int(getattr(pre_encode, name)) for name in ("_conv_channels", "_stride", "_feat_in"))
    return max_feature_frames * bins > 2**31 / channels * stride * stride
