"""Saving quantized state dicts as plain tensors (safetensors) and loading them back.

``torch.save(model.state_dict())`` works as is (``UIntxWeight`` pickles and is registered as a
safe global for ``torch.load(weights_only=True)``).  safetensors stores only plain tensors and
string metadata, so :func:`flatten_state_dict` splits every ``UIntxWeight`` ``key`` into
``key.packed``, ``key.scale`` and ``key.zero`` and records bit width, group size and shape in
the metadata; :func:`unflatten_state_dict` reverses it.

Hugging Face transformers (``save_pretrained``) uses torchao's own flattening instead
(``torchao.prototype.safetensors``: keys ``<module>._weight_qdata`` / ``_weight_scale`` / ``_weight_zero_point``);
:mod:`fpa_lowbit.transformers_support` registers ``UIntxWeight`` with it.
"""

from __future__ import annotations

import json

import torch

from .tensor import UIntxWeight

_META_KEY = "fpa_lowbit"


def flatten_state_dict(state_dict: dict) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Return ``(tensors, metadata)`` for ``safetensors.torch.save_file(tensors, path, metadata)``.

    Raises ``ValueError`` if a flattened key would collide with an existing key.
    """
    tensors: dict[str, torch.Tensor] = {}
    info: dict[str, dict] = {}
    for key, value in state_dict.items():
        if isinstance(value, UIntxWeight):
            for part in ("packed", "scale", "zero"):
                fk = f"{key}.{part}"
                if fk in state_dict:
                    raise ValueError(f"flattening {key!r} would overwrite existing key {fk!r}")
                tensors[fk] = getattr(value, part).contiguous()
            info[key] = {"bitwidth": value.bitwidth, "group_size": value.group_size, "shape": list(value.shape)}
        else:
            tensors[key] = value
    return tensors, {_META_KEY: json.dumps(info)}


def unflatten_state_dict(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None) -> dict:
    """Inverse of :func:`flatten_state_dict` (``metadata`` as returned by ``safe_open(...).metadata()``).

    Raises ``ValueError`` if a recorded weight's parts are missing.
    """
    info = json.loads((metadata or {}).get(_META_KEY, "{}"))
    out = dict(tensors)
    for key, m in info.items():
        try:
            parts = [out.pop(f"{key}.{p}") for p in ("packed", "scale", "zero")]
        except KeyError as exc:
            raise ValueError(f"quantized weight {key!r}: missing part {exc.args[0]!r}") from None
        packed, scale, zero = parts
        out[key] = UIntxWeight(packed, scale, zero, m["bitwidth"], m["group_size"], tuple(m["shape"]))
    return out
