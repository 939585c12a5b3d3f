"""Saving and loading with Hugging Face transformers: ``save_pretrained`` / ``from_pretrained`` of a model quantized
through ``transformers.TorchAoConfig(quant_type=FpaUIntxWeightOnlyConfig(...))``.

transformers hands both halves of the round trip to torchao:

* the config: ``TorchAoConfig.to_dict`` / ``from_dict`` call ``torchao.core.config.config_to_dict`` /
  ``config_from_dict``, which store the config's class *name* only and look it up again with ``getattr`` in each
  module of ``torchao.core.config.ALLOWED_AO_MODULES``;
* the weights: ``TorchAoHfQuantizer.get_state_dict_and_metadata`` calls
  ``torchao.prototype.safetensors.safetensors_support.flatten_tensor_state_dict`` and ``TorchAoDeserialize`` calls
  ``unflatten_tensor_state_dict``; both accept only tensor subclasses whose class name is in
  ``safetensors_utils.ALLOWED_TENSORS_SUBCLASSES`` and rebuild them through ``safetensors_utils.ALLOWED_CLASSES``.

torchao 0.18 and transformers 5.x offer no registration call for a third-party config or tensor subclass; these
three module-level allow-lists are the only extension points, so :func:`register_torchao_serialization` adds this
package to them, once per process.  This module imports neither transformers nor (until a config is built) torchao's
safetensors module, so ``import fpa_lowbit`` stays cheap.

This module is itself the entry of ``ALLOWED_AO_MODULES``: torchao resolves a stored class name in every listed
module, so the listed module must not expose a name that one of torchao's modules also uses (``fpa_lowbit`` and
``fpa_lowbit.config`` expose the alias ``UIntxWeightOnlyConfig``, which is also torchao's gemlite config).  Keep its
public names to the config class and the functions below.
"""

from __future__ import annotations

import contextlib
import importlib.metadata

import torch
from torchao.core import config as _ao_config

from .config import FpaUIntxWeightOnlyConfig
from .tensor import UIntxWeight as _UIntxWeight

__all__ = [
    "FpaUIntxWeightOnlyConfig",
    "attach_torchao_config",
    "check_save_pretrained",
    "register_torchao_serialization",
]

# Where torchao's config_from_dict finds FpaUIntxWeightOnlyConfig by name (see the module docstring).
_CONFIG_MODULE = __name__
_TENSOR_NAME = _UIntxWeight.__name__

_registered = {"tensor": False}  # a dict, not a global flag, so the functions below need no ``global``


def _register_config_module() -> None:
    # Cheap (torchao.core.config is already imported by fpa_lowbit.config); run at ``import fpa_lowbit`` because
    # from_pretrained resolves the config's class name before any fpa_lowbit object exists in the process.
    _ao_config.ALLOWED_AO_MODULES.add(_CONFIG_MODULE)


def _uintx_weight_from_torchao(
    *, qdata: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, bitwidth: int, group_size: int, shape
) -> _UIntxWeight:
    # torchao's object_from_dict calls ALLOWED_CLASSES[name](**attributes, **inner_tensors) with the names of
    # UIntxWeight.tensor_attribute_names / tensor_data_names; this maps them onto UIntxWeight's constructor (the
    # JSON metadata turns the shape into a list).
    return _UIntxWeight(qdata, scale, zero_point, int(bitwidth), int(group_size), tuple(int(s) for s in shape))


def register_torchao_serialization() -> None:
    """Register :class:`FpaUIntxWeightOnlyConfig` and :class:`~fpa_lowbit.UIntxWeight` with torchao's serialization.

    Idempotent and cheap after the first call; called by every ``FpaUIntxWeightOnlyConfig(...)`` construction, so
    user code does not need to call it.  Afterwards:

    * ``torchao.core.config.config_to_dict(cfg)`` / ``config_from_dict`` round-trip the config (``_type``
      ``"FpaUIntxWeightOnlyConfig"``), hence ``TorchAoConfig.to_dict`` / ``from_dict`` and ``config.json``;
    * ``flatten_tensor_state_dict`` turns a ``UIntxWeight`` ``[N, K]`` stored at ``<module>.weight`` into the plain
      tensors ``<module>._weight_qdata`` (uint8 ``[N, K*bitwidth/8]``), ``_weight_scale`` and
      ``_weight_zero_point`` (``[N, K/group_size]``, the activation dtype) plus JSON metadata with ``bitwidth``,
      ``group_size`` and ``shape``; ``unflatten_tensor_state_dict`` rebuilds it bit for bit.

    It adds this module to ``torchao.core.config.ALLOWED_AO_MODULES`` and ``"UIntxWeight"`` to
    ``torchao.prototype.safetensors.safetensors_utils.ALLOWED_TENSORS_SUBCLASSES`` / ``ALLOWED_CLASSES`` (the lists
    transformers' ``TorchAoHfQuantizer`` and ``TorchAoDeserialize`` consult; tested with torchao 0.18).

    Raises:
        RuntimeError: the installed torchao has no ``torchao.prototype.safetensors`` allow-lists (too old, or
            renamed in a newer release), so a quantized model cannot be saved or loaded through transformers.
    """
    _register_config_module()
    if _registered["tensor"]:
        return
    try:
        from torchao.prototype.safetensors import safetensors_utils

        subclasses = safetensors_utils.ALLOWED_TENSORS_SUBCLASSES
        classes = safetensors_utils.ALLOWED_CLASSES
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            f"fpa_lowbit: torchao {_version('torchao')} has no torchao.prototype.safetensors allow-lists "
            f"({type(exc).__name__}: {exc}); saving or loading UIntxWeight with transformers needs them "
            "(tested: torchao 0.18)"
        ) from None
    if _TENSOR_NAME not in subclasses:
        subclasses.append(_TENSOR_NAME)
    classes[_TENSOR_NAME] = _uintx_weight_from_torchao
    _registered["tensor"] = True


def _try_register() -> None:
    # The config's constructor must work without transformers' machinery (torch.export / ExecuTorch users on any
    # torchao in the package's range); the error is raised again where serialization is needed
    # (check_save_pretrained, attach_torchao_config, or an explicit register_torchao_serialization call).
    with contextlib.suppress(RuntimeError):
        register_torchao_serialization()


def _uintx_weights(model: torch.nn.Module) -> dict[str, _UIntxWeight]:
    return {name: p for name, p in model.named_parameters() if isinstance(p, _UIntxWeight)}


def _has_torchao_quantizer(model: torch.nn.Module) -> bool:
    # Compared by name so that this module never imports transformers (TorchAoHfQuantizer is its torchao quantizer,
    # transformers/quantizers/quantizer_torchao.py).
    return type(getattr(model, "hf_quantizer", None)).__name__ == "TorchAoHfQuantizer"


def check_save_pretrained(model: torch.nn.Module) -> None:
    """Raise if ``model.save_pretrained`` would fail on this package's weights, before anything is written.

    ``save_pretrained`` writes quantized weights only through the torchao quantizer that ``from_pretrained`` attaches
    when given ``quantization_config=TorchAoConfig(...)``.  A model quantized with ``quantize_`` after loading has
    none, and transformers then creates the folder and writes ``config.json`` (without the quantization config)
    before it fails on the first ``UIntxWeight`` (``RuntimeError: Attempted to access the data pointer on an invalid
    python storage``).  Call this first, or :func:`attach_torchao_config`, which makes that model saveable.

    Args:
        model: a ``transformers.PreTrainedModel`` (any ``nn.Module`` is accepted); a model without ``UIntxWeight``
            weights passes.

    Raises:
        RuntimeError: the model has ``UIntxWeight`` weights and no torchao quantizer (the message names one), or
            torchao's serialization could not be registered (see :func:`register_torchao_serialization`).
    """
    names = list(_uintx_weights(model))
    if not names:
        return
    register_torchao_serialization()
    if not _has_torchao_quantizer(model):
        raise RuntimeError(
            f"fpa_lowbit: {len(names)} weights (e.g. {names[0]!r}) are UIntxWeight but the model has no torchao "
            "quantizer (it was quantized with quantize_ after loading, not through from_pretrained(..., "
            "quantization_config=TorchAoConfig(quant_type=FpaUIntxWeightOnlyConfig(...)))), so transformers' "
            "save_pretrained would write config.json and then fail. Call "
            "fpa_lowbit.transformers_support.attach_torchao_config(model, config) first."
        )


def attach_torchao_config(model: torch.nn.Module, config: FpaUIntxWeightOnlyConfig, **torchao_config_kwargs) -> None:
    """Make a transformers model quantized with ``quantize_(model, config)`` saveable with ``save_pretrained``.

    Does what ``PreTrainedModel.from_pretrained`` does for ``quantization_config=TorchAoConfig(quant_type=config)``
    (transformers 5.x, ``modeling_utils.py``: ``get_hf_quantizer``, ``hf_quantizer.preprocess_model``,
    ``model.hf_quantizer = ...``, ``hf_quantizer.postprocess_model``), through transformers' public quantizer API:
    afterwards ``model.config.quantization_config`` is that ``TorchAoConfig`` and ``save_pretrained`` writes the
    ``UIntxWeight`` weights as plain safetensors tensors, which ``from_pretrained`` loads back bit for bit.  A model
    that already has a torchao quantizer (loaded with ``TorchAoConfig``) is left as it is.  Imports transformers.

    Args:
        model: a ``transformers.PreTrainedModel`` whose ``UIntxWeight`` weights were made by ``config``.
        config: the :class:`FpaUIntxWeightOnlyConfig` passed to ``quantize_`` (recorded in ``config.json``).
        torchao_config_kwargs: passed to ``transformers.TorchAoConfig`` (e.g. ``modules_to_not_convert``).

    Raises:
        ValueError: the model has no ``UIntxWeight`` weight, one was made with another bit width or group size than
            ``config``, or the model already has a quantizer of another method.
        RuntimeError: see :func:`register_torchao_serialization`.
    """
    register_torchao_serialization()
    if _has_torchao_quantizer(model):
        return
    existing = getattr(model, "hf_quantizer", None)
    if existing is not None:
        raise ValueError(f"the model already has a {type(existing).__name__}; it cannot also take a TorchAoConfig")
    weights = _uintx_weights(model)
    if not weights:
        raise ValueError("the model has no UIntxWeight weight: call quantize_(model, config) first")
    for name, w in weights.items():
        if (w.bitwidth, w.group_size) != (config.bitwidth, config.group_size):
            raise ValueError(
                f"{name} has bitwidth={w.bitwidth}, group_size={w.group_size} but the config has "
                f"bitwidth={config.bitwidth}, group_size={config.group_size}"
            )
    from transformers import TorchAoConfig
    from transformers.quantizers import AutoHfQuantizer

    quantization_config = TorchAoConfig(quant_type=config, **torchao_config_kwargs)
    quantizer = AutoHfQuantizer.from_config(quantization_config, pre_quantized=False)
    quantizer.preprocess_model(model)
    model.hf_quantizer = quantizer
    quantizer.postprocess_model(model)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
