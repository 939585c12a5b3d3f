"""Export as a library call: ``export_pte(source, ExportOptions(...)) -> ExportReport``.

Stages, each timed (and reported through ``progress`` as ``[stage] ...`` / ``[stage] done in X s``): check options
and host, load, quantize, export, lower, to_executorch, serialize. ``DIR/model.pte`` and ``DIR/tokenizer.model`` are
written atomically (a temporary file renamed into place), so a failure leaves no partial file. ``parakeet-export``
(``cli.py``) is this call plus argument parsing, printing and ``export_report.json``.

>>> from parakeet_executorch.export.api import ExportOptions, export_pte
>>> report = export_pte("model.nemo", ExportOptions(backend="xnnpack", quantize="8da4w",
...                                                 output_dir="out"))  # doctest: +SKIP
>>> report.pte_path, report.pte_bytes, report.quantization.linears_quantized  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from .report import EncoderRewrites, ExportReport, PartQuantization, QuantizationSummary, StageTiming

DEFAULT_MIN_AUDIO_SECONDS = 0.1
# One pass takes up to 40 s; longer files go through buffered windows of that length. The encoder's memory plan and
# XNNPACK's workspace grow with the bound: at 40 s both runners stay under 1.2x the .pte's size at full size (at
# 60 s the Python runner did not), and 10 minutes in 40 s windows ran at 0.9x a 60 s single pass
# (benchmarks/results/longform_full/python_native/).
DEFAULT_MAX_AUDIO_SECONDS = 40.0
MAX_AUDIO_SECONDS_LIMIT = 600.0

Progress = Callable[[str], None]
QPARAMS = ("hqq", "minmax")  # fpa4w's and fpa8w's parameter choices (fpa_lowbit's algorithms)
QPARAMS_RECIPES = ("fpa4w", "fpa8w")


@dataclass(frozen=True)
class ExportOptions:
    """How to export (each field is the ``parakeet-export`` flag of the same name).

    Attributes:
        backend: "portable", "xnnpack", "metal" or "mlx" (macOS arm64 only) or "cuda" (an NVIDIA GPU at export
            time).
        quantize: recipe for encoder and decoder/joint linears (``recipe_registry.RECIPES``).
        quantize_encoder, quantize_decoder: override ``quantize`` for one part (None: ``quantize``).
        quantize_embedding: "none", "4w" or "8w" for the prediction network's embedding (portable only).
        group_size: weights per quantization group along K; None = each recipe's default, 0 = per channel.
        qparams: fpa4w's and fpa8w's parameter choice, "hqq" or "minmax".
        strict: fail instead of leaving a layer the recipe cannot take in float.
        dtype: float dtype of encoder/decoder/joint, "fp32" or "bf16" (metal, mlx and cuda only).
        output_dir: folder for ``model.pte`` and ``tokenizer.model`` (created if missing).
        max_audio_seconds: longest audio in seconds the .pte accepts in one call, in (0.1, 600].
        lowering_shortcuts: on XNNPACK, use ``export/xnnpack/shortcuts`` (same bytes, faster lowering; they turn
            themselves off on an executorch other than the one they were written against); False: stock lowering.
    """

    backend: str = "xnnpack"
    quantize: str = "none"
    quantize_encoder: str | None = None
    quantize_decoder: str | None = None
    quantize_embedding: str = "none"
    group_size: int | None = None
    qparams: str = "hqq"
    strict: bool = False
    dtype: str = "fp32"
    output_dir: str | Path = "parakeet_tdt_exports"
    max_audio_seconds: float = DEFAULT_MAX_AUDIO_SECONDS
    lowering_shortcuts: bool = True

    @property
    def plan(self) -> dict[str, str]:
        """The recipe of each part: ``{"encoder": ..., "decoder": ...}``."""
        return {"encoder": self.quantize_encoder or self.quantize, "decoder": self.quantize_decoder or self.quantize}

    @property
    def uses_qparams(self) -> bool:
        """Whether a part's recipe takes ``qparams`` (fpa4w, fpa8w)."""
        return any(recipe in QPARAMS_RECIPES for recipe in self.plan.values())

    @property
    def quantizes_anything(self) -> bool:
        """Whether any part (the embedding included) is quantized."""
        return any(recipe != "none" for recipe in self.plan.values()) or self.quantize_embedding != "none"

    def unused_qparams_error(self, qparams: str) -> str:
        """The message for ``--qparams qparams`` given where no part uses it (``uses_qparams`` is False)."""
        return (
            f"--qparams {qparams} applies to {' and '.join(QPARAMS_RECIPES)} only, and no part uses them "
            f"({self._plan_text()}): leave it out"
        )

    def _plan_text(self) -> str:
        return f"encoder {self.plan['encoder']}, decoder and joint {self.plan['decoder']}"

    def check(self) -> None:
        """Check the options and this host without loading anything (what ``export_pte`` does first).

        Raises:
            BackendError: unknown backend, bf16 on a CPU backend, or a backend this host cannot lower.
            RecipeError: unknown recipe, a recipe the backend refuses, or a group size it cannot take.
            ValueError: ``max_audio_seconds`` outside (0.1, 600]; ``qparams`` other than "hqq" or "minmax", or
                "minmax" where no part uses fpa4w or fpa8w; a ``group_size`` where nothing is quantized; an empty
                ``output_dir``.
        """
        from .backends import check_host
        from .recipes import check_embedding_recipe, check_recipe

        check_host(self.backend, self.dtype)
        for part, recipe in self.plan.items():
            given = self.quantize_encoder if part == "encoder" else self.quantize_decoder
            check_recipe(recipe, self.backend, self.group_size, f"--quantize-{part}" if given else "--quantize")
        check_embedding_recipe(self.quantize_embedding, self.backend)
        if self.qparams not in QPARAMS:
            raise ValueError(f"--qparams must be one of {', '.join(QPARAMS)}, got {self.qparams!r}")
        if self.qparams != "hqq" and not self.uses_qparams:
            raise ValueError(self.unused_qparams_error(self.qparams))
        if self.group_size is not None and not self.quantizes_anything:
            raise ValueError(
                f"--group-size {self.group_size} is for a quantization recipe, and nothing is quantized "
                f"({self._plan_text()}): leave it out, or name a recipe with --quantize"
            )
        if str(self.output_dir) == "":
            raise ValueError("--output-dir is empty: name a folder (default: parakeet_tdt_exports)")
        if not DEFAULT_MIN_AUDIO_SECONDS < self.max_audio_seconds <= MAX_AUDIO_SECONDS_LIMIT:
            raise ValueError(
                f"--max-audio-seconds must be in ({DEFAULT_MIN_AUDIO_SECONDS}, "
                f"{MAX_AUDIO_SECONDS_LIMIT:g}], got {self.max_audio_seconds}"
            )


def export_pte(
    source: str | Path, options: ExportOptions = ExportOptions(), *, progress: Progress | None = None
) -> ExportReport:
    """Export a NeMo Parakeet TDT checkpoint to ``options.output_dir/model.pte`` (+ ``tokenizer.model``).

    Args:
        source: a ``.nemo`` file or a Hugging Face id (e.g. ``nvidia/parakeet-tdt-0.6b-v3``, loaded through NeMo's
            ``ASRModel.from_pretrained``).
        options: backend, quantization, dtype, output folder, supported audio range.
        progress: receives each progress line (stage starts and ends with their wall time, the supported audio
            range, what each part was quantized to and what stays float); None = silent.
    Returns:
        ``ExportReport``: paths, sizes, stage timings, the quantization summary.
    Raises:
        BackendError, RecipeError, ValueError: bad options or host (``ExportOptions.check``), before loading.
        ModelLoadError: ``source`` is a missing file or not a .nemo archive (``load.check_model_source``), before
            loading.
        OutputDirError: ``output_dir`` cannot be created or written (a ValueError), before loading.
        ModelLoadError: the checkpoint is missing, unreachable or not a TDT model.
        RecipeError: with ``strict``, a layer the recipe cannot take.
        OSError: writing the files failed (no partial file is left).
    Options, host and ``output_dir`` (created, and written to once) are checked before the model is loaded. On any
    failure no .pte is left, nor a folder that this call created and nothing was written to.
    """
    from .load import check_model_source
    from .output_dir import prepare_output_dir, remove_created

    options.check()
    out_dir = Path(options.output_dir)
    created = prepare_output_dir(out_dir)
    try:
        check_model_source(str(source))
        return _Export(str(source), options, out_dir, progress or (lambda line: None)).run()
    except BaseException:
        remove_created(created)
        raise


class _Export:
    """The stages of one export; ``stages`` collects their timings."""

    def __init__(self, source: str, options: ExportOptions, out_dir: Path, progress: Progress):
        self.source, self.options, self.out_dir, self.say = source, options, out_dir, progress
        self.stages: list[StageTiming] = []

    @contextmanager
    def _stage(self, name: str):
        self.say(f"[{name}] ...")
        t0 = time.perf_counter()
        yield
        seconds = time.perf_counter() - t0
        self.stages.append(StageTiming(name, seconds))
        self.say(f"[{name}] done in {seconds:.1f} s")

    def run(self) -> ExportReport:
        import torch
        from executorch.exir import to_edge_transform_and_lower

        from .backends import lowering_configs, partitioners
        from .load import load_nemo_model, read_metadata
        from .output_dir import write_atomically
        from .program import export_methods
        from .xnnpack.node_order import keep_node_order
        from .xnnpack.shortcuts import faster_lowering, faster_tracing

        opts, plan = self.options, self.options.plan
        xnnpack = opts.backend == "xnnpack"
        with self._stage("load"):
            model = load_nemo_model(self.source)
            meta = read_metadata(model, DEFAULT_MIN_AUDIO_SECONDS, opts.max_audio_seconds)
        self.say(
            f"  supported audio: {meta.min_audio_samples / meta.sample_rate:g} s to "
            f"{meta.max_audio_samples / meta.sample_rate:g} s per call (shorter input is zero-padded by the "
            f"runners)"
        )
        if any(r != "none" for r in plan.values()) or opts.quantize_embedding != "none":
            with self._stage("quantize"):
                quantization = self._quantize(model, plan)
        else:
            quantization = QuantizationSummary(False, tuple(PartQuantization(part, r) for part, r in plan.items()))
        if opts.backend == "mlx":
            from fpa_lowbit.torchao_intx import convert_linears_to_intx_unpacked

            converted = convert_linears_to_intx_unpacked(model)
            if converted:
                self.say(f"  mlx: {len(converted)} low-bit linears as torchao dequantize_affine + linear")
        with self._stage("export"):
            dtype = torch.bfloat16 if opts.dtype == "bf16" else torch.float32
            rewrites: dict = {}
            with faster_tracing(shortcuts=opts.lowering_shortcuts) if xnnpack else nullcontext():
                programs = export_methods(
                    model,
                    meta,
                    dtype=dtype,
                    device="cuda" if opts.backend == "cuda" else "cpu",
                    xnnpack_encoder=xnnpack,
                    encoder_report=rewrites,
                )
            if rewrites.get("positional_tables"):
                self.say(
                    f"  encoder: linear_pos precomputed over the relative-position table in "
                    f"{rewrites['positional_tables']} layers ({rewrites['positional_table_mb']:.1f} MB of "
                    f"constants; no positional GEMM at run time)"
                )
            elif rewrites.get("positional_table_skipped"):
                self.say(f"  encoder: linear_pos runs at run time: {rewrites['positional_table_skipped']}")
            if rewrites.get("subsampling_chunks", 0) > 1:
                self.say(
                    f"  encoder: subsampling in {rewrites['subsampling_chunks']} time chunks (its largest value at the "
                    f"bound would otherwise size XNNPACK's workspace)"
                )
            elif rewrites.get("subsampling_chunks_skipped"):
                self.say(f"  encoder: subsampling in one pass: {rewrites['subsampling_chunks_skipped']}")
            if rewrites.get("attention_query_blocks", 1) > 1:
                self.say(
                    f"  encoder: attention in {rewrites['attention_query_blocks']} query blocks (a layer's scores at "
                    f"the bound would otherwise size XNNPACK's workspace and the memory plan)"
                )
        with self._stage(f"lower ({opts.backend})"):
            parts, programs = partitioners(opts.backend, programs)
            edge_config, backend_config = lowering_configs(opts.backend)
            # The shortcuts are checked (tests/test_lowering_speedups.py) to give a byte-identical .pte on XNNPACK.
            # keep_node_order: XNNPACK runs a delegate's ops, and plans its memory, in the order they are cut in.
            with (
                keep_node_order() if xnnpack else nullcontext(),
                faster_lowering(programs, parts, shortcuts=opts.lowering_shortcuts) if xnnpack else nullcontext(),
            ):
                edge = to_edge_transform_and_lower(
                    programs,
                    partitioner=parts,
                    constant_methods=meta.constant_methods(),
                    compile_config=edge_config,
                )
        with (
            self._stage("to_executorch (memory planning, emit)"),
            faster_tracing(shortcuts=opts.lowering_shortcuts) if xnnpack else nullcontext(),
        ):
            program = edge.to_executorch(backend_config)
        with self._stage("serialize"):
            pte, tokenizer = self.out_dir / "model.pte", self.out_dir / "tokenizer.model"
            write_atomically(pte, program.buffer)
            if getattr(program, "_tensor_data", None):
                program.write_tensor_data_to_file(str(self.out_dir))
            write_atomically(tokenizer, model.tokenizer.tokenizer.serialized_model_proto())
        return ExportReport(
            pte_path=pte,
            tokenizer_path=tokenizer,
            backend=opts.backend,
            dtype=opts.dtype,
            pte_bytes=pte.stat().st_size,
            metadata=meta,
            stages=tuple(self.stages),
            quantization=quantization,
            encoder_rewrites=EncoderRewrites.from_report(rewrites),
        )

    def _quantize(self, model, plan: dict[str, str]) -> QuantizationSummary:
        from .recipes import quantize_parts

        opts = self.options
        reports = quantize_parts(
            model, plan["encoder"], plan["decoder"], opts.group_size, opts.qparams, opts.strict, opts.quantize_embedding
        )
        parts = tuple(PartQuantization.from_part_report(part, r) for part, r in reports.items())
        for p in parts:
            grouping = "" if p.recipe == "none" else f", group size {p.group_size or 'per channel'}"
            self.say(
                f"  {p.part}: {p.recipe}{grouping}: quantized {p.quantized} of {p.linear_layers} "
                f"layers, weights {p.weight_bytes_before / 1e6:.2f} MB -> {p.weight_bytes_after / 1e6:.2f} MB"
            )
            for reason in p.left_float:
                self.say(f"    left in float: {reason}")
        return QuantizationSummary(True, parts)
