"""Quantizing a NeMo TDT model with a recipe: the checks before loading, the per-layer filter, and the report of what
was quantized. The recipes themselves (backends, group sizes, configs) are in ``recipe_registry.py``.

The checks here need only the command line, so a wrong pair fails before the model loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .recipe_registry import RECIPES, REGISTRY, get_recipe

EMBEDDING_RECIPES = ("none", "4w", "8w")


class RecipeError(ValueError):
    """A recipe that does not exist, that the chosen backend cannot take, or a layer that --strict refuses."""


def check_recipe(recipe: str, backend: str, group_size: int | None = None, flag: str = "--quantize") -> None:
    """Raise RecipeError naming the allowed pairs when ``recipe`` cannot be lowered to ``backend``, or cannot take
    ``group_size`` there (None = the recipe's default; 0 = per channel). The rules are the registry's ``Recipe``;
    ``flag`` is the option the message names (``--quantize``, ``--quantize-encoder`` or ``--quantize-decoder``)."""
    if recipe not in RECIPES:
        raise RecipeError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    entry = get_recipe(recipe)
    if not entry.runs_on(backend):
        allowed = "; ".join(f"{r.name}: {', '.join(r.backends)}" for r in REGISTRY)
        why = entry.why_not(backend)
        raise RecipeError(
            f"{flag} {recipe} cannot be used with --backend {backend}"
            f"{' (' + why + ')' if why else ''}. Allowed pairs: {allowed}"
        )
    if group_size is not None and group_size < 0:
        raise RecipeError(f"--group-size must be >= 0 (0 = per channel), got {group_size}")
    problem = entry.group_size_error(backend, group_size)
    if problem:
        raise RecipeError(problem)


EMBEDDING_BACKENDS = ("portable",)


def check_embedding_recipe(recipe: str, backend: str) -> None:
    """Raise RecipeError when the embedding recipe cannot be lowered to ``backend``.

    A weight-only embedding is a torchao dequantize with no ExecuTorch out variant; only the portable path
    decomposes it into plain ops (XNNPACK does not take embeddings, so on xnnpack it would stay undelegated).
    """
    if recipe != "none" and backend not in EMBEDDING_BACKENDS:
        raise RecipeError(
            f"--quantize-embedding {recipe} is supported with --backend "
            f"{', '.join(EMBEDDING_BACKENDS)} only, not {backend}"
        )


def skip_reason(recipe: str, name: str, weight_shape, group_size: int, multi_row: bool) -> str | None:
    """Why the linear ``name`` cannot take ``recipe`` (None if it can); the same rules the kernels check."""
    n, k = (int(s) for s in weight_shape)
    if recipe in ("fpa4w", "fpa8w"):
        from fpa_lowbit import check_linear_shape

        spec = get_recipe(recipe)
        assert spec.weight_bits is not None
        # N % 4 for multi-row inputs is Metal's rule: only for a recipe that runs there.
        metal = spec.runs_on("metal")
        return check_linear_shape(name, (n, k), group_size, spec.weight_bits, multi_row=multi_row and metal)
    if group_size and k % group_size:
        return f"{name}: K = {k} breaks rule K % group_size == 0 (group_size = {group_size})"
    return None


@dataclass
class PartReport:
    """What one part (encoder or decoder) got: counts, weight bytes before/after, and skipped layers with reasons."""

    recipe: str
    group_size: int
    linear_layers: int = 0
    quantized: int = 0
    weight_bytes_before: int = 0
    weight_bytes_after: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    not_covered: list[str] = field(default_factory=list)


def quantize_part(
    root: torch.nn.Module,
    prefixes: list[str],
    recipe: str,
    group_size: int,
    qparams: str,
    strict: bool,
    multi_row: bool,
) -> PartReport:
    """Quantize the ``nn.Linear`` layers under ``prefixes`` of ``root`` in place with a recipe.

    With a recipe that ``quantizes_pointwise`` (``recipe_registry.Recipe``), the conformer's 1x1 pointwise
    convolutions are first turned into linears (``pointwise.convert_pointwise_convs``) so that they are quantized too;
    with one that ``quantizes_lstm``, the LSTMs likewise (``lstm.convert_lstms``).

    Args:
        root: the NeMo model.
        prefixes: module names making up the part (e.g. ``["encoder", "joint.enc"]``).
        multi_row: whether these linears see more than one row per call (shape rules differ for fpa4w).
    Raises:
        RecipeError: with ``strict``, when any layer would be left in float.
    """
    report = PartReport(recipe, group_size)
    if get_recipe(recipe).quantizes_pointwise:
        from .pointwise import convert_pointwise_convs

        convert_pointwise_convs(root, lambda name: _in_part(name, prefixes))  # 1x1 convs as linears: see pointwise.py
    if get_recipe(recipe).quantizes_lstm:
        from .lstm import convert_lstms

        convert_lstms(root, lambda name: _in_part(name, prefixes))  # one linear per LSTM layer: see lstm.py
    modules = dict(root.named_modules())
    linears = {name: m for name, m in modules.items() if isinstance(m, torch.nn.Linear) and _in_part(name, prefixes)}
    report.linear_layers = len(linears)
    report.weight_bytes_before = sum(_nbytes(m.weight) for m in linears.values())
    report.not_covered = _not_covered(modules, prefixes, recipe)
    if recipe == "none":
        report.weight_bytes_after = report.weight_bytes_before
        return report
    chosen = set()
    for name, m in linears.items():
        reason = skip_reason(recipe, name, m.weight.shape, group_size, multi_row)
        if reason:
            report.skipped[name] = reason
        else:
            chosen.add(name)
    if strict and report.skipped:
        raise RecipeError("--strict: these layers cannot take " + recipe + ": " + "; ".join(report.skipped.values()))
    from torchao.quantization import quantize_

    quantize_(root, get_recipe(recipe).config(group_size, qparams), filter_fn=lambda m, fqn: fqn in chosen)
    report.quantized = len(chosen)
    modules = dict(root.named_modules())
    report.weight_bytes_after = sum(_nbytes(modules[name].weight) for name in linears)
    return report


def _not_covered(modules: dict, prefixes: list[str], recipe: str) -> list[str]:
    """Layers with weights that ``recipe`` leaves float (LSTMs, convolutions), one line per kind of layer.

    What remains after ``pointwise.convert_pointwise_convs`` is small (the depthwise and subsampling convolutions),
    but the report names it so that no one reads "quantized N of N linear layers" as "every weight is 4-bit".
    1x1 convolutions still present are named apart: the recipe could quantize them, it is a choice
    (``Recipe.quantizes_pointwise``), not a missing kernel.
    """
    from .pointwise import is_pointwise

    groups: dict[str, list[tuple[str, torch.nn.Module]]] = {}
    for name, m in modules.items():
        if isinstance(m, (torch.nn.LSTM, torch.nn.Conv1d, torch.nn.Conv2d)) and _in_part(name, prefixes):
            kind = "1x1 Conv1d" if is_pointwise(m) else type(m).__name__
            groups.setdefault(kind, []).append((name, m))
    lines = []
    for kind, layers in sorted(groups.items()):
        if kind == "1x1 Conv1d" and recipe != "none":
            pointwise = ", ".join(r.name for r in REGISTRY if r.quantizes_pointwise)
            why = (
                f"{recipe} leaves 1x1 convolutions float; only {pointwise} turn them into "
                f"quantized linears (export/pointwise.py)"
            )
        elif kind == "LSTM":
            takers = [r.name for r in REGISTRY if r.quantizes_lstm]
            verb = "turns" if len(takers) == 1 else "turn"
            why = (
                f"{recipe} leaves LSTMs float; only {', '.join(takers)} {verb} them into quantized linears "
                "(export/lstm.py)"
            )
        else:
            why = f"no recipe quantizes {kind}"
        if len(layers) == 1:
            lines.append(f"{layers[0][0]} ({kind}: {why})")
            continue
        mb = sum(_nbytes(p) for _, m in layers for p in m.parameters()) / 1e6
        lines.append(f"{len(layers)} {kind} layers, e.g. {layers[0][0]} ({mb:.2f} MB of weights): {why}")
    return lines


def _in_part(name: str, prefixes: list[str]) -> bool:
    """Whether module ``name`` is one of ``prefixes`` or lies inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def quantize_embedding(root: torch.nn.Module, name: str, recipe: str, group_size: int) -> PartReport:
    """Weight-only quantization (4w or 8w) of the prediction network's embedding table."""
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    emb = dict(root.named_modules())[name]
    report = PartReport(recipe, group_size, linear_layers=1, weight_bytes_before=_nbytes(emb.weight))
    if recipe == "none":
        report.weight_bytes_after = report.weight_bytes_before
        return report
    gran = PerAxis(0) if group_size == 0 else PerGroup(group_size)
    dtype = torch.int4 if recipe == "4w" else torch.int8  # type: ignore[attr-defined]  # not in torch's stubs
    quantize_(root, IntxWeightOnlyConfig(weight_dtype=dtype, granularity=gran), filter_fn=lambda m, fqn: fqn == name)
    report.quantized = 1
    report.weight_bytes_after = _nbytes(dict(root.named_modules())[name].weight)
    return report


# Which modules of a NeMo TDT model make up each part, and whether their linears see more than one row per call.
PARTS = {"encoder": (["encoder", "joint.enc"], True), "decoder": (["decoder", "joint.pred", "joint.joint_net"], False)}
EMBEDDING = "decoder.prediction.embed"


def quantize_parts(
    model,
    encoder_recipe: str,
    decoder_recipe: str,
    group_size: int | None = None,
    qparams: str = "hqq",
    strict: bool = False,
    embedding_recipe: str = "none",
) -> dict[str, PartReport]:
    """Quantize a NeMo TDT model in place, part by part, as ``parakeet-export`` does.

    Args:
        model: the NeMo TDT model (eval mode, on CPU).
        encoder_recipe, decoder_recipe: names of ``recipe_registry.RECIPES`` for the two parts (``PARTS``).
        group_size: None for each recipe's default (``Recipe.default_group_size``), 0 for per channel.
        qparams: fpa4w's parameter choice, "hqq" or "minmax".
        strict: raise instead of leaving a linear the recipe cannot take in float.
        embedding_recipe: "none", "4w" or "8w" for the prediction network's embedding (weight-only, torchao's
            ``IntxWeightOnlyConfig``; per channel unless ``group_size``).
    Returns:
        part name ("encoder", "decoder", and "embedding" unless its recipe is none) -> ``PartReport``.
    Raises:
        RecipeError: with ``strict``, a layer the recipe cannot take.
    """
    reports: dict[str, PartReport] = {}
    for part, recipe in (("encoder", encoder_recipe), ("decoder", decoder_recipe)):
        prefixes, multi_row = PARTS[part]
        gs = get_recipe(recipe).default_group_size if group_size is None else group_size
        reports[part] = quantize_part(model, prefixes, recipe, gs, qparams, strict, multi_row)
    if embedding_recipe != "none":
        gs = 0 if group_size is None else group_size
        reports["embedding"] = quantize_embedding(model, EMBEDDING, embedding_recipe, gs)
    return reports


def quantize_model(
    model,
    encoder_recipe: str,
    decoder_recipe: str,
    group_size: int | None = None,
    qparams: str = "hqq",
    strict: bool = False,
    embedding_recipe: str = "none",
) -> dict:
    """``quantize_parts`` with the reports as plain dicts: ``{"parts": {part: PartReport as dict}}``."""
    from dataclasses import asdict

    reports = quantize_parts(model, encoder_recipe, decoder_recipe, group_size, qparams, strict, embedding_recipe)
    return {"parts": {part: asdict(r) for part, r in reports.items()}}


def _nbytes(t: torch.Tensor) -> int:
    """Storage bytes of a (possibly quantized tensor-subclass) weight: the sum of its inner tensors."""
    if hasattr(t, "__tensor_flatten__"):
        names, _ = t.__tensor_flatten__()
        return sum(_nbytes(getattr(t, n)) for n in names)
    return t.numel() * t.element_size()
