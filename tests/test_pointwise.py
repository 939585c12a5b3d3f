"""The conformer's 1x1 pointwise convolutions as linears (export/pointwise.py): same function, and quantized."""

from __future__ import annotations

import pytest
import torch


def _features(model, audio):
    with torch.no_grad():
        signal = torch.from_numpy(audio)[None]
        return model.preprocessor(input_signal=signal, length=torch.tensor([signal.shape[1]]))


@pytest.fixture()
def fresh_model(tiny_nemo):
    from parakeet_executorch.export.load import load_nemo_model

    return load_nemo_model(str(tiny_nemo))  # converted in place: not the session's shared model


def test_converted_encoder_computes_the_same_function(fresh_model, jfk_audio):
    from parakeet_executorch.export.methods import EncoderMethod
    from parakeet_executorch.export.pointwise import GluInputLinear, PointwiseLinear, convert_pointwise_convs
    from parakeet_executorch.export.xnnpack.encoder_forwards import xnnpack_friendly_encoder

    features, length = _features(fresh_model, jfk_audio)
    padded = torch.nn.functional.pad(features, (0, 57))  # padded frames exercise the conv module's mask
    enc = EncoderMethod(fresh_model.encoder, fresh_model.joint).eval()
    with torch.no_grad():
        valid = int(enc(features, length)[1].item())  # frames past it are not NeMo's in the XNNPACK rewrite
        refs = [enc(f, length)[0][:, :valid] for f in (features, padded)]
    names = convert_pointwise_convs(fresh_model, lambda name: name.startswith("encoder"))
    layers = len(fresh_model.encoder.layers)
    assert len(names) == 3 * layers, names
    conv = fresh_model.encoder.layers[0].conv
    assert isinstance(conv.pointwise_conv1, GluInputLinear) and isinstance(conv.pointwise_conv2, PointwiseLinear)
    with torch.no_grad():
        for f, ref in zip((features, padded), refs):
            assert (enc(f, length)[0][:, :valid] - ref).abs().max().item() < 1e-5
            with xnnpack_friendly_encoder(fresh_model.encoder):  # the XNNPACK path takes the linears directly
                assert (enc(f, length)[0][:, :valid] - ref).abs().max().item() < 1e-5


@pytest.mark.parametrize("recipe", ["8w", "fpa4w", "8da4w", "8da8w"])
def test_recipes_quantize_the_pointwise_convolutions(fresh_model, recipe):
    from parakeet_executorch.export.recipes import quantize_model

    before = fresh_model.encoder.layers[0].conv.pointwise_conv2.weight.detach().clone()
    report = quantize_model(fresh_model, recipe, "none")["parts"]["encoder"]
    conv = fresh_model.encoder.layers[0].conv
    assert (
        type(conv.pointwise_conv2.weight) is not torch.nn.Parameter
        or type(conv.pointwise_conv2.weight.data) is not torch.Tensor
    ), "pointwise_conv2 was not quantized"
    assert conv.pointwise_conv2.weight.shape == before.shape[:2]
    assert report["quantized"] == report["linear_layers"]
    assert not any("pointwise" in line for line in report["not_covered"]), report["not_covered"]


def test_a_recipe_that_leaves_the_pointwise_convolutions_float_says_so(fresh_model, monkeypatch):
    """Every recipe in the registry quantizes them; one that did not would get the 1x1 convolutions named apart
    from the layers no recipe can take (a choice of the recipe, not a missing kernel)."""
    import dataclasses

    from parakeet_executorch.export import recipes

    registry_recipe = recipes.get_recipe
    float_pointwise = dataclasses.replace(registry_recipe("8da8w"), quantizes_pointwise=False)
    monkeypatch.setattr(
        recipes, "get_recipe", lambda name: float_pointwise if name == "8da8w" else registry_recipe(name)
    )
    report = recipes.quantize_model(fresh_model, "8da8w", "none")["parts"]["encoder"]
    assert type(fresh_model.encoder.layers[0].conv.pointwise_conv2) is torch.nn.Conv1d
    (line,) = [line for line in report["not_covered"] if "pointwise_conv1" in line]
    assert "8da8w leaves 1x1 convolutions float" in line, line
    assert any("no recipe quantizes CausalConv1D" in line for line in report["not_covered"]), report
