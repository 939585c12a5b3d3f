"""``FpaUIntxWeightOnlyConfig`` (alias ``UIntxWeightOnlyConfig``) for ``torchao.quantization.quantize_`` and the
shape rules."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torchao.core.config import AOBaseConfig
from torchao.quantization.transform_module import register_quantize_module_handler

from .packing import SUPPORTED_BITWIDTHS
from .qparams import GROUP_SIZES, normalize_algorithm
from .tensor import UIntxWeight


def _is_int(value) -> bool:
    """An integer (Python's or NumPy's), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_linear_shape(name: str, weight_shape, group_size: int, bitwidth: int, multi_row: bool = True) -> str | None:
    """Return why a linear layer cannot be quantized, or ``None`` if it can.

    Args:
        name: layer name used in the message (e.g. its fully qualified module name).
        weight_shape: ``(N, K)`` = (out_features, in_features).
        group_size: 32, 64, 128 or 256.  bitwidth: 1..8.
        multi_row: also apply Metal's rule for inputs with more than one row
            (``N % 4 == 0 when M > 1``); pass False for M = 1 only (e.g. decoder steps).

    Rules (each message names the layer and the rule): supported bit width and group size;
    2-D weight; ``K % 8 == 0``; ``K % group_size == 0``; ``N % 4 == 0`` when ``multi_row``.
    """
    if bitwidth not in SUPPORTED_BITWIDTHS:
        return f"{name}: unsupported bit width {bitwidth} (supported: {list(SUPPORTED_BITWIDTHS)})"
    if group_size not in GROUP_SIZES:
        return f"{name}: unsupported group_size {group_size} (supported: {list(GROUP_SIZES)})"
    shape = tuple(int(s) for s in weight_shape)
    if len(shape) != 2:
        return f"{name}: weight must be 2-D [N, K], got shape {shape}"
    n, k = shape
    if k % 8 != 0:
        return f"{name}: K = {k} breaks rule K % 8 == 0"
    if k % group_size != 0:
        return f"{name}: K = {k} breaks rule K % group_size == 0 (group_size = {group_size})"
    if multi_row and n % 4 != 0:
        return f"{name}: N = {n} breaks rule N % 4 == 0 when M > 1 (Metal)"
    return None


@dataclass
class FpaUIntxWeightOnlyConfig(AOBaseConfig):
    """Weight-only n-bit quantization with float activations (fpa{n}w) for ``quantize_``.

    Same argument names as torchao's experimental MPS config; works on every backend after
    ``pip install`` (no build step).  Each quantized ``nn.Linear`` keeps its bias and gets a
    :class:`~fpa_lowbit.UIntxWeight` weight.

    ``fpa_lowbit.UIntxWeightOnlyConfig`` is the same class under its first name.  The class itself carries
    the ``Fpa`` prefix because torchao serializes a config by class name alone (``torchao.core.config
    .config_to_dict``) and resolves it in its allow-listed modules, where
    ``torchao.prototype.quantization.UIntxWeightOnlyConfig`` (gemlite, ``bit_width=``) already takes the
    short name.  Constructing one registers the package with torchao's serialization
    (:func:`fpa_lowbit.transformers_support.register_torchao_serialization`), which transformers'
    ``save_pretrained`` / ``from_pretrained`` use.

    Args:
        bitwidth: 1..8.  group_size: 32, 64, 128 or 256.
        uintx_choose_qparams_algorithm: ``"hqq"`` (default) or ``"min_max"`` (alias ``"minmax"``;
            torchao's ``UIntxChooseQParamsAlgorithm`` values are accepted too).
        check_metal_rows: also enforce Metal's ``N % 4 == 0`` rule (for multi-row inputs).

    Raises:
        ValueError at construction naming an unsupported bit width, group size or algorithm;
        at ``quantize_`` time naming the layer and rule it breaks (use :func:`lowbit_filter_fn`
        to skip such layers instead).
    """

    bitwidth: int = 4
    group_size: int = 32
    uintx_choose_qparams_algorithm: str = "hqq"
    check_metal_rows: bool = False

    def __post_init__(self):
        # An int, not merely a value equal to one: 4.0 == 4, but the kernels, the op names and the serialized
        # config take ints, and a float would fail later with a message that lists 4 as supported.
        if not _is_int(self.bitwidth) or self.bitwidth not in SUPPORTED_BITWIDTHS:
            raise ValueError(
                f"{type(self).__name__}: unsupported bitwidth {self.bitwidth!r}; "
                f"supported bit widths are the ints {list(SUPPORTED_BITWIDTHS)}"
            )
        if not _is_int(self.group_size) or self.group_size not in GROUP_SIZES:
            raise ValueError(
                f"{type(self).__name__}: unsupported group_size {self.group_size!r}; "
                f"supported group sizes are the ints {list(GROUP_SIZES)}"
            )
        self.bitwidth, self.group_size = int(self.bitwidth), int(self.group_size)  # a NumPy integer -> int
        try:
            self.uintx_choose_qparams_algorithm = normalize_algorithm(self.uintx_choose_qparams_algorithm)
        except ValueError as exc:
            raise ValueError(f"{type(self).__name__}: {exc}") from None
        # Every path to a saved or loaded model builds a config first (the user for TorchAoConfig, torchao's
        # config_from_dict in from_pretrained), so registering here covers them without importing torchao's
        # safetensors module (and its import-time log lines) whenever fpa_lowbit is imported.
        from .transformers_support import _try_register

        _try_register()


# The first name of the config, kept for existing code (``from fpa_lowbit import UIntxWeightOnlyConfig``): the same
# class object, so isinstance checks and the quantize_ handler below serve both spellings.
UIntxWeightOnlyConfig = FpaUIntxWeightOnlyConfig


def _describe(module: torch.nn.Module) -> str:
    return f"Linear(in_features={module.in_features}, out_features={module.out_features})"


@register_quantize_module_handler(FpaUIntxWeightOnlyConfig)
def _uintx_weight_only_transform(module: torch.nn.Module, config: FpaUIntxWeightOnlyConfig) -> torch.nn.Module:
    if not isinstance(module, torch.nn.Linear):
        raise TypeError(f"FpaUIntxWeightOnlyConfig applies to nn.Linear, got {type(module).__name__}")
    if isinstance(module.weight, UIntxWeight):
        raise ValueError(f"{_describe(module)} is already quantized")
    reason = check_linear_shape(
        _describe(module), module.weight.shape, config.group_size, config.bitwidth, multi_row=config.check_metal_rows
    )
    if reason:
        # torchao calls this handler without the module's name, so the fix names the way that reports names.
        raise ValueError(
            f"cannot quantize {reason}; pass filter_fn=fpa_lowbit.lowbit_filter_fn(config, skipped={{}}) to "
            "quantize_ to leave such layers in float and get their names, or choose a group_size that divides K"
        )
    qw = UIntxWeight.from_float(
        module.weight.detach(), config.bitwidth, config.group_size, config.uintx_choose_qparams_algorithm
    )
    module.weight = torch.nn.Parameter(qw, requires_grad=False)
    return module


def lowbit_filter_fn(
    config: FpaUIntxWeightOnlyConfig, skipped: dict | None = None, multi_row: bool | None = None
) -> Callable[[torch.nn.Module, str], bool]:
    """A ``filter_fn`` for ``quantize_`` that selects the ``nn.Linear`` layers this config can take.

    Layers that break a shape rule are left in float and, when ``skipped`` is a dict, recorded
    there as ``{fully_qualified_name: reason}`` (the reason from :func:`check_linear_shape`).
    ``multi_row`` defaults to ``config.check_metal_rows``.
    """
    rows = config.check_metal_rows if multi_row is None else multi_row

    def _filter(module: torch.nn.Module, fqn: str) -> bool:
        if not isinstance(module, torch.nn.Linear) or isinstance(module.weight, UIntxWeight):
            return False
        reason = check_linear_shape(
            fqn or "<root>", module.weight.shape, config.group_size, config.bitwidth, multi_row=rows
        )
        if reason is not None:
            if skipped is not None:
                skipped[fqn] = reason
            return False
        return True

    return _filter
