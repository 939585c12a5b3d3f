"""``fast_affine_metadata``: torchao's affine quantization ops replayed for their metadata only."""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import torch

# An 8da4w / 8da8w graph carries, per linear, torchao's choose_qparams_affine, quantize_affine and two
# dequantize_affine ops. torchao registers them as CompositeImplicitAutograd Python functions, so every replay
# through fake tensors (XNNPACK's metadata replays, see retraces.py; the fake evaluation of preserved ops in
# run_decompositions) runs their whole arithmetic, 10-30 ops with symbolic sizes, only to learn an output shape:
# 15-20 ms per op, about half the replay time of a quantized encoder. Their outputs' metadata follows from the
# arguments alone, as below.


def _reduction_shape(block_size, size) -> list:
    """The shape of a reduction over torchao's blocks (``keepdim=False``): ``_get_reduction_params``' view of
    ``size`` with its reduced dimensions left out. A dimension split into blocks keeps ``size // block``, one
    with block 1 keeps its size, one that is a single block disappears."""
    from torchao.quantization.quant_primitives import _get_reduction_params

    shape, reduced = _get_reduction_params(block_size, size)
    return [s for i, s in enumerate(shape) if i not in reduced]


def _choose_qparams_metadata(
    input,
    mapping_type,
    block_size,
    target_dtype,
    quant_min=None,
    quant_max=None,
    eps=None,
    scale_dtype=None,
    zero_point_dtype=None,
    keepdim=False,
):
    if keepdim:
        shape = [input.size(i) // block_size[i] for i in range(len(block_size))]
    else:
        shape = _reduction_shape(block_size, input.size())
    if zero_point_dtype is None:
        # torchao: int32 for asymmetric mappings; symmetric ones keep the zero point in the input's dtype.
        zero_point_dtype = torch.int32 if mapping_type == "ASYMMETRIC" else input.dtype
    return (input.new_empty(shape, dtype=scale_dtype or input.dtype), input.new_empty(shape, dtype=zero_point_dtype))


def _quantize_metadata(input, block_size, scale, zero_point, output_dtype, quant_min=None, quant_max=None):
    from torchao.quantization.quant_primitives import _SUB_BYTE_UINT_BOUNDS

    return input.new_empty(input.shape, dtype=torch.uint8 if output_dtype in _SUB_BYTE_UINT_BOUNDS else output_dtype)


def _dequantize_metadata(
    input, block_size, scale, zero_point, input_dtype, quant_min=None, quant_max=None, output_dtype=torch.float32
):
    return input.new_empty(input.shape, dtype=output_dtype)


_AFFINE_METADATA = {
    "choose_qparams_affine": _choose_qparams_metadata,
    "quantize_affine": _quantize_metadata,
    "dequantize_affine": _dequantize_metadata,
}


def _metadata_only(args) -> bool:
    """True when an op call can only be asking for output metadata: every tensor argument is a contiguous
    FakeTensor and no tracing mode (proxy or functionalization) is recording ops, so nothing but the outputs'
    shape, strides and dtype can be observed. While a graph is being traced the op's real decomposition runs."""
    from torch._subclasses.fake_tensor import FakeTensor

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or not all(type(t) is FakeTensor for t in tensors) or not tensors[0].is_contiguous():
        return False
    return all(
        torch._C._get_dispatch_mode(key) is None
        for key in (torch._C._TorchDispatchModeKey.PROXY, torch._C._TorchDispatchModeKey.FUNCTIONAL)
    )


_affine_library: torch.library.Library | None = None
_affine_depth = 0  # how many fast_affine_metadata contexts are open


def _install_affine_kernels() -> None:
    """Register, once per process, a kernel for each op that takes the shortcut while a ``fast_affine_metadata``
    context is open and otherwise calls torchao's own Python implementation (the function torchao registers).

    Once and for good, because the dispatcher cannot take such an override back: after the override's library
    is destroyed, fake-tensor calls (``OpOverload.decompose``) still reach it (torch 2.13). Outside the context
    the kernel is torchao's function, so nothing changes for other callers.
    """
    global _affine_library
    if _affine_library is not None:
        return
    from torch._inductor.decomposition import decompositions

    lib = torch.library.Library("torchao", "IMPL")
    for name, fast in _AFFINE_METADATA.items():
        original = decompositions[getattr(torch.ops.torchao, name).default]  # torchao's implementation

        def kernel(*args, _fast=fast, _original=original, **kwargs):
            if not _affine_depth:
                return _original(*args, **kwargs)
            if _metadata_only(args):
                fast_affine_metadata.stats["metadata"] += 1
                return _fast(*args, **kwargs)
            fast_affine_metadata.stats["computed"] += 1
            return _original(*args, **kwargs)

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
            lib.impl(name, kernel, "CompositeImplicitAutograd")
    _affine_library = lib


@contextmanager
def fast_affine_metadata():
    """Within this context, torchao's ``choose_qparams_affine``, ``quantize_affine`` and ``dequantize_affine`` on
    fake tensors outside any tracing return empty outputs of the shapes and dtypes their arithmetic would give;
    anywhere else (real tensors, tracing, a non-contiguous input) they run torchao's own implementation.

    Mirrors torchao 0.18's ``torchao/quantization/quant_primitives.py`` (shapes from ``_get_reduction_params``).
    tests/test_lowering_speedups.py compares both on every argument pattern the recipes use and requires
    byte-identical 8da4w and 8da8w .pte files. Counts are kept in ``fast_affine_metadata.stats``.
    """
    global _affine_depth
    import torchao.quantization  # noqa: F401  (defines the ops)

    _install_affine_kernels()
    fast_affine_metadata.stats = {"metadata": 0, "computed": 0}
    _affine_depth += 1
    try:
        yield fast_affine_metadata.stats
    finally:
        _affine_depth -= 1


fast_affine_metadata.stats = {"metadata": 0, "computed": 0}
