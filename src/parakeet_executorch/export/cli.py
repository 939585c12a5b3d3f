"""``parakeet-export`` (and ``examples/parakeet/export_parakeet_tdt.py``): NeMo TDT checkpoint -> one ExecuTorch .pte.

Parses the command line into ``api.ExportOptions``, runs ``api.export_pte`` (stages, each printed with its wall time:
check arguments and host, load, quantize, export, lower, to_executorch, serialize), and writes the report to
``DIR/export_report.json``. ``DIR/model.pte`` is written atomically, so a failure leaves no partial file.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from contextlib import contextmanager

from ..cli_parser import ArgumentParser
from ..library_log import VERBOSE_HELP, quiet_cli
from .api import DEFAULT_MAX_AUDIO_SECONDS, QPARAMS, ExportOptions


def build_parser() -> argparse.ArgumentParser:
    from .backends import BACKENDS
    from .recipe_registry import RECIPES
    from .recipes import EMBEDDING_RECIPES

    p = ArgumentParser(
        prog="parakeet-export",
        description="Export a NeMo Parakeet TDT checkpoint to one ExecuTorch .pte with methods preprocessor, "
        "encoder, decoder_step and joint, plus metadata methods.",
    )
    p.add_argument(
        "--model",
        default="nvidia/parakeet-tdt-0.6b-v3",
        help="a .nemo file, or a Hugging Face id (nvidia/parakeet-tdt-0.6b-v3, nvidia/parakeet-tdt-0.6b-v2)",
    )
    p.add_argument("--backend", choices=BACKENDS, default="xnnpack", help="ExecuTorch backend (default: xnnpack)")
    p.add_argument(
        "--quantize",
        choices=(*RECIPES, "auto"),
        default="none",
        help="quantization recipe for encoder and decoder/joint linears (default: none); auto: with --backend "
        "xnnpack, the fastest recipe for this machine's CPU (on x86 with AVX2 an 8da8w encoder and fpa8w "
        "decoder/joint, with or without VNNI; fp32 below AVX2; 8da4w on arm64)",
    )
    p.add_argument("--quantize-encoder", choices=RECIPES, help="override --quantize for the encoder")
    p.add_argument("--quantize-decoder", choices=RECIPES, help="override --quantize for decoder and joint linears")
    p.add_argument(
        "--quantize-embedding",
        choices=EMBEDDING_RECIPES,
        default="none",
        help="weight-only 4w/8w for the prediction network's embedding (default: none)",
    )
    p.add_argument(
        "--group-size",
        type=int,
        default=None,
        help="quantization group size along K, for every quantized part (default: 32 for fpa4w/fpa8w/4w/8da4w, "
        "per channel for 8w/8da8w; 0 = per channel, which fpa4w and fpa8w do not take)",
    )
    p.add_argument(
        "--qparams",
        choices=QPARAMS,
        default=None,
        help="fpa4w/fpa8w quantization parameters: hqq (default) or minmax; an error for other recipes",
    )
    p.add_argument(
        "--strict", action="store_true", help="fail instead of leaving a layer the recipe cannot take in float"
    )
    p.add_argument(
        "--dtype",
        choices=("fp32", "bf16"),
        default="fp32",
        help="float dtype of encoder/decoder/joint (bf16: metal, mlx and cuda only)",
    )
    p.add_argument("--output-dir", default="parakeet_tdt_exports", help="writes model.pte and tokenizer.model here")
    p.add_argument(
        "--max-audio-seconds",
        type=float,
        default=DEFAULT_MAX_AUDIO_SECONDS,
        help=f"longest audio the .pte accepts in one call (default {DEFAULT_MAX_AUDIO_SECONDS:g} s)",
    )
    p.add_argument(
        "--no-lowering-shortcuts",
        action="store_true",
        help="lower with executorch's stock code, without this package's shortcuts (same .pte, slower)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    return p


def options_from_args(args: argparse.Namespace) -> ExportOptions:
    """The ``ExportOptions`` of parsed ``parakeet-export`` arguments."""
    return ExportOptions(
        backend=args.backend,
        quantize=args.quantize,
        quantize_encoder=args.quantize_encoder,
        quantize_decoder=args.quantize_decoder,
        quantize_embedding=args.quantize_embedding,
        group_size=args.group_size,
        qparams=args.qparams or "hqq",
        strict=args.strict,
        dtype=args.dtype,
        output_dir=args.output_dir,  # a str: Path("") would be the current folder
        max_audio_seconds=args.max_audio_seconds,
        lowering_shortcuts=not args.no_lowering_shortcuts,
    )


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the export's clean-up runs (the default action kills at once)."""


def _terminate(signum, frame) -> None:
    raise _Terminated()


@contextmanager
def _sigterm_cleans_up():
    """While active (in the main thread), SIGTERM raises ``_Terminated``, so that a terminated export cleans up as
    an interrupted one does (``export_pte`` removes the folder it created); the previous handler comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C raises KeyboardInterrupt even where the process started with SIGINT ignored or at its default (a
    # background job of a non-interactive shell: CI), where it would otherwise be ignored or kill without clean-up.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _print(line: str) -> None:
    print(line, flush=True)


def resolve_cpu_recipe(args: argparse.Namespace, cpu) -> list[str]:
    """Replace ``--quantize auto`` in ``args`` by ``cpu_recipe.recommended_cpu_recipe(cpu)``'s recipe (and its
    decoder recipe, where it has one and ``--quantize-decoder`` was not given); return the
    lines to print (the choice and its reason, or a warning when an XNNPACK recipe was measured slower than fp32
    on such a CPU).

    Raises:
        ValueError: ``--quantize auto`` with a backend other than xnnpack, or with a ``--group-size`` that the
            decoder recipe it picks cannot take.
    """
    from .cpu_recipe import recommended_cpu_recipe, slow_recipe_warning
    from .recipe_registry import get_recipe

    lines = []
    if args.quantize == "auto":
        if args.backend != "xnnpack":
            raise ValueError(
                f"--quantize auto picks an XNNPACK CPU recipe; with --backend {args.backend} name one "
                "(README: Quantization)"
            )
        advice = recommended_cpu_recipe(cpu)
        args.quantize = advice.recipe
        kept = [
            flag
            for flag, v in (
                ("--quantize-encoder", args.quantize_encoder),
                ("--quantize-decoder", args.quantize_decoder),
            )
            if v
        ]
        if advice.decoder_recipe and args.quantize_decoder is None:  # a --quantize-decoder given is kept
            args.quantize_decoder = advice.decoder_recipe
            group_size = getattr(args, "group_size", None)
            problem = get_recipe(advice.decoder_recipe).group_size_error(args.backend, group_size)
            if group_size is not None and problem:
                raise ValueError(
                    f"--quantize auto picks {advice.decoder_recipe} for the decoder and joint on this CPU, and "
                    f"{problem}: leave out --group-size, or name the decoder's recipe with --quantize-decoder"
                )
        # The line names what each part will get, the user's per-part choices included.
        encoder = args.quantize_encoder or args.quantize
        decoder = args.quantize_decoder or args.quantize
        shown = {"none": "fp32"}
        encoder, decoder = shown.get(encoder, encoder), shown.get(decoder, decoder)
        chosen = encoder if encoder == decoder else f"{encoder} encoder, {decoder} decoder and joint"
        also = f"; kept your {' and '.join(kept)}" if kept else ""
        lines.append(f"quantize auto: {chosen} ({advice.reason}{also})")
    recipe = args.quantize_encoder or args.quantize
    if args.backend == "xnnpack" and recipe:
        warning = slow_recipe_warning(recipe, cpu)
        if warning:
            lines.append(f"warning: {warning}")
    return lines


@quiet_cli("parakeet-export")
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .api import export_pte
    from .backends import BackendError
    from .cpu_recipe import host_cpu_features
    from .load import ModelLoadError
    from .output_dir import write_atomically
    from .recipes import RecipeError

    try:
        asked_auto, cpu = args.quantize == "auto", host_cpu_features()
        lines = resolve_cpu_recipe(args, cpu)
        for line in lines:
            print(line, file=sys.stderr if line.startswith("warning") else sys.stdout, flush=True)
        options = options_from_args(args)
        if args.qparams is not None and not options.uses_qparams:  # "hqq" given explicitly: check() allows it
            raise ValueError(options.unused_qparams_error(args.qparams))
        with _sigterm_cleans_up():
            report = export_pte(args.model, options, progress=_print)
        out_dir = report.output_dir
        content = report.as_json()
        content["stage_seconds"] = {name: round(seconds, 3) for name, seconds in report.stage_seconds().items()}
        if asked_auto:  # what auto saw and chose, for whoever reads the folder later
            content["quantize_auto"] = {"cpu": cpu.describe(), "choice": lines[0]}
        write_atomically(out_dir / "export_report.json", (json.dumps(content, indent=2) + "\n").encode())
    except (BackendError, ModelLoadError, RecipeError, ValueError) as exc:
        print(f"parakeet-export: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("parakeet-export: interrupted; no .pte was written", file=sys.stderr)
        return 130
    except _Terminated:
        print("parakeet-export: terminated; no .pte was written", file=sys.stderr)
        return 143
    except OSError as exc:  # e.g. the disk filled up while serializing; write_atomically left no partial file
        print(f"parakeet-export: error: cannot write the export into {args.output_dir}: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {report.pte_path} ({report.pte_bytes / 1e6:.1f} MB), {report.tokenizer_path} and "
        f"{out_dir / 'export_report.json'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
