"""fpa_lowbit with Hugging Face transformers: TorchAoConfig quantization, save_pretrained, from_pretrained.

A tiny random Qwen2 (biased q/k/v projections; every dimension a multiple of 32, so each linear layer takes group
size 32) is quantized while loading with ``TorchAoConfig(quant_type=FpaUIntxWeightOnlyConfig(...))``, saved and
loaded back, in this process and in a fresh one (where only ``import fpa_lowbit`` registers the package).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pinned in third-party/requirements-test.txt)"
)

import fpa_lowbit  # noqa: E402
from fpa_lowbit import FpaUIntxWeightOnlyConfig, UIntxWeight, UIntxWeightOnlyConfig, transformers_support  # noqa: E402
from torchao.core.config import config_from_dict, config_to_dict  # noqa: E402
from torchao.quantization import quantize_  # noqa: E402
from transformers import Qwen2Config, Qwen2ForCausalLM, TorchAoConfig  # noqa: E402

transformers.utils.logging.disable_progress_bar()

LAYERS = 2
# q, k, v, o, gate, up, down per layer; transformers leaves the output embedding (lm_head) in float by default.
QUANTIZED_PER_LAYER = 7
BIASED = ("q_proj", "k_proj", "v_proj")


def _tiny_qwen2() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=256,
        max_position_embeddings=64,
    )
    model = Qwen2ForCausalLM(config).eval()
    # transformers initializes biases to zero; random ones make the bias checks (and the logits) see them.
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in BIASED:
                getattr(layer.self_attn, proj).bias.normal_(0, 0.1)
    return model


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def _quantized(model: torch.nn.Module) -> dict[str, UIntxWeight]:
    return {n: p for n, p in model.named_parameters() if isinstance(p, UIntxWeight)}


@pytest.fixture(scope="module")
def float_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("qwen2_float")
    _tiny_qwen2().save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, 256, (2, 11), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def round_trip(float_dir, ids, tmp_path_factory):
    """(quantized model, its logits, folder it was saved to, model loaded back from it)."""
    config = TorchAoConfig(quant_type=FpaUIntxWeightOnlyConfig(bitwidth=4, group_size=32))
    model = Qwen2ForCausalLM.from_pretrained(float_dir, quantization_config=config).eval()
    before = _logits(model, ids)
    saved = tmp_path_factory.mktemp("qwen2_fpa4w")
    model.save_pretrained(saved)
    loaded = Qwen2ForCausalLM.from_pretrained(saved).eval()
    return model, before, saved, loaded


def test_round_trip_gives_identical_logits(round_trip, ids):
    model, before, _, loaded = round_trip
    assert len(_quantized(model)) == LAYERS * QUANTIZED_PER_LAYER
    assert torch.equal(before, _logits(loaded, ids))


def test_loaded_weights_are_uintx_with_the_same_bytes(round_trip):
    model, _, _, loaded = round_trip
    original, back = _quantized(model), _quantized(loaded)
    assert back.keys() == original.keys()
    for name, w in original.items():
        b = back[name]
        assert (b.bitwidth, b.group_size, b.shape, b.dtype) == (w.bitwidth, w.group_size, w.shape, w.dtype), name
        for part in ("packed", "scale", "zero"):
            assert torch.equal(getattr(b, part), getattr(w, part)), f"{name}.{part}"
    assert type(loaded.lm_head.weight) is torch.nn.Parameter and not isinstance(loaded.lm_head.weight, UIntxWeight)


def test_biases_are_kept(round_trip):
    model, _, _, loaded = round_trip
    for i in range(LAYERS):
        for proj in BIASED:
            bias = getattr(model.model.layers[i].self_attn, proj).bias
            back = getattr(loaded.model.layers[i].self_attn, proj).bias
            assert bias is not None and back is not None and torch.count_nonzero(bias) > 0
            assert torch.equal(back, bias), f"layers.{i}.self_attn.{proj}.bias"


def test_the_folder_holds_safetensors_and_our_config(round_trip):
    from safetensors import safe_open

    _, _, saved, _ = round_trip
    assert (saved / "model.safetensors").is_file()
    assert not list(saved.glob("*.bin"))
    with safe_open(str(saved / "model.safetensors"), framework="pt") as f:
        keys, metadata = set(f.keys()), f.metadata()
    prefix = "model.layers.0.self_attn.q_proj"
    assert {f"{prefix}._weight_qdata", f"{prefix}._weight_scale", f"{prefix}._weight_zero_point"} <= keys
    assert f"{prefix}.bias" in keys and f"{prefix}.weight" not in keys
    meta = json.loads(metadata[f"{prefix}.weight"])
    assert meta["_type"] == "UIntxWeight"
    assert meta["_data"] == {"bitwidth": 4, "group_size": 32, "shape": [64, 64]}
    quant = json.loads((saved / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "torchao"
    assert quant["quant_type"]["default"]["_type"] == "FpaUIntxWeightOnlyConfig"


def test_config_dict_round_trip():
    cfg = FpaUIntxWeightOnlyConfig(bitwidth=3, group_size=64, uintx_choose_qparams_algorithm="min_max")
    d = config_to_dict(cfg)
    assert d["_type"] == "FpaUIntxWeightOnlyConfig"
    back = config_from_dict(d)
    assert type(back) is FpaUIntxWeightOnlyConfig and back == cfg
    hf = TorchAoConfig.from_dict(TorchAoConfig(quant_type=cfg).to_dict())
    assert type(hf.quant_type) is FpaUIntxWeightOnlyConfig and hf.quant_type == cfg


def test_old_name_is_the_same_class_and_torchao_keeps_its_own():
    assert UIntxWeightOnlyConfig is FpaUIntxWeightOnlyConfig
    assert type(UIntxWeightOnlyConfig()).__name__ == "FpaUIntxWeightOnlyConfig"
    m = torch.nn.Sequential(torch.nn.Linear(64, 32))
    quantize_(m, UIntxWeightOnlyConfig(bitwidth=2, group_size=32))
    assert isinstance(m[0].weight, UIntxWeight) and m[0].weight.bitwidth == 2
    # The module torchao resolves our class name in must not also offer the short name, which is torchao's gemlite
    # config (torchao.prototype.quantization.UIntxWeightOnlyConfig): that one still deserializes to itself.
    assert not hasattr(transformers_support, "UIntxWeightOnlyConfig")
    from torchao.prototype.quantization import UIntxWeightOnlyConfig as GemliteConfig

    gemlite = GemliteConfig(group_size=64, bit_width=4, set_inductor_config=False)
    assert type(config_from_dict(config_to_dict(gemlite))) is GemliteConfig


_FRESH_LOAD = """
import sys
import fpa_lowbit
assert "transformers" not in sys.modules, "import fpa_lowbit imported transformers"
assert "torchao.prototype.safetensors.safetensors_utils" not in sys.modules
import torch
from transformers import Qwen2ForCausalLM
model = Qwen2ForCausalLM.from_pretrained(sys.argv[1]).eval()
assert type(model.model.layers[0].mlp.down_proj.weight).__name__ == "UIntxWeight"
with torch.no_grad():
    torch.save(model(torch.load(sys.argv[2])).logits, sys.argv[3])
"""


def test_a_fresh_process_loads_it_after_import_fpa_lowbit(round_trip, ids, tmp_path):
    _, before, saved, _ = round_trip
    torch.save(ids, tmp_path / "ids.pt")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    r = subprocess.run(
        [sys.executable, "-c", _FRESH_LOAD, str(saved), str(tmp_path / "ids.pt"), str(tmp_path / "logits.pt")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert torch.equal(torch.load(tmp_path / "logits.pt"), before)


def test_quantize_then_save_pretrained_needs_attach(float_dir, ids, tmp_path):
    """quantize_ after loading: transformers has no quantizer for the model, so save_pretrained alone would write
    config.json and fail; check_save_pretrained says so before anything is written, attach_torchao_config fixes it."""
    model = Qwen2ForCausalLM.from_pretrained(float_dir).eval()
    config = FpaUIntxWeightOnlyConfig(bitwidth=4, group_size=32)
    quantize_(model, config)  # every linear, lm_head too
    assert isinstance(model.lm_head.weight, UIntxWeight)
    before = _logits(model, ids)
    target = tmp_path / "direct"
    with pytest.raises(
        RuntimeError, match=r"UIntxWeight but the model has no torchao quantizer.*attach_torchao_config"
    ):
        transformers_support.check_save_pretrained(model)
    assert not target.exists()

    transformers_support.attach_torchao_config(model, config)
    transformers_support.check_save_pretrained(model)
    model.save_pretrained(target)
    loaded = Qwen2ForCausalLM.from_pretrained(target).eval()
    assert isinstance(loaded.lm_head.weight, UIntxWeight)
    assert len(_quantized(loaded)) == LAYERS * QUANTIZED_PER_LAYER + 1
    assert torch.equal(_logits(loaded, ids), before)


def test_attach_rejects_a_config_that_did_not_make_the_weights(float_dir):
    model = Qwen2ForCausalLM.from_pretrained(float_dir).eval()
    with pytest.raises(ValueError, match="no UIntxWeight weight"):
        transformers_support.attach_torchao_config(model, FpaUIntxWeightOnlyConfig())
    quantize_(model, FpaUIntxWeightOnlyConfig(bitwidth=4, group_size=32))
    with pytest.raises(ValueError, match="has bitwidth=4, group_size=32 but the config has bitwidth=2"):
        transformers_support.attach_torchao_config(model, FpaUIntxWeightOnlyConfig(bitwidth=2, group_size=32))
    assert getattr(model, "hf_quantizer", None) is None


def test_registration_is_idempotent():
    from torchao.prototype.safetensors import safetensors_utils

    fpa_lowbit.register_torchao_serialization()
    fpa_lowbit.register_torchao_serialization()
    assert safetensors_utils.ALLOWED_TENSORS_SUBCLASSES.count("UIntxWeight") == 1
