"""Bad input to the export and transcribe CLIs: a clear message, a non-zero exit, no half-written output."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parakeet_executorch.export import cli as export_cli
from parakeet_executorch.runtime.cli import main as transcribe_main


def run_export(*args):
    return subprocess.run([sys.executable, "-m", "parakeet_executorch.export.cli", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("backend, needs", [("metal", "Apple silicon"), ("cuda", "NVIDIA GPU")])
def test_backend_needing_other_host_fails_before_loading(tmp_path, backend, needs):
    t0 = time.perf_counter()
    r = run_export("--model", str(tmp_path / "missing.nemo"), "--backend", backend, "--output-dir", str(tmp_path))
    assert r.returncode != 0
    assert needs in r.stderr and "[load]" not in r.stdout  # refused before the (missing) model was looked at
    assert time.perf_counter() - t0 < 120
    assert not (tmp_path / "model.pte").exists()


def test_bf16_on_cpu_backend_is_refused(tmp_path):
    assert export_cli.main(["--model", "x.nemo", "--dtype", "bf16", "--output-dir", str(tmp_path)]) == 2


def test_missing_nemo_file(tmp_path, capsys):
    assert export_cli.main(["--model", str(tmp_path / "nope.nemo"), "--output-dir", str(tmp_path)]) == 2
    assert "model file not found" in capsys.readouterr().err


def test_unreachable_hub_id_names_the_id_and_suggests_a_local_file(tmp_path):
    r = run_export("--model", "nvidia/parakeet-tdt-0.6b-v2", "--output-dir", str(tmp_path))
    assert r.returncode != 0
    assert "nvidia/parakeet-tdt-0.6b-v2" in r.stderr and ".nemo" in r.stderr
    assert not (tmp_path / "model.pte").exists()


def test_failure_while_writing_leaves_no_partial_pte(tmp_path, monkeypatch):
    target = tmp_path / "model.pte"


    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(export_cli.os, "replace", boom)
    with pytest.raises(OSError):
        export_cli._write_atomically(target, b"x" * 1000)
    assert list(tmp_path.iterdir()) == []


def test_transcribe_missing_model(tmp_path, capsys, jfk_path):
    assert transcribe_main(["--model", str(tmp_path / "model.pte"), str(jfk_path)]) == 2
    assert "not found" in capsys.readouterr().err


def test_transcribe_missing_and_undecodable_audio(exported_xnnpack, tmp_path, capsys):
    pte = str(exported_xnnpack / "model.pte")
    assert transcribe_main(["--model", pte, str(tmp_path / "none.wav")]) == 2
    assert "audio file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.wav"
    bad.write_text("this is not audio")
    assert transcribe_main(["--model", pte, str(bad)]) == 2
    assert "cannot decode audio file" in capsys.readouterr().err


def test_tokenizer_of_another_size_is_refused(exported_xnnpack, tmp_path, capsys, jfk_path):
    from parakeet_executorch.testing.tokenizer_corpus import train_tokenizer

    other = train_tokenizer(tmp_path / "tok", 96)
    rc = transcribe_main(["--model", str(exported_xnnpack / "model.pte"), "--tokenizer", str(other), str(jfk_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "96 tokens" in err and "128" in err


def test_pte_missing_a_method_is_refused(tmp_path, capsys, jfk_path):
    import torch
    from executorch.exir import to_edge

    class Joint(torch.nn.Module):
        def forward(self, x):
            return x + 1

    program = to_edge({"joint": torch.export.export(Joint(), (torch.zeros(2),))}).to_executorch()
    (tmp_path / "model.pte").write_bytes(program.buffer)
    (tmp_path / "tokenizer.model").write_bytes(b"")
    assert transcribe_main(["--model", str(tmp_path / "model.pte"), str(jfk_path)]) == 2
    err = capsys.readouterr().err
    assert "lacks method(s)" in err and "preprocessor" in err


def test_json_output_schema(exported_xnnpack, capsys, jfk_path):
    assert transcribe_main(["--model", str(exported_xnnpack / "model.pte"), "--format", "json", str(jfk_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"text", "tokens", "words", "segments"}
    assert set(out["tokens"][0]) == {"id", "text", "start", "end"}
    assert set(out["words"][0]) == {"text", "start", "end"}
    assert all(t["start"] <= t["end"] for t in out["tokens"])


@pytest.mark.parametrize("fmt, head", [("srt", "1\n00:00:00,000 --> "), ("vtt", "WEBVTT\n\n00:00:00.000 --> ")])
def test_subtitle_formats(exported_xnnpack, capsys, jfk_path, fmt, head):
    assert transcribe_main(["--model", str(exported_xnnpack / "model.pte"), "--format", fmt, str(jfk_path)]) == 0
    assert capsys.readouterr().out.startswith(head)
