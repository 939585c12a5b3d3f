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


def test_options_that_would_do_nothing_are_refused(tmp_path):
    with pytest.raises(ValueError, match="--qparams minmax applies to fpa4w and fpa8w only.*encoder 8da4w"):
        ExportOptions(quantize="8da4w", qparams="minmax").check()
    with pytest.raises(ValueError, match="--qparams must be one of hqq, minmax"):
        ExportOptions(quantize="fpa4w", qparams="gptq").check()
    with pytest.raises(ValueError, match="--group-size 64 is for a quantization recipe, and nothing is quantized"):
        ExportOptions(group_size=64).check()
    with pytest.raises(ValueError, match="--output-dir is empty"):
        ExportOptions(output_dir="").check()
    ExportOptions(quantize="8da4w", quantize_decoder="fpa8w", qparams="minmax").check()  # the decoder takes it
    ExportOptions(quantize="none", quantize_embedding="8w", backend="portable", group_size=0).check()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--quantize", "8da4w", "--qparams", "minmax"], "--qparams minmax applies to fpa4w and fpa8w only"),
        (["--quantize", "8da8w", "--qparams", "hqq"], "--qparams hqq applies to fpa4w and fpa8w only"),
        (["--group-size", "64"], "--group-size 64 is for a quantization recipe"),
        (["--output-dir", ""], "--output-dir is empty"),
    ],
)
def test_cli_refuses_options_that_would_do_nothing_before_loading(
    tiny_nemo, tmp_path, capsys, monkeypatch, argv, message
):
    from parakeet_executorch.export import load
    from parakeet_executorch.export.cli import main

    monkeypatch.setattr(load, "load_nemo_model", lambda *a: pytest.fail("loaded the model"))
    monkeypatch.chdir(tmp_path)
    out = ["--output-dir", str(tmp_path / "out")] if "--output-dir" not in argv else []
    assert main(["--model", str(tiny_nemo), *out, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert list(tmp_path.iterdir()) == []


def test_a_missing_or_foreign_model_file_is_refused_before_nemo_is_imported(tmp_path):
    import subprocess
    import sys

    fake = tmp_path / "fake.nemo"
    fake.write_text("not a checkpoint")
    code = (
        "import sys\n"
        "from parakeet_executorch.export.load import ModelLoadError\n"
        "from parakeet_executorch import ExportOptions, export_pte\n"
        f"for source in ({str(tmp_path / 'absent.nemo')!r}, {str(fake)!r}, 'no-such-id'):\n"
        "    try:\n"
        f"        export_pte(source, ExportOptions(output_dir={str(tmp_path / 'out')!r}))\n"
        "    except ModelLoadError as exc:\n"
        "        print(exc)\n"
        "print('nemo imported:', any(m.startswith('nemo') for m in sys.modules))\n"
    )
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines[0].startswith("model file not found:")
    assert "is not a .nemo checkpoint (a .nemo is a tar archive" in lines[1]
    assert "neither an existing .nemo file nor a Hugging Face id" in lines[2]
    assert lines[3] == "nemo imported: False"
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig, rc, word", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_a_stopped_export_says_so_in_one_line_and_leaves_no_folder(tiny_nemo, tmp_path, sig, rc, word):
    import signal
    import subprocess
    import sys

    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "parakeet_executorch.export.cli", "--model", str(tiny_nemo), "--output-dir", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # stop it once the model is loaded and the export is under way
        if line.startswith("[export] ..."):
            break
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == rc
    assert err.strip().splitlines()[-1] == f"parakeet-export: {word}; no .pte was written"
    assert "Traceback" not in err
    assert not out.exists()
