"""Quantization recipes and which backends take them, checked from the command line before any model loads."""

from __future__ import annotations

# recipe -> backends it can be lowered to (and run correctly) on.
COMPATIBLE_BACKENDS: dict[str, tuple[str, ...]] = {
    "none": ("portable", "xnnpack", "metal", "cuda"),
}
RECIPES = tuple(COMPATIBLE_BACKENDS)


class RecipeError(ValueError):
    """A recipe that does not exist, or that the chosen backend cannot take."""


def check_recipe(recipe: str, backend: str) -> None:
    """Raise RecipeError naming the allowed pairs when ``recipe`` cannot be lowered to ``backend``."""
    if recipe not in COMPATIBLE_BACKENDS:
        raise RecipeError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    if backend not in COMPATIBLE_BACKENDS[recipe]:
        allowed = "; ".join(f"{r}: {', '.join(b)}" for r, b in COMPATIBLE_BACKENDS.items())
        raise RecipeError(f"--quantize {recipe} cannot be used with --backend {backend}. Allowed pairs: {allowed}")
