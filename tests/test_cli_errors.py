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
    return subprocess.run(
        [sys.executable, "-m", "parakeet_executorch.export.cli", *args], capture_output=True, text=True, timeout=600
    )


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

    from parakeet_executorch.export import output_dir

    monkeypatch.setattr(output_dir.os, "replace", boom)
    with pytest.raises(OSError):
        output_dir.write_atomically(target, b"x" * 1000)
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


# ---- --output-dir: checked before the model loads, one line, nothing left behind -------------------------------
# The model path does not exist: were the folder not checked first, the export would print [load] and fail there.


def assert_refused_before_loading(capsys, argv: list, *fragments: str) -> None:
    assert export_cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert "[load]" not in out, "the output folder must be checked before the model is loaded"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("parakeet-export: error: --output-dir "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("where", ["file", "under_file", "proc"])
def test_bad_output_dir_is_refused_before_loading(tmp_path, capsys, where):
    afile = tmp_path / "afile"
    afile.write_text("x")
    out, fragment = {
        "file": (afile, "is not a folder"),
        "under_file": (afile / "sub", f"lies under {afile}, which is not a folder"),
        "proc": (Path("/proc/self/parakeet-export-test"), "is not writable"),
    }[where]
    assert_refused_before_loading(
        capsys, ["--model", str(tmp_path / "m.nemo"), "--output-dir", str(out)], f"--output-dir {out}", fragment
    )
    assert afile.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_read_only_output_dir_is_found_before_loading(tmp_path, monkeypatch, capsys):
    import errno
    import os

    from parakeet_executorch.export import output_dir

    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.access(ro, os.W_OK):  # root writes anywhere: make the write fail as on a read-only mount

        def read_only(*a, **k):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

        monkeypatch.setattr(output_dir.tempfile, "mkstemp", read_only)
    try:
        assert_refused_before_loading(
            capsys,
            ["--model", str(tmp_path / "m.nemo"), "--output-dir", str(ro / "new" / "deeper")],
            "is not writable",
            "pass a folder you can write to",
        )
        assert list(ro.iterdir()) == [], "the folders created for the check must be removed again"
    finally:
        ro.chmod(0o755)


def test_early_failure_leaves_no_empty_output_dir(tmp_path, capsys):
    out = tmp_path / "new" / "exports"
    assert export_cli.main(["--model", str(tmp_path / "missing.nemo"), "--output-dir", str(out)]) == 2
    assert "model file not found" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_existing_output_dir_is_kept_after_a_failure(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    assert export_cli.main(["--model", str(tmp_path / "missing.nemo"), "--output-dir", str(out)]) == 2
    assert out.is_dir()


@pytest.mark.parametrize(
    "main, argv, words",
    [
        (transcribe_main, ["--model", "m.pte", "a.wav", "--chunk-seconds", "abc"], "--chunk-seconds"),
        (transcribe_main, ["a.wav"], "--model"),
        (export_cli.main, ["--model", "x.nemo", "--backend", "nope"], "--backend"),
        (export_cli.main, ["--model", "x.nemo", "--max-audio-seconds"], "--max-audio-seconds"),
    ],
)
def test_usage_errors_are_one_line(capsys, main, argv, words):
    """A malformed or missing flag: exit 2 and one line naming it, not argparse's usage block before it."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and ": error: " in err[0] and words in err[0], err
