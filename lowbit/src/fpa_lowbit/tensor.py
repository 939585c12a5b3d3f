"""``UIntxWeight``: the tensor subclass that holds a low-bit quantized linear weight.

It behaves as a ``[N, K]`` weight of the activation dtype, stores ``packed`` (uint8
``[N, K*n/8]``), ``scale`` and ``zero`` (``[N, K/group_size]``), and turns
``torch.nn.functional.linear(x, w, bias)`` into one ``torchao::_linear_fp_act_{n}bit_weight``
call (plus the bias add).  It is a traceable wrapper subclass, so ``torch.export`` sees the op
and the three inner tensors, and a ``state_dict`` with it pickles with ``torch.save`` and loads
back into a freshly quantized model with ``load_state_dict``.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch.utils import _python_dispatch
from torch.utils._python_dispatch import return_and_correct_aliasing

from . import _native, ops
from .packing import check_bitwidth, pack_lowbit, unpack_lowbit
from .qparams import ACT_DTYPES, check_group_size, choose_qparams, dequantize

aten = torch.ops.aten


class UIntxWeight(torch.Tensor):
    """A ``[N, K]`` weight quantized to unsigned ``bitwidth``-bit values per group of ``group_size``.

    Attributes:
        packed: uint8 ``[N, K*bitwidth/8]`` (LSB-first along K).
        scale, zero: ``[N, K/group_size]`` in the weight's (= activation) dtype; ``ŵ = q*scale + zero``.
        bitwidth: 1..8.  group_size: 32, 64, 128 or 256.
    """

    packed: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor

    # torchao's safetensors flattening (torchao/prototype/safetensors/safetensors_support.py,
    # flatten_tensor_state_dict) reads the inner tensors and the plain attributes under these names with getattr,
    # and stores them as ``<module>._weight_<name>`` plus JSON metadata.  The inner tensors go by ``qdata``,
    # ``scale`` and ``zero_point`` (see the properties below) because transformers' TorchAoHfQuantizer
    # (quantizers/quantizer_torchao.py, serialized_names) only collects checkpoint keys ending in one of its fixed
    # suffixes (qdata, scale, zero_point, ...).  Lists, not tuples: torchao concatenates them with lists.
    tensor_data_names: ClassVar[list[str]] = ["qdata", "scale", "zero_point"]
    tensor_attribute_names: ClassVar[list[str]] = ["bitwidth", "group_size", "shape"]

    @staticmethod
    def __new__(cls, packed, scale, zero, bitwidth, group_size, shape):
        return torch.Tensor._make_wrapper_subclass(
            cls, torch.Size(shape), dtype=scale.dtype, device=packed.device, requires_grad=False
        )

    def __init__(self, packed, scale, zero, bitwidth, group_size, shape):
        check_bitwidth(bitwidth)
        check_group_size(group_size)
        n, k = (int(x) for x in shape)
        if tuple(packed.shape) != (n, k * bitwidth // 8) or packed.dtype != torch.uint8:
            raise ValueError(
                f"packed must be uint8 [{n}, {k * bitwidth // 8}], got {packed.dtype} {tuple(packed.shape)}"
            )
        for label, t in (("scale", scale), ("zero", zero)):
            if tuple(t.shape) != (n, k // group_size) or t.dtype != scale.dtype:
                raise ValueError(
                    f"{label} must be {scale.dtype} [{n}, {k // group_size}], got {t.dtype} {tuple(t.shape)}"
                )
        self.packed, self.scale, self.zero = packed, scale, zero
        self.bitwidth, self.group_size = int(bitwidth), int(group_size)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_float(
        cls,
        weight: torch.Tensor,
        bitwidth: int = 4,
        group_size: int = 32,
        algorithm: str = "hqq",
        dtype: torch.dtype | None = None,
    ) -> UIntxWeight:
        """Quantize a float ``[N, K]`` weight.

        Args:
            weight: float tensor ``[N, K]`` with ``K % 8 == 0`` and ``K % group_size == 0``.
            bitwidth: 1..8.  group_size: 32/64/128/256.  algorithm: ``"hqq"`` or ``"min_max"``.
            dtype: dtype of scale/zero (= the activation dtype); default the weight's dtype.

        Raises:
            ValueError: bad bit width, group size, algorithm, dtype or shape; non-finite weights.
        """
        dtype = dtype or weight.dtype
        if dtype not in ACT_DTYPES:
            raise ValueError(f"activation dtype must be float32, float16 or bfloat16, got {dtype}")
        if weight.dim() != 2:
            raise ValueError(f"weight must be 2-D [N, K], got shape {tuple(weight.shape)}")
        if weight.shape[1] % 8 != 0:
            raise ValueError(f"K = {weight.shape[1]} must be a multiple of 8 (rule K % 8 == 0)")
        q, s, z = choose_qparams(weight, bitwidth, group_size, algorithm, dtype)
        return cls(pack_lowbit(q, bitwidth), s, z, bitwidth, group_size, weight.shape)

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The dequantized ``[N, K]`` weight ``q*scale + zero`` in ``dtype`` (default: own dtype)."""
        q = unpack_lowbit(self.packed, self.bitwidth, self.shape[1])
        return dequantize(q, self.scale, self.zero, self.group_size, dtype or self.dtype)

    def __repr__(self):
        return (
            f"UIntxWeight(shape={tuple(self.shape)}, bitwidth={self.bitwidth}, group_size={self.group_size}, "
            f"dtype={self.dtype}, device={self.device})"
        )

    @property
    def qdata(self) -> torch.Tensor:
        """``packed`` under the name torchao's and transformers' serialization use (see ``tensor_data_names``)."""
        return self.packed

    @property
    def zero_point(self) -> torch.Tensor:
        """``zero`` under the name torchao's and transformers' serialization use (see ``tensor_data_names``)."""
        return self.zero

    # -- subclass protocol ----------------------------------------------------------------
    def __tensor_flatten__(self):
        return ["packed", "scale", "zero"], (self.bitwidth, self.group_size, tuple(self.shape))

    @classmethod
    def __tensor_unflatten__(cls, inner, meta, outer_size, outer_stride):
        bitwidth, group_size, shape = meta
        return cls(inner["packed"], inner["scale"], inner["zero"], bitwidth, group_size, shape)

    def __getstate__(self):
        # The CPU call plan (lowbit_linear) holds raw pointers of this process: never pickled or copied.
        return {k: v for k, v in self.__dict__.items() if k != "_cpu_plan"}

    def _apply_inner(self, fn) -> UIntxWeight:
        return UIntxWeight(
            fn(self.packed), fn(self.scale), fn(self.zero), self.bitwidth, self.group_size, tuple(self.shape)
        )

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, w = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if isinstance(w, UIntxWeight) and not isinstance(x, UIntxWeight):
                return lowbit_linear(x, w, bias)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self = args[0]
        if func in (aten.detach.default, aten.alias.default):
            return return_and_correct_aliasing(func, args, kwargs, self._apply_inner(func))
        if func is aten.clone.default:
            return self._apply_inner(lambda t: t.clone())
        if func is aten._to_copy.default:
            device = kwargs.get("device")
            dtype = kwargs.get("dtype")
            if dtype is not None and dtype not in ACT_DTYPES:
                raise ValueError(f"UIntxWeight can only be cast to float32/float16/bfloat16, not {dtype}")
            out = UIntxWeight(
                self.packed.to(device=device) if device is not None else self.packed.clone(),
                self.scale.to(device=device, dtype=dtype),
                self.zero.to(device=device, dtype=dtype),
                self.bitwidth,
                self.group_size,
                tuple(self.shape),
            )
            return out
        if func is aten.copy_.default:
            src = args[1]
            if not isinstance(src, UIntxWeight):
                raise TypeError(
                    "can only copy a UIntxWeight into a UIntxWeight (load a state_dict saved from a "
                    f"model quantized the same way); got {type(src).__name__}"
                )
            if (src.bitwidth, src.group_size, tuple(src.shape)) != (self.bitwidth, self.group_size, tuple(self.shape)):
                raise ValueError(
                    f"UIntxWeight mismatch: destination has bitwidth={self.bitwidth}, group_size={self.group_size}, "
                    f"shape={tuple(self.shape)}; source has bitwidth={src.bitwidth}, group_size={src.group_size}, "
                    f"shape={tuple(src.shape)}"
                )
            self.packed.copy_(src.packed)
            self.scale.copy_(src.scale)
            self.zero.copy_(src.zero)
            return self
        if func is aten._has_compatible_shallow_copy_type.default:
            return False
        raise NotImplementedError(
            f"UIntxWeight does not support {func}; only F.linear, .to(device/dtype), detach, clone and copy_ "
            "are implemented (call .dequantize() for a plain tensor)"
        )


def lowbit_linear(x: torch.Tensor, weight: UIntxWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` through ``torchao::_linear_fp_act_{n}bit_weight``.

    Args:
        x: ``[..., K]`` activations of the weight's dtype (any number of leading dims).
        weight: ``UIntxWeight`` ``[N, K]``.  bias: optional ``[N]``.

    Returns: ``[..., N]`` in x's dtype.

    Raises: ValueError if x's last dim is not K or its dtype differs from the weight's.
    """
    # Shape and dtype from the inner tensors: every attribute read on the subclass itself is a trip through
    # __torch_function__ (about 1 us each, at one activation row a tenth of the product).
    scale = weight.scale
    plan = weight.__dict__.get("_cpu_plan")
    if (
        plan is not None
        and plan.matches(weight.packed, scale, weight.zero, bias)
        and type(x) is torch.Tensor
        and x.dim() == 2
        and x.shape[1] == plan.K
        and x.dtype is torch.float32
        and x.is_contiguous()
        and _direct_cpu_call(x)
    ):
        # The common case of a model's forward on the CPU, checked in a handful of attribute reads: the weight's
        # operands were prepared on its first call (below).
        return _native.linear_planned(x, plan)
    n, k = scale.shape[0], scale.shape[1] * weight.group_size
    if x.shape[-1] != k:
        raise ValueError(f"linear: input has {x.shape[-1]} features but the quantized weight expects K = {k}")
    if x.dtype != scale.dtype:
        raise ValueError(
            f"linear: input dtype {x.dtype} differs from the quantized weight's activation dtype "
            f"{scale.dtype}; convert the model with .to({x.dtype}) or the input"
        )
    lead = x.shape[:-1]
    x2 = x.reshape(-1, k).contiguous()
    if _direct_cpu_call(x2):
        # The weight's operands were checked when it was built and x's just now: call the compiled kernel
        # straight away. Going through the op costs a round trip from the dispatcher back into Python (about
        # 10 us), which at one activation row (token-by-token generation) is as long as the product itself.
        if plan is None or not plan.matches(weight.packed, scale, weight.zero, bias):
            plan = _native.make_plan(weight.packed, scale, weight.zero, weight.bitwidth, weight.group_size, bias)
            if plan is not None:
                weight.__dict__["_cpu_plan"] = plan
        if plan is not None and x2.dtype is torch.float32:
            y = _native.linear_planned(x2, plan)
        else:
            y = _native.linear(x2, weight.packed, weight.group_size, scale, weight.zero, weight.bitwidth, bias=bias)
        return y.reshape(*lead, n)
    y = ops.linear_op(weight.bitwidth)(x2, weight.packed, weight.group_size, weight.scale, weight.zero)
    y = y.reshape(*lead, n)
    if bias is not None:
        y = y + bias
    return y


def _direct_cpu_call(x: torch.Tensor) -> bool:
    """True when F.linear on x may skip the op and call the native CPU kernel directly: a plain CPU tensor (not a
    FakeTensor, FunctionalTensor or other subclass), no compiler, tracer or Python dispatch / function mode active
    (those must see the op in their graph), no autograd history to record (the op has no backward), and the
    compiled kernels serving CPU (:func:`fpa_lowbit.cpu_backend`)."""
    return (
        type(x) is torch.Tensor
        and x.is_cpu
        and not (x.requires_grad and torch.is_grad_enabled())
        and not torch.compiler.is_compiling()
        and not torch._C._is_torch_function_mode_enabled()
        and _python_dispatch._get_current_dispatch_mode() is None
        and ops.cpu_backend_is_native()
    )


torch.serialization.add_safe_globals([UIntxWeight])
