"""``parakeet-export`` (and ``examples/parakeet/export_parakeet_tdt.py``): NeMo TDT checkpoint -> one ExecuTorch .pte.

Stages, each printed with its wall time: check arguments and host, load, quantize, export, lower, to_executorch,
serialize.
``DIR/model.pte`` is written atomically (a temporary file renamed into place), so a failure leaves no partial file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

from ..library_log import VERBOSE_HELP, quiet_cli

DEFAULT_MIN_AUDIO_SECONDS = 0.1
DEFAULT_MAX_AUDIO_SECONDS = 60.0


def build_parser() -> argparse.ArgumentParser:
    from .backends import BACKENDS
    from .recipes import EMBEDDING_RECIPES, RECIPES

    p = argparse.ArgumentParser(
        prog="parakeet-export",
        description="Export a NeMo Parakeet TDT checkpoint to one ExecuTorch .pte with methods preprocessor, "
                    "encoder, decoder_step and joint, plus metadata methods.")
    p.add_argument("--model", default="nvidia/parakeet-tdt-0.6b-v3",
                   help="a .nemo file, or a Hugging Face id (nvidia/parakeet-tdt-0.6b-v3, nvidia/parakeet-tdt-0.6b-v2)")
    p.add_argument("--backend", choices=BACKENDS, default="xnnpack", help="ExecuTorch backend (default: xnnpack)")
    p.add_argument("--quantize", choices=RECIPES, default="none",
                   help="quantization recipe for encoder and decoder/joint linears (default: none)")
    p.add_argument("--quantize-encoder", choices=RECIPES, help="override --quantize for the encoder")
    p.add_argument("--quantize-decoder", choices=RECIPES, help="override --quantize for decoder and joint linears")
    p.add_argument("--quantize-embedding", choices=EMBEDDING_RECIPES, default="none",
                   help="weight-only 4w/8w for the prediction network's embedding (default: none)")
    p.add_argument("--group-size", type=int, default=None,
                   help="quantization group size along K (default: 32 for fpa4w/4w/8da4w, per channel for 8w/8da8w;"
                        " 0 = per channel)")
    p.add_argument("--qparams", choices=("hqq", "minmax"), default="hqq", help="fpa4w parameter choice")
    p.add_argument("--strict", action="store_true", help="fail instead of leaving a layer the recipe cannot take "
                                                        "in float")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                   help="float dtype of encoder/decoder/joint (bf16: metal and cuda only)")
    p.add_argument("--output-dir", default="parakeet_tdt_exports", help="writes model.pte and tokenizer.model here")
    p.add_argument("--max-audio-seconds", type=float, default=DEFAULT_MAX_AUDIO_SECONDS,
                   help=f"longest audio the .pte accepts in one call (default {DEFAULT_MAX_AUDIO_SECONDS:g} s)")
    p.add_argument("--no-lowering-shortcuts", action="store_true",
                   help="lower with executorch's stock code, without this package's shortcuts (same .pte, slower)")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    return p


@contextmanager
def _stage(name: str):
    print(f"[{name}] ...", flush=True)
    t0 = time.perf_counter()
    yield
    print(f"[{name}] done in {time.perf_counter() - t0:.1f} s", flush=True)


def run_export(args: argparse.Namespace) -> Path:
    """Run every stage for parsed arguments; returns the .pte path.

    Arguments, host and ``--output-dir`` (created, and written to once) are checked before the model is loaded.
    Raises on any failure, leaving no .pte, and no folder that this call created and nothing was written to.
    """
    from .backends import check_host
    from .output_dir import prepare_output_dir, remove_created
    from .recipes import check_embedding_recipe, check_recipe

    check_host(args.backend, args.dtype)
    plan = {"encoder": args.quantize_encoder or args.quantize, "decoder": args.quantize_decoder or args.quantize}
    for recipe in plan.values():
        check_recipe(recipe, args.backend, args.group_size)
    check_embedding_recipe(args.quantize_embedding, args.backend)
    if not DEFAULT_MIN_AUDIO_SECONDS < args.max_audio_seconds <= 600:
        raise ValueError(f"--max-audio-seconds must be in ({DEFAULT_MIN_AUDIO_SECONDS}, 600], "
                         f"got {args.max_audio_seconds}")
    out_dir = Path(args.output_dir)
    created = prepare_output_dir(out_dir)
    try:
        return _export_stages(args, plan, out_dir)
    except BaseException:
        remove_created(created)
        raise


def _export_stages(args: argparse.Namespace, plan: dict[str, str], out_dir: Path) -> Path:
    import torch

    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower

    from .backends import partitioners
    from .load import load_nemo_model, read_metadata
    from .program import export_methods
    from .xnnpack.shortcuts import faster_lowering, faster_tracing

    shortcuts = not args.no_lowering_shortcuts
    with _stage("load"):
        model = load_nemo_model(args.model)
        meta = read_metadata(model, DEFAULT_MIN_AUDIO_SECONDS, args.max_audio_seconds)
    print(f"  supported audio: {meta.min_audio_samples / meta.sample_rate:g} s to "
          f"{meta.max_audio_samples / meta.sample_rate:g} s per call (shorter input is zero-padded by the runners)")
    if any(r != "none" for r in plan.values()) or args.quantize_embedding != "none":
        with _stage("quantize"):
            report = _quantize(model, plan, args)
    else:
        report = {"parts": {part: {"recipe": "none"} for part in plan}}
    with _stage("export"):
        dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
        rewrites: dict = {}
        with (faster_tracing(shortcuts=shortcuts) if args.backend == "xnnpack" else nullcontext()):
            programs = export_methods(model, meta, dtype=dtype, device="cuda" if args.backend == "cuda" else "cpu",
                                      xnnpack_encoder=args.backend == "xnnpack", encoder_report=rewrites)
        if rewrites.get("positional_tables"):
            print(f"  encoder: linear_pos precomputed over the relative-position table in "
                  f"{rewrites['positional_tables']} layers ({rewrites['positional_table_mb']:.1f} MB of constants; "
                  f"no positional GEMM at run time)")
        elif rewrites.get("positional_table_skipped"):
            print(f"  encoder: linear_pos runs at run time: {rewrites['positional_table_skipped']}")
    report["encoder_rewrites"] = rewrites
    with _stage(f"lower ({args.backend})"):
        parts, programs = partitioners(args.backend, programs)
        # The shortcuts are checked (tests/test_lowering_speedups.py) to give a byte-identical .pte on XNNPACK.
        with (faster_lowering(programs, parts, shortcuts=shortcuts) if args.backend == "xnnpack" else nullcontext()):
            edge = to_edge_transform_and_lower(
                programs, partitioner=parts, constant_methods=meta.constant_methods(),
                compile_config=EdgeCompileConfig(_check_ir_validity=False))
    with _stage("to_executorch (memory planning, emit)"):
        with (faster_tracing(shortcuts=shortcuts) if args.backend == "xnnpack" else nullcontext()):
            program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=True))
    with _stage("serialize"):
        pte = out_dir / "model.pte"
        _write_atomically(pte, program.buffer)
        if getattr(program, "_tensor_data", None):
            program.write_tensor_data_to_file(str(out_dir))
        _write_atomically(out_dir / "tokenizer.model", model.tokenizer.tokenizer.serialized_model_proto())
    report["pte_bytes"] = pte.stat().st_size
    report["backend"] = args.backend
    _write_atomically(out_dir / "export_report.json", (json.dumps(report, indent=2) + "\n").encode())
    print(f"wrote {pte} ({pte.stat().st_size / 1e6:.1f} MB), {out_dir / 'tokenizer.model'} and "
          f"{out_dir / 'export_report.json'}")
    return pte


def _quantize(model, plan: dict[str, str], args) -> dict:
    from .recipes import quantize_model

    report = quantize_model(model, plan["encoder"], plan["decoder"], args.group_size, args.qparams, args.strict,
                            args.quantize_embedding)
    for part, r in report["parts"].items():
        gs = r["group_size"] or "per channel"
        print(f"  {part}: {r['recipe']}, group size {gs}: quantized {r['quantized']} of {r['linear_layers']} "
              f"layers, weights {r['weight_bytes_before'] / 1e6:.2f} MB -> {r['weight_bytes_after'] / 1e6:.2f} MB")
        for reason in list(r["skipped"].values()) + r["not_covered"]:
            print(f"    left in float: {reason}")
    return report


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; an exported model is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@quiet_cli("parakeet-export")
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .backends import BackendError
    from .load import ModelLoadError
    from .recipes import RecipeError

    try:
        run_export(args)
    except (BackendError, ModelLoadError, RecipeError, ValueError) as exc:
        print(f"parakeet-export: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. the disk filled up while serializing; _write_atomically left no partial file
        print(f"parakeet-export: error: cannot write the export into {args.output_dir}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
