"""The recipe registry (export/recipe_registry.py): one frozen Recipe per recipe, read by everything else."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from parakeet_executorch.export.recipe_registry import RECIPES, REGISTRY, get_recipe, recipes_on


def test_recipes_are_frozen_and_unique():
    assert len(set(RECIPES)) == len(RECIPES) == len(REGISTRY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        REGISTRY[0].name = "other"
    assert all(hash(r) is not None for r in REGISTRY)


def test_fpa4w_group_sizes_are_lowbits():
    from fpa_lowbit import GROUP_SIZES, UIntxWeightOnlyConfig

    fpa4w = get_recipe("fpa4w")
    assert fpa4w.allowed_group_sizes() == tuple(GROUP_SIZES)
    assert fpa4w.default_group_size == UIntxWeightOnlyConfig().group_size
    assert fpa4w.weight_bits == UIntxWeightOnlyConfig().bitwidth and not fpa4w.dynamic_activations


def test_what_each_recipe_quantizes():
    assert get_recipe("none").weight_bits is None and get_recipe("none").config_factory is None
    assert {r.name for r in REGISTRY if r.dynamic_activations} == {"8da4w", "8da8w"}
    assert [r.name for r in recipes_on("xnnpack")] == ["none", "fpa4w", "fpa8w", "8da4w", "8da8w"]
    assert get_recipe("8w").why_not("xnnpack") and get_recipe("8w").why_not("portable") is None
    assert [r.name for r in REGISTRY if r.quantizes_lstm] == ["fpa8w"]
    assert "fpa4w" in (get_recipe("fpa8w").why_not("metal") or "")


def test_fpa8w_is_lowbits_8_bit_config():
    fpa8w = get_recipe("fpa8w")
    config = fpa8w.config(fpa8w.default_group_size)
    assert (config.bitwidth, config.group_size) == (8, 32) and fpa8w.weight_bits == 8
    assert fpa8w.allowed_group_sizes() == get_recipe("fpa4w").allowed_group_sizes()


def test_every_default_group_size_is_accepted():
    from parakeet_executorch.export.recipes import check_recipe

    for recipe in REGISTRY:
        for backend in recipe.backends:
            check_recipe(recipe.name, backend, recipe.default_group_size if recipe.group_sizes else None)


def test_registry_imports_neither_torch_nor_torchao():
    code = (
        "import sys; import parakeet_executorch.export.recipe_registry as r; r.get_recipe('8da4w')"
        ".group_size_error('xnnpack', 48); print(sorted(m for m in ('torch', 'torchao') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
