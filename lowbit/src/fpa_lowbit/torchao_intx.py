"""The same low-bit weights in torchao's ``IntxUnpackedToInt8Tensor``, the layout ExecuTorch's MLX backend fuses.

ExecuTorch's MLX partitioner turns ``torchao.dequantize_affine`` (int8 data, block ``[1, g]``) followed by
``aten.linear`` into MLX's affine quantized matmul, ``ŵ = S·Q + B`` per group with ``Q`` unsigned: fpa4w's own
arithmetic (``ŵ = q·S + Z``). torchao's form is ``ŵ = s·(q_signed − z)`` with ``q_signed ∈ [−2**(n−1),
2**(n−1) − 1]``, so the same weight is ``q_signed = q − 2**(n−1)``, ``s = S`` and the float zero point
``z = −(2**(n−1) + Z / S)`` (``S > 0`` always, clause 6 of the format). The packed bits are not reused: MLX packs
its own at lowering. Mirrors ``torchao.quantization.quantize_.workflows.intx.IntxUnpackedToInt8Tensor``.
"""

from __future__ import annotations

import torch

from .packing import unpack_lowbit
from .tensor import UIntxWeight

# MLX's affine quantized matmul takes these widths (executorch.backends.mlx.builder.op_helpers.parse_dequant_node).
MLX_BITWIDTHS = (2, 4, 5, 6, 8)


def to_intx_unpacked(weight: UIntxWeight):
    """``weight`` as a torchao ``IntxUnpackedToInt8Tensor`` that dequantizes to the same values.

    Args:
        weight: a ``UIntxWeight`` ``[N, K]`` of ``bitwidth`` n, ``group_size`` g, scale/zero ``[N, K/g]``.
    Returns:
        ``IntxUnpackedToInt8Tensor`` with int8 data ``[N, K]`` in ``[−2**(n−1), 2**(n−1) − 1]``, block
        ``(1, g)``, scale ``S`` and float zero point ``−(2**(n−1) + Z/S)`` in the weight's dtype; its
        ``dequantize()`` equals ``weight.dequantize()`` to float rounding.
    Raises:
        ValueError: a bit width MLX has no kernel for (1, 3 or 7 bits).
    """
    from torchao.quantization.quantize_.workflows.intx.intx_unpacked_to_int8_tensor import (
        IntxUnpackedToInt8Tensor,
    )

    if weight.bitwidth not in MLX_BITWIDTHS:
        raise ValueError(
            f"{weight.bitwidth}-bit weights have no MLX kernel (MLX takes {MLX_BITWIDTHS}); quantize with one of those"
        )
    offset = 1 << (weight.bitwidth - 1)
    q = unpack_lowbit(weight.packed, weight.bitwidth, weight.shape[1]).to(torch.int16) - offset
    scale = weight.scale
    # The zero point is computed in float32 and stored in the weight's dtype, as torchao stores float zero points.
    zero_point = (-(offset + weight.zero.float() / scale.float())).to(scale.dtype)
    return IntxUnpackedToInt8Tensor(
        qdata=q.to(torch.int8),
        scale=scale,
        zero_point=zero_point,
        target_dtype=getattr(torch, f"int{weight.bitwidth}"),
        block_size=(1, weight.group_size),
        dtype=weight.dtype,
        activation_quantization=None,
    )


def convert_linears_to_intx_unpacked(root: torch.nn.Module) -> list[str]:
    """Replace every ``nn.Linear`` weight of ``root`` that is a ``UIntxWeight`` by :func:`to_intx_unpacked`'s.

    Returns the names of the converted linears. Raises ValueError as :func:`to_intx_unpacked` does, naming the
    layer.
    """
    converted = []
    for name, module in root.named_modules():
        if isinstance(module, torch.nn.Linear) and isinstance(module.weight, UIntxWeight):
            try:
                module.weight = torch.nn.Parameter(to_intx_unpacked(module.weight), requires_grad=False)
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
            converted.append(name)
    return converted
