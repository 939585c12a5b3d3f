"""The conformer convolution module's 1x1 convolutions as linears, so that the recipes quantize them too.

NeMo's ``ConformerConvolution`` holds ``pointwise_conv1`` (d -> 2d, split by GLU into value and gate) and
``pointwise_conv2`` (d -> d) as kernel-size-1 ``Conv1d`` layers. torchao's configs quantize ``nn.Linear`` only,
so these stayed float under every recipe: 3 of a FastConformer layer's 25 d x d weight blocks, 302 MB of the
762 MB fpa4w .pte of the full-size model, and a fifth of the 8da4w encoder's time on XNNPACK (its ETDump profile).

A 1x1 convolution over [B, C, T] is a linear over the channel axis with the same weight values ([out, in, 1] ->
[out, in]). ``convert_pointwise_convs`` swaps the modules before a recipe with ``quantizes_pointwise``
(``recipe_registry.py``; every quantizing recipe has it) quantizes the model; the float model computes the same
function (up to the summation order of the GEMM), and the quantized model is what the .pte is compared against.
``pointwise_conv1`` becomes two linears, value rows then gate rows, so that no run-time-length tensor has to be
sliced along its channels for GLU (XNNPACK's slice is static). Each output row of a linear depends only on its own
weight row, and every recipe quantizes row by row, so the halves quantize exactly as the whole would.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class PointwiseLinear(torch.nn.Linear):
    """A kernel-size-1 ``Conv1d`` as a linear over channels: [B, C_in, T] -> [B, C_out, T] (the conv's layout)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.transpose(1, 2), self.weight, self.bias).transpose(1, 2)


class GluInputLinear(torch.nn.Module):
    """``pointwise_conv1`` before GLU as two ``PointwiseLinear`` (``value``: the first half of the output channels,
    ``gate``: the second). ``forward`` returns both halves concatenated over channels, [B, 2 C_out, T], as the
    convolution did, so NeMo's ``glu(x, dim=1)`` after it is unchanged."""

    def __init__(self, value: PointwiseLinear, gate: PointwiseLinear):
        super().__init__()
        self.value = value
        self.gate = gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.value(x), self.gate(x)], dim=1)


def is_pointwise(conv) -> bool:
    """Whether ``conv`` is a plain 1x1 ``Conv1d`` (stride 1, no padding, dilation 1, one group): a linear over
    channels, which ``convert_pointwise_convs`` can replace."""
    return (
        type(conv) is torch.nn.Conv1d
        and conv.kernel_size == (1,)
        and conv.stride == (1,)
        and conv.padding in ((0,), "valid")
        and conv.dilation == (1,)
        and conv.groups == 1
    )


def _linear_from(conv: torch.nn.Conv1d, rows: slice) -> PointwiseLinear:
    weight = conv.weight.detach()[rows, :, 0]
    layer = PointwiseLinear(
        weight.shape[1], weight.shape[0], bias=conv.bias is not None, device=weight.device, dtype=weight.dtype
    )
    with torch.no_grad():
        layer.weight.copy_(weight)
        if conv.bias is not None:
            layer.bias.copy_(conv.bias.detach()[rows])
    return layer.train(conv.training)


def convert_pointwise_convs(root: torch.nn.Module, in_part) -> list[str]:
    """Replace, in place, the 1x1 ``pointwise_conv1`` / ``pointwise_conv2`` of every NeMo ``ConformerConvolution``
    under ``root`` whose name ``in_part(name)`` accepts. Returns the names of the new linears (``...value``,
    ``...gate``, ``...pointwise_conv2``). Modules that are not plain 1x1 ``Conv1d`` are left alone."""
    from nemo.collections.asr.parts.submodules.conformer_modules import ConformerConvolution

    converted = []
    for name, module in list(root.named_modules()):
        if not isinstance(module, ConformerConvolution) or not in_part(name):
            continue
        pw1 = module.pointwise_conv1
        if is_pointwise(pw1) and module.pointwise_activation == "glu_" and pw1.out_channels % 2 == 0:
            half = pw1.out_channels // 2
            module.pointwise_conv1 = GluInputLinear(
                _linear_from(pw1, slice(0, half)), _linear_from(pw1, slice(half, None))
            )
            converted += [f"{name}.pointwise_conv1.value", f"{name}.pointwise_conv1.gate"]
        if is_pointwise(module.pointwise_conv2):
            module.pointwise_conv2 = _linear_from(module.pointwise_conv2, slice(None))
            converted.append(f"{name}.pointwise_conv2")
    return converted
