"""``parakeet-export --quantize auto``: the XNNPACK recipe follows the CPU's int8 dot-product support, and a recipe
that was measured slower than fp32 on the host's kind of CPU gets a warning naming the faster one.

The expected choices are the measured table of ``export/cpu_recipe.py``'s docstring (issue: fastest CPU recipe per
ISA): with VNNI the 8da8w encoder (1x1 convolutions quantized) beat 8da4w's, and fpa8w decoder/joint calls beat
fp32's and 8da8w's while keeping the trained demo model's WER (8da4w's did not); on AVX2 + FMA without VNNI
8da4w was slower than fp32 and 8da8w faster.
"""

from __future__ import annotations

import argparse
import json

import pytest

from parakeet_executorch.export import cli as export_cli
from parakeet_executorch.export.cpu_recipe import (
    CpuFeatures,
    host_cpu_features,
    parse_cpuinfo,
    recommended_cpu_recipe,
    slow_recipe_warning,
)

XEON_VNNI = CpuFeatures("x86_64", frozenset({"sse2", "avx2", "fma", "avx512f", "avx512_vnni"}))
ALDER_LAKE = CpuFeatures("x86_64", frozenset({"avx2", "fma", "avx_vnni"}))
EPYC_AVX2 = CpuFeatures("x86_64", frozenset({"sse2", "avx", "avx2", "fma"}))
OLD_X86 = CpuFeatures("x86_64", frozenset({"sse2", "sse4_2", "avx"}))
APPLE = CpuFeatures("arm64")


@pytest.mark.parametrize(
    "cpu, recipe, decoder_recipe, measured",
    [
        (XEON_VNNI, "8da8w", "fpa8w", True),
        (ALDER_LAKE, "8da8w", "fpa8w", True),
        (EPYC_AVX2, "8da8w", "fpa8w", True),
        (OLD_X86, "none", None, False),
        (APPLE, "8da4w", None, False),
    ],
)
def test_recipe_follows_int8_dot_support(cpu, recipe, decoder_recipe, measured):
    advice = recommended_cpu_recipe(cpu)
    assert (advice.recipe, advice.decoder_recipe, advice.measured) == (recipe, decoder_recipe, measured)
    assert cpu.arch in advice.reason


def test_8da4w_without_vnni_is_warned_about_and_others_are_not():
    warning = slow_recipe_warning("8da4w", EPYC_AVX2)
    assert warning and "no VNNI" in warning and "--quantize 8da8w" in warning
    assert slow_recipe_warning("8da4w", XEON_VNNI) is None
    assert slow_recipe_warning("8da8w", EPYC_AVX2) is None
    assert slow_recipe_warning("8da4w", APPLE) is None  # not measured there: no claim either way


def test_cpuinfo_flags_are_read():
    text = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_vnni\n\nprocessor\t: 1"
    cpu = parse_cpuinfo(text)
    assert cpu.int8_dot and {"avx2", "fma"} <= cpu.flags
    assert parse_cpuinfo("processor : 0\n").flags == frozenset()
    host = host_cpu_features()  # whatever this machine is, it must describe itself
    assert host.arch and host.describe().startswith(host.arch)


def _args(**kw):
    base = dict(quantize="auto", quantize_encoder=None, quantize_decoder=None, backend="xnnpack")
    base.update(kw)
    return argparse.Namespace(**base)


def test_auto_resolves_per_cpu_and_is_refused_off_xnnpack():
    args = _args()
    lines = export_cli.resolve_cpu_recipe(args, EPYC_AVX2)
    # AVX2 without VNNI: the same pair (the fpa8w loop was measured faster than fp32's and 8da8w's there too)
    assert (args.quantize, args.quantize_decoder) == ("8da8w", "fpa8w")
    assert lines[0].startswith("quantize auto: 8da8w encoder, fpa8w decoder and joint (") and "no VNNI" in lines[0]
    args = _args()
    lines = export_cli.resolve_cpu_recipe(args, XEON_VNNI)
    assert (args.quantize, args.quantize_decoder) == ("8da8w", "fpa8w")
    assert lines[0].startswith("quantize auto: 8da8w encoder, fpa8w decoder and joint (")
    args = _args(quantize_decoder="8da4w")  # a part's recipe the user named is kept, and the line says what each gets
    lines = export_cli.resolve_cpu_recipe(args, XEON_VNNI)
    assert (args.quantize, args.quantize_decoder) == ("8da8w", "8da4w")
    assert lines[0].startswith("quantize auto: 8da8w encoder, 8da4w decoder and joint (")
    assert "kept your --quantize-decoder" in lines[0]
    args = _args(quantize_encoder="8da4w")
    lines = export_cli.resolve_cpu_recipe(args, XEON_VNNI)
    assert lines[0].startswith("quantize auto: 8da4w encoder, fpa8w decoder and joint (")
    assert "kept your --quantize-encoder" in lines[0]
    with pytest.raises(ValueError, match="--backend metal"):
        export_cli.resolve_cpu_recipe(_args(backend="metal"), XEON_VNNI)
    # auto's fpa8w decoder takes no per-channel group size: the error names the fix instead of a recipe never asked for
    with pytest.raises(ValueError, match="auto picks fpa8w for the decoder .* got 0: leave out --group-size"):
        export_cli.resolve_cpu_recipe(_args(group_size=0), XEON_VNNI)
    args = _args(group_size=0, quantize_decoder="none")  # naming the decoder's recipe is the other fix
    assert export_cli.resolve_cpu_recipe(args, XEON_VNNI) and args.quantize_decoder == "none"
    with pytest.raises(ValueError, match="auto picks fpa8w for the decoder"):
        export_cli.resolve_cpu_recipe(_args(group_size=0), EPYC_AVX2)
    lines = export_cli.resolve_cpu_recipe(_args(quantize="none", quantize_encoder="8da4w"), EPYC_AVX2)
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "8da8w" in lines[0]
    assert export_cli.resolve_cpu_recipe(_args(quantize="8da4w", backend="portable"), EPYC_AVX2) == []


def test_auto_with_another_backend_exits_2_before_loading(tmp_path, capsys):
    assert export_cli.main(["--model", str(tmp_path / "x.nemo"), "--backend", "mlx", "--quantize", "auto"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--quantize auto" in err


# Both CPUs resolve to the same plan (test_recipe_follows_int8_dot_support checks each); the export runs once by
# default, the Xeon's with -m extended.
@pytest.mark.parametrize("cpu", [pytest.param(XEON_VNNI, marks=pytest.mark.extended), EPYC_AVX2], ids=["vnni", "avx2"])
def test_export_auto_on_an_avx2_or_vnni_cpu_writes_8da8w_encoder_and_fpa8w_decoder(
    tiny_nemo, tmp_path, monkeypatch, capsys, jfk_audio, cpu
):
    from conftest import make_transcriber

    monkeypatch.setattr("parakeet_executorch.export.cpu_recipe.host_cpu_features", lambda: cpu)
    out = tmp_path / "auto"
    assert export_cli.main(["--model", str(tiny_nemo), "--quantize", "auto", "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "quantize auto: 8da8w encoder, fpa8w decoder and joint" in printed
    # the per-part lines: per channel for the 8da8w encoder, groups for the fpa8w decoder with its LSTM
    assert "  encoder: 8da8w, group size per channel: quantized" in printed
    assert "  decoder: fpa8w, group size 32: quantized" in printed
    report = json.loads((out / "export_report.json").read_text())
    assert report["parts"]["encoder"]["recipe"] == "8da8w" and report["parts"]["decoder"]["recipe"] == "fpa8w"
    for part in ("encoder", "decoder"):
        assert report["parts"][part]["quantized"] == report["parts"][part]["linear_layers"] > 0
    assert not report["parts"]["decoder"]["not_covered"]  # the LSTM is quantized too
    # the folder says that auto chose, on which CPU, and how long each stage took
    assert report["quantize_auto"]["cpu"] == cpu.describe()
    assert report["quantize_auto"]["choice"].startswith("quantize auto: 8da8w encoder, fpa8w decoder and joint (")
    assert {"load", "quantize", "serialize"} <= set(report["stage_seconds"])
    assert make_transcriber(out).transcribe(jfk_audio).tokens  # the mixed program loads and decodes
