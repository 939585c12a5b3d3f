"""Every quantization recipe for linears, one frozen ``Recipe`` each, in one registry (``REGISTRY``).

=========  ===================================================================  ==============  ====================
recipe     what it does to each linear                                          default group   backends
=========  ===================================================================  ==============  ====================
none       nothing                                                              -               all
fpa4w      4-bit unsigned weights per group, float scale and zero, float        32              metal, mlx (+
           activations (``fpa_lowbit``), HQQ by default                         portable, xnnpack:
                                                                                                CPU kernel)
fpa8w      fpa4w's format with 8-bit weights; also the prediction network's     32              portable, xnnpack
           LSTM (``lstm.py``): for the decoder and joint, whose one-row                         (CPU kernel)
           products are bound by weight reads
4w         torchao int4 weight-only, tile-packed layout (packing needs CUDA)    32              cuda
8w         int8 weight-only, per output channel                                 per channel     portable, cuda, metal
8da4w      dynamic int8 activations, int4 weights per group                     32              xnnpack
8da8w      dynamic int8 activations, int8 weights per output channel            per channel     xnnpack
=========  ===================================================================  ==============  ====================

fpa8w is the CPU decoder recipe: its weights read about a third of fp32's bytes (1.25 bytes per weight with
group 32's float scale and zero) at near-fp32 accuracy, where 8da8w's per-call activation quantization made
one-row products slower than fp32 and 8da4w's 4-bit joint cost the trained demo model 1-2 WER points. Metal's
shim and MLX take 4-bit only.

8w is never lowered to XNNPACK: executorch 1.5.1 lowers weight-only int8/int4 linears to XNNPACK with the scales
ignored (a toy Linear was off by ~736), so such a .pte would run and be wrong. On mlx, fpa4w's weights reach
the MLX partitioner as torchao's ``dequantize_affine`` + ``linear`` (``lowbit/torchao_intx.py``), the pattern it
fuses into MLX's affine 4-bit matmul.
Whatever needs to know a recipe (``recipes.check_recipe``, ``recipes.quantize_part``, the export CLI's choices, the
WER evaluation, the benchmarks) reads it here. Importing this module imports neither torch nor torchao: the configs
and lowbit's group sizes are imported when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _lowbit_group_sizes() -> tuple[int, ...]:
    from fpa_lowbit.qparams import GROUP_SIZES  # importing lowbit imports torchao (seconds): only when asked

    return tuple(GROUP_SIZES)


def _granularity(group_size: int):
    from torchao.quantization.granularity import PerAxis, PerGroup

    return PerAxis(0) if group_size == 0 else PerGroup(group_size)


def _config_fpa4w(group_size: int, qparams: str):
    from fpa_lowbit import UIntxWeightOnlyConfig

    return UIntxWeightOnlyConfig(bitwidth=4, group_size=group_size, uintx_choose_qparams_algorithm=qparams)


def _config_fpa8w(group_size: int, qparams: str):
    from fpa_lowbit import UIntxWeightOnlyConfig

    return UIntxWeightOnlyConfig(bitwidth=8, group_size=group_size, uintx_choose_qparams_algorithm=qparams)


def _config_4w(group_size: int, qparams: str):
    from torchao.quantization import Int4WeightOnlyConfig

    return Int4WeightOnlyConfig(group_size=group_size, int4_packing_format="tile_packed_to_4d")


def _config_8w(group_size: int, qparams: str):
    import torch
    from torchao.quantization import IntxWeightOnlyConfig

    return IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=_granularity(group_size))


def _config_8da4w(group_size: int, qparams: str):
    import torch
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig

    # XNNPACK's blockwise int4 kernels keep group scales in bf16; choosing them in bf16 here makes the eager
    # model and the lowered one use the same scales (with fp32 scales they differed by up to 6 % per layer).
    return Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4,  # type: ignore[attr-defined]  # missing from torch's type stubs
        weight_granularity=_granularity(group_size),
        weight_scale_dtype=torch.bfloat16,
    )


def _config_8da8w(group_size: int, qparams: str):
    import torch
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig

    return Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int8, weight_granularity=_granularity(group_size))


@dataclass(frozen=True)
class Recipe:
    """One quantization recipe for the model's linears: what it quantizes, where it runs, how it is configured.

    Attributes:
        name: the ``--quantize`` value.
        summary: one line on what it does to each linear.
        backends: the backends that lower it correctly, in the order error messages list them.
        weight_bits: bits per quantized weight (None: weights stay float).
        dynamic_activations: activations are quantized to int8 at run time (per token); False = float activations.
        default_group_size: weights per quantization group along K when ``--group-size`` is not given
            (0 = one group per output channel).
        group_sizes: the exact group sizes it takes, as a function (read lazily from the package that defines
            them, e.g. lowbit's ``GROUP_SIZES``); None = any size >= 0.
        group_size_multiples: ``(backend, m)``: on that backend a group size must be a multiple of m (or 0).
        refusals: ``(backend, why)``: why a backend outside ``backends`` refuses it, shown in the error message.
        quantizes_pointwise: the conformer's 1x1 pointwise convolutions are turned into linears
            (``pointwise.convert_pointwise_convs``) and quantized too.
        quantizes_lstm: the prediction network's LSTM is turned into one linear per layer
            (``lstm.convert_lstms``) and quantized too.
        config_factory: ``(group_size, qparams) -> torchao config`` for ``quantize_`` (None for ``none``).
    """

    name: str
    summary: str
    backends: tuple[str, ...]
    weight_bits: int | None = None
    dynamic_activations: bool = False
    default_group_size: int = 0
    group_sizes: Callable[[], tuple[int, ...]] | None = None
    group_size_multiples: tuple[tuple[str, int], ...] = ()
    refusals: tuple[tuple[str, str], ...] = ()
    quantizes_pointwise: bool = False
    quantizes_lstm: bool = False
    config_factory: Callable[[int, str], object] | None = None

    def runs_on(self, backend: str) -> bool:
        """Whether ``backend`` lowers this recipe correctly."""
        return backend in self.backends

    def why_not(self, backend: str) -> str | None:
        """Why ``backend`` refuses this recipe, when there is more to say than that it is not supported."""
        return dict(self.refusals).get(backend)

    def allowed_group_sizes(self) -> tuple[int, ...] | None:
        """The group sizes this recipe takes (None: any size >= 0)."""
        return None if self.group_sizes is None else self.group_sizes()

    def group_size_error(self, backend: str, group_size: int | None) -> str | None:
        """Why ``group_size`` (None = the default) cannot be used with this recipe on ``backend`` (None if it can).

        The message names the rule; it does not check ``group_size >= 0`` (``recipes.check_recipe`` does).
        """
        allowed = self.allowed_group_sizes() if group_size is not None else None
        if allowed is not None and group_size not in allowed:
            listed = ", ".join(str(g) for g in allowed[:-1]) + f" or {allowed[-1]}"
            return f"{self.name} takes group sizes {listed}, got {group_size}"
        multiple = dict(self.group_size_multiples).get(backend)
        if multiple and group_size and group_size % multiple:
            # 8da4w: executorch 1.5.1's XNNPACK lowering asserts on this deep inside to_edge_transform_and_lower.
            return (
                f"{self.name} on {backend} takes group sizes that are multiples of {multiple} (or 0 = per "
                f"channel), got {group_size}"
            )
        return None

    def config(self, group_size: int, qparams: str = "hqq"):
        """The torchao ``quantize_`` config for linears (``group_size`` 0 = per output channel; ``qparams``
        "hqq" or "minmax", used by fpa4w and fpa8w only). Raises ValueError for ``none``, which has no config."""
        if self.config_factory is None:
            raise ValueError(f"recipe {self.name!r} has no torchao config")
        return self.config_factory(group_size, qparams)


REGISTRY: tuple[Recipe, ...] = (
    Recipe("none", "nothing", ("portable", "xnnpack", "metal", "mlx", "cuda")),
    Recipe(
        "fpa4w",
        "4-bit unsigned weights per group, float scale and zero, float activations (lowbit)",
        ("metal", "mlx", "portable", "xnnpack"),
        weight_bits=4,
        default_group_size=32,
        group_sizes=_lowbit_group_sizes,
        quantizes_pointwise=True,
        config_factory=_config_fpa4w,
    ),
    Recipe(
        "fpa8w",
        "8-bit unsigned weights per group, float scale and zero, float activations (lowbit); LSTMs too",
        ("portable", "xnnpack"),
        weight_bits=8,
        default_group_size=32,
        group_sizes=_lowbit_group_sizes,
        refusals=tuple(
            (b, "fpa8w runs on fpa_lowbit's CPU kernel only; Metal's shim and MLX take 4-bit weights (fpa4w)")
            for b in ("metal", "mlx")
        )
        + (("cuda", "fpa8w runs on fpa_lowbit's CPU kernel only; on CUDA use 4w or 8w"),),
        quantizes_pointwise=True,
        quantizes_lstm=True,
        config_factory=_config_fpa8w,
    ),
    Recipe(
        "4w",
        "torchao int4 weight-only, tile-packed layout (packing needs CUDA)",
        ("cuda",),
        weight_bits=4,
        default_group_size=32,
        quantizes_pointwise=True,
        config_factory=_config_4w,
    ),
    Recipe(
        "8w",
        "int8 weight-only, per output channel",
        ("portable", "cuda", "metal"),
        weight_bits=8,
        refusals=(
            (
                "xnnpack",
                "executorch 1.5.1 lowers weight-only int8 to XNNPACK with wrong numerics; "
                "use --backend portable for 8w, or 8da8w for XNNPACK",
            ),
        ),
        quantizes_pointwise=True,
        config_factory=_config_8w,
    ),
    Recipe(
        "8da4w",
        "dynamic int8 activations, int4 weights per group",
        ("xnnpack",),
        weight_bits=4,
        dynamic_activations=True,
        default_group_size=32,
        group_size_multiples=(("xnnpack", 32),),
        quantizes_pointwise=True,
        config_factory=_config_8da4w,
    ),
    Recipe(
        "8da8w",
        "dynamic int8 activations, int8 weights per output channel",
        ("xnnpack",),
        weight_bits=8,
        dynamic_activations=True,
        quantizes_pointwise=True,
        config_factory=_config_8da8w,
    ),
)
RECIPES: tuple[str, ...] = tuple(r.name for r in REGISTRY)  # the --quantize choices, in the registry's order
_BY_NAME = {r.name: r for r in REGISTRY}


def get_recipe(name: str) -> Recipe:
    """The registry's recipe ``name``. Raises KeyError for a name not in ``RECIPES``."""
    return _BY_NAME[name]


def recipes_on(backend: str) -> tuple[Recipe, ...]:
    """The recipes ``backend`` lowers correctly, in the registry's order."""
    return tuple(r for r in REGISTRY if r.runs_on(backend))
