"""``export_pte(source, ExportOptions) -> ExportReport``: the library call behind ``parakeet-export``."""

from __future__ import annotations

import dataclasses
import json

import pytest

from parakeet_executorch import ExportOptions, export_pte
from parakeet_executorch.export.recipes import RecipeError

from conftest import export_tiny


def test_options_are_checked_before_anything_is_created(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(RecipeError, match="8w cannot be used with --backend xnnpack"):
        export_pte(tmp_path / "absent.nemo", ExportOptions(quantize="8w", output_dir=out))
    with pytest.raises(ValueError, match="--max-audio-seconds must be in"):
        ExportOptions(max_audio_seconds=601).check()
    assert not out.exists()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ExportOptions().backend = "portable"
    assert ExportOptions(quantize="8da4w", quantize_decoder="none").plan == {"encoder": "8da4w", "decoder": "none"}


def test_report_of_a_quantized_export_equals_the_cli_and_its_file(tiny_nemo, export_root, tmp_path):
    cli_folder = export_tiny(tiny_nemo, export_root, "xnnpack", "--quantize", "8da4w")
    lines = []
    report = export_pte(
        tiny_nemo, ExportOptions(backend="xnnpack", quantize="8da4w", output_dir=tmp_path), progress=lines.append
    )
    assert report.pte_path == tmp_path / "model.pte" and report.pte_bytes == report.pte_path.stat().st_size
    assert report.pte_path.read_bytes() == (cli_folder / "model.pte").read_bytes()
    saved = json.loads((cli_folder / "export_report.json").read_text())
    # the file is the report plus the CLI run's own stage timings (each run's differ)
    assert [name.split()[0] for name in saved.pop("stage_seconds")] == [s.name.split()[0] for s in report.stages]
    assert report.as_json() == saved
    assert not (tmp_path / "export_report.json").exists()  # the file is the CLI's
    assert [s.name.split()[0] for s in report.stages] == [
        "load",
        "quantize",
        "export",
        "lower",
        "to_executorch",
        "serialize",
    ]
    assert all(s.seconds > 0 for s in report.stages) and f"[{report.stages[0].name}] ..." in lines
    encoder = report.quantization.part("encoder")
    assert report.quantization.applied and encoder.recipe == "8da4w" and encoder.group_size == 32
    assert encoder.quantized == encoder.linear_layers > 0 and encoder.weight_bytes_after < encoder.weight_bytes_before
    assert any("depthwise_conv" in why for why in encoder.left_float)
    assert report.metadata.sample_rate == 16000 and report.encoder_rewrites is not None


def test_report_of_a_float_export(tiny_nemo, export_root):
    folder = export_tiny(tiny_nemo, export_root, "portable")
    saved = json.loads((folder / "export_report.json").read_text())
    assert saved["parts"] == {"encoder": {"recipe": "none"}, "decoder": {"recipe": "none"}}
    assert saved["encoder_rewrites"] == {} and saved["backend"] == "portable"
