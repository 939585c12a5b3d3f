"""What an export did, as frozen dataclasses: ``ExportReport`` (returned by ``api.export_pte``) and its parts.

``ExportReport.as_json()`` is the content of ``export_report.json`` that ``parakeet-export`` writes (the file's keys
and values are those of the first exports; CI keeps the file as an artifact).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..pte_format import ModelMetadata


@dataclass(frozen=True)
class StageTiming:
    """One export stage: ``name`` as printed (``load``, ``quantize``, ``export``, ``lower (xnnpack)``,
    ``to_executorch (memory planning, emit)``, ``serialize``) and its wall time in ``seconds``."""

    name: str
    seconds: float


@dataclass(frozen=True)
class SkippedLayer:
    """A linear the recipe could not take, left in float: its module name and the shape rule it breaks."""

    layer: str
    reason: str


@dataclass(frozen=True)
class PartQuantization:
    """What one part of the model (``encoder``: encoder + joint.enc; ``decoder``: prediction network, joint.pred
    and joint_net; ``embedding``: the prediction network's embedding) got from its recipe.

    Attributes:
        part: "encoder", "decoder" or "embedding".
        recipe: the recipe's name (``recipe_registry.RECIPES``; embedding: 4w or 8w).
        group_size: weights per quantization group along K (0 = per output channel); None when no recipe ran.
        linear_layers: ``nn.Linear`` layers in the part (after 1x1 convolutions became linears, for the recipes
            that quantize them).
        quantized: how many of them were quantized.
        weight_bytes_before, weight_bytes_after: storage bytes of those linears' weights before and after
            (quantized: the packed integers plus scales and zeros).
        skipped: the linears left in float, each with the rule it breaks.
        not_covered: one line per kind of other weighted layer that stays float (LSTMs, depthwise and subsampling
            convolutions, 1x1 convolutions under a recipe that keeps them), with why.
    """

    part: str
    recipe: str
    group_size: int | None = None
    linear_layers: int = 0
    quantized: int = 0
    weight_bytes_before: int = 0
    weight_bytes_after: int = 0
    skipped: tuple[SkippedLayer, ...] = ()
    not_covered: tuple[str, ...] = ()

    @classmethod
    def from_part_report(cls, part: str, report) -> PartQuantization:
        """From ``recipes.PartReport`` (what ``recipes.quantize_part`` fills in)."""
        return cls(
            part,
            report.recipe,
            report.group_size,
            report.linear_layers,
            report.quantized,
            report.weight_bytes_before,
            report.weight_bytes_after,
            tuple(SkippedLayer(name, why) for name, why in report.skipped.items()),
            tuple(report.not_covered),
        )

    @property
    def left_float(self) -> tuple[str, ...]:
        """Every reason a weight of this part stays float, one line each (as ``parakeet-export`` prints them)."""
        return tuple(s.reason for s in self.skipped) + self.not_covered

    def as_json(self) -> dict:
        return {
            "recipe": self.recipe,
            "group_size": self.group_size,
            "linear_layers": self.linear_layers,
            "quantized": self.quantized,
            "weight_bytes_before": self.weight_bytes_before,
            "weight_bytes_after": self.weight_bytes_after,
            "skipped": {s.layer: s.reason for s in self.skipped},
            "not_covered": list(self.not_covered),
        }


@dataclass(frozen=True)
class QuantizationSummary:
    """The quantize stage's outcome.

    Attributes:
        applied: whether the quantize stage ran (False: every recipe was ``none``; ``parts`` then hold only the
            recipe name, no counts).
        parts: encoder, decoder, and the embedding when it was quantized, in that order.
    """

    applied: bool
    parts: tuple[PartQuantization, ...]

    def part(self, name: str) -> PartQuantization:
        """The part called ``name``; raises KeyError if the export has none of that name."""
        for p in self.parts:
            if p.part == name:
                return p
        raise KeyError(name)

    @property
    def linears_quantized(self) -> tuple[int, int]:
        """(quantized linears, linear layers) summed over the parts."""
        return sum(p.quantized for p in self.parts), sum(p.linear_layers for p in self.parts)

    def as_json(self) -> dict:
        if not self.applied:
            return {p.part: {"recipe": p.recipe} for p in self.parts}
        return {p.part: p.as_json() for p in self.parts}


@dataclass(frozen=True)
class EncoderRewrites:
    """What the XNNPACK encoder rewrite (``xnnpack.encoder_forwards.xnnpack_friendly_encoder``) precomputed.

    Attributes:
        positional_tables: attention layers whose ``linear_pos`` projection was precomputed over the relative
            position table (no positional GEMM at run time).
        positional_table_mb: megabytes (1e6 bytes) of constants those tables add to the .pte.
        positional_table_skipped: why no table was precomputed (None when some were).
        subsampling_chunks: time chunks the subsampling's conv stack is computed in (1: one pass, fits the budget;
            0: not chunked, see ``subsampling_chunks_skipped``).
        subsampling_chunks_skipped: why the stack is not chunked (None when it is).
        attention_query_blocks: query blocks each relative-position attention layer is computed in (1: one pass;
            ``xnnpack.attention_blocks``).
    """

    positional_tables: int = 0
    positional_table_mb: float = 0.0
    positional_table_skipped: str | None = None
    subsampling_chunks: int = 0
    subsampling_chunks_skipped: str | None = None
    attention_query_blocks: int = 1

    @classmethod
    def from_report(cls, report: dict) -> EncoderRewrites | None:
        """From the rewrite's ``report`` dict; None when the rewrite did not run (empty dict)."""
        if not report:
            return None
        return cls(
            report.get("positional_tables", 0),
            report.get("positional_table_mb", 0.0),
            report.get("positional_table_skipped"),
            report.get("subsampling_chunks", 0),
            report.get("subsampling_chunks_skipped"),
            report.get("attention_query_blocks", 1),
        )

    def as_json(self) -> dict:
        return {
            "positional_tables": self.positional_tables,
            "positional_table_mb": self.positional_table_mb,
            "positional_table_skipped": self.positional_table_skipped,
            "subsampling_chunks": self.subsampling_chunks,
            "subsampling_chunks_skipped": self.subsampling_chunks_skipped,
            "attention_query_blocks": self.attention_query_blocks,
        }


@dataclass(frozen=True)
class ExportReport:
    """The result of ``export_pte``.

    Attributes:
        pte_path: the written ``model.pte``.
        tokenizer_path: the written ``tokenizer.model`` (the checkpoint's SentencePiece model, as is).
        backend: the backend lowered to ("portable", "xnnpack", "metal", "cuda").
        dtype: float dtype of encoder/decoder/joint ("fp32" or "bf16").
        pte_bytes: size of ``model.pte`` in bytes.
        metadata: the constants stored in the .pte (``pte_format.ModelMetadata``: sample rate, supported audio
            range in samples, ...).
        stages: each stage's wall time, in the order run.
        quantization: what each part got from its recipe, and what stays float and why.
        encoder_rewrites: what the XNNPACK encoder rewrite precomputed (None on other backends).
    """

    pte_path: Path
    tokenizer_path: Path
    backend: str
    dtype: str
    pte_bytes: int
    metadata: ModelMetadata
    stages: tuple[StageTiming, ...]
    quantization: QuantizationSummary
    encoder_rewrites: EncoderRewrites | None = None

    @property
    def output_dir(self) -> Path:
        """The folder holding ``model.pte`` and ``tokenizer.model``."""
        return self.pte_path.parent

    @property
    def total_seconds(self) -> float:
        """Wall time of all stages together, in seconds."""
        return sum(s.seconds for s in self.stages)

    def stage_seconds(self) -> dict[str, float]:
        """Stage name -> wall seconds."""
        return {s.name: s.seconds for s in self.stages}

    def as_json(self) -> dict:
        """The content of ``export_report.json``: ``{"parts": {part: ...}, "encoder_rewrites": {...},
        "pte_bytes": int, "backend": str}``, the same for the same model and options (``parakeet-export`` adds
        the run's ``stage_seconds``, and ``quantize_auto`` when it resolved ``--quantize auto``)."""
        return {
            "parts": self.quantization.as_json(),
            "encoder_rewrites": {} if self.encoder_rewrites is None else self.encoder_rewrites.as_json(),
            "pte_bytes": self.pte_bytes,
            "backend": self.backend,
        }
