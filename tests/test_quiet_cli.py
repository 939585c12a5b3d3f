"""The CLIs print their own lines only: third-party logging and warnings go to a log file unless -v."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHATTER = ("[NeMo", "OneLogger", "Failed to load", "_pytree.py", "cpuinfo")


def _run(tmp_path, module, *args):
    env = dict(os.environ, PARAKEET_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=600, env=env)


def test_export_error_is_shown_and_library_chatter_is_not(tmp_path):
    """A missing model: NeMo is imported (its logger, OneLogger, torchao and torch chatter) before the path is
    checked. stderr holds only the one-line error; the log holds the chatter; -v shows it."""
    missing = str(tmp_path / "missing.nemo")
    r = _run(tmp_path, "parakeet_executorch.export.cli", "--model", missing, "--output-dir", str(tmp_path / "o"))
    assert r.returncode == 2
    log = tmp_path / "cache" / "logs" / "parakeet-export.log"
    assert r.stderr.splitlines() == [
        f"parakeet-export: error: model file not found: {missing}. Pass a .nemo file or a Hugging Face id.",
    ], r.stderr
    assert "[NeMo" not in r.stdout
    assert "Failed to load" in log.read_text()
    verbose = _run(
        tmp_path, "parakeet_executorch.export.cli", "-v", "--model", missing, "--output-dir", str(tmp_path / "o")
    )
    assert verbose.returncode == 2 and "Failed to load" in verbose.stderr
    assert "model file not found" in verbose.stderr


@pytest.mark.parametrize("threads", [None, 1], ids=["default-threads", "threads-1"])
def test_transcribe_keeps_the_runtime_log_out_of_stderr(tmp_path, exported, jfk_path, threads):
    """ExecuTorch's runtime log goes to the log file: XNNPACK's cpuinfo lines while the program loads, a portable
    program's CPU-info probe on its first execute (5 lines on stderr until execute was captured as load is), and
    the thread pool's lines when --threads rebuilds it (its probe and "Resetting threadpool", on stderr until the
    resize was captured too)."""
    extra = [] if threads is None else ["--threads", str(threads)]
    r = _run(tmp_path, "parakeet_executorch.runtime.cli", "--model", str(exported / "model.pte"), *extra, str(jfk_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert not any(word in r.stderr for word in (*CHATTER, "threadpool")), r.stderr
    if threads is not None:
        assert "threadpool" in (tmp_path / "cache" / "logs" / "parakeet-transcribe.log").read_text()
    assert all(line.startswith(("load:", str(jfk_path))) for line in r.stderr.splitlines()), r.stderr
    if exported.name.endswith("portable"):
        assert "cpuinfo" in (tmp_path / "cache" / "logs" / "parakeet-transcribe.log").read_text()
