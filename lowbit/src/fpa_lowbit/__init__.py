"""Low-bit weight-only quantization with float activations (fpa4w and 1–8 bit), on every backend.

Format specification
====================

Each clause below has a test in the repository's ``tests/test_lowbit*.py`` (named ``test_spec_<clause>``).

1. **Quantization** (``quant``).  A weight ``W`` of shape ``[N, K]`` is quantized per group of
   ``group_size`` consecutive elements along K, ``group_size`` ∈ {32, 64, 128, 256}, to unsigned
   n-bit integers ``q`` ∈ ``[0, 2**n − 1]``, n ∈ 1..8.

2. **Dequantization** (``dequant``).  ``ŵ[r, k] = q[r, k] · S[r, k // group_size] + Z[r, k // group_size]``
   with ``S`` and ``Z`` of shape ``[N, K / group_size]`` in the activation dtype
   (float32, float16 or bfloat16).  ``Z`` is a float offset (not an integer zero point).

3. **Packing** (``packing``).  ``q`` is packed as ``uint8 [N, K · n / 8]``, row-major along K,
   least significant bits first: value ``i`` of a row occupies bits ``[i·n, (i+1)·n)`` of the
   row's bit stream and byte ``b`` holds bits ``[8b, 8b + 8)``.  So 4-bit byte ``j`` is
   ``q[2j] | q[2j+1] << 4``; 2-bit packs 4 values per byte, 1-bit 8; 6-bit packs 4 values into
   3 bytes and 3/5/7-bit pack 8 values into n bytes, crossing byte boundaries; 8-bit is q.
   This is torchao's ``_pack_weight_{n}bit`` layout (requires ``K % 8 == 0``).

4. **Operator** (``op``).  ``torchao::_linear_fp_act_{n}bit_weight(Tensor A, Tensor B, int group_size,
   Tensor S, Tensor Z) -> Tensor`` computes ``A @ ŵᵀ`` for ``A [M, K]`` (contiguous, dtype of S/Z)
   and returns ``[M, N]`` in A's dtype; ``.out(..., *, Tensor(a!) out)`` writes into ``out``.
   These are torchao's names and schemas, so an exported graph runs on ExecuTorch's Metal
   runtime natively and on CPU through this package's ExecuTorch kernel library
   (:func:`load_executorch_kernels`).

5. **Shape rules** (``shape_rules``).  ``K % 8 == 0`` and ``K % group_size == 0`` always;
   on Metal additionally ``N % 4 == 0`` when ``M > 1``.  :func:`check_linear_shape` reports the
   rule a layer breaks, naming the layer.

6. **Parameter choice** (``qparams``).  ``"min_max"``: ``S = (max − min) / (2**n − 1)``, ``Z = min``
   per group; ``"hqq"`` (default): min-max scale with the offset refined by a half-quadratic
   lp-norm solver.  ``q = clamp(round((w − Z) / S), 0, 2**n − 1)`` using the stored (dtype-rounded)
   S and Z.  A group whose weights are all equal gets ``S = 1``, ``Z = w``, ``q = 0``: finite and
   exact (the upstream min-max path divides by zero there).

Usage
=====

>>> from torchao.quantization import quantize_
>>> from fpa_lowbit import UIntxWeightOnlyConfig
>>> quantize_(model, UIntxWeightOnlyConfig(bitwidth=4, group_size=32))   # doctest: +SKIP

Importing this package registers the ops with PyTorch (see :mod:`fpa_lowbit.ops`); on CPU they run the compiled
kernels shipped in the wheel (:func:`cpu_backend`).  :func:`load_executorch_kernels` registers the same kernels
with ExecuTorch's Python runtime, for a .pte that calls them.
For ExecuTorch's MLX backend, :mod:`fpa_lowbit.torchao_intx` gives the same weights as torchao's
``IntxUnpackedToInt8Tensor`` (``dequantize_affine`` + ``linear``, which MLX fuses into its affine quantized matmul).
"""

from __future__ import annotations

import torch

from .config import FpaUIntxWeightOnlyConfig, UIntxWeightOnlyConfig, check_linear_shape, lowbit_filter_fn
from .ops import check_linear_args, cpu_backend, linear_op, linear_op_name, register
from .packing import SUPPORTED_BITWIDTHS, check_bitwidth, pack_lowbit, unpack_lowbit
from .qparams import GROUP_SIZES, choose_qparams, choose_qparams_hqq, choose_qparams_min_max, dequantize
from .serialization import flatten_state_dict, unflatten_state_dict
from .tensor import UIntxWeight, lowbit_linear
from .transformers_support import _register_config_module, register_torchao_serialization

register()
# torchao's config_from_dict (hence transformers' from_pretrained) finds FpaUIntxWeightOnlyConfig only in modules it
# allow-lists; see fpa_lowbit.transformers_support.  Cheap: imports neither transformers nor torchao's safetensors.
_register_config_module()


def load_executorch_kernels():
    """Register the ``torchao::_linear_fp_act_{n}bit_weight.out`` kernels with ExecuTorch's Python runtime in this
    process (idempotent); returns the library's path.  See :func:`fpa_lowbit.executorch_kernels.load`."""
    from . import executorch_kernels

    return executorch_kernels.load()


def dequantize_packed(
    B: torch.Tensor, S: torch.Tensor, Z: torch.Tensor, bitwidth: int, group_size: int, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Dequantize a packed weight: uint8 ``B [N, K*n/8]``, ``S``/``Z [N, K/g]`` → ``[N, K]`` in ``dtype``
    (default S's dtype).  Materializes the whole float weight (reference / baseline use)."""
    q = unpack_lowbit(B, bitwidth)
    return dequantize(q, S, Z, group_size, dtype or S.dtype)


__all__ = [
    "FpaUIntxWeightOnlyConfig",
    "GROUP_SIZES",
    "SUPPORTED_BITWIDTHS",
    "UIntxWeight",
    "UIntxWeightOnlyConfig",
    "check_bitwidth",
    "check_linear_args",
    "check_linear_shape",
    "cpu_backend",
    "choose_qparams",
    "choose_qparams_hqq",
    "choose_qparams_min_max",
    "dequantize",
    "dequantize_packed",
    "flatten_state_dict",
    "linear_op",
    "linear_op_name",
    "load_executorch_kernels",
    "lowbit_filter_fn",
    "lowbit_linear",
    "pack_lowbit",
    "register",
    "register_torchao_serialization",
    "unflatten_state_dict",
    "unpack_lowbit",
]
