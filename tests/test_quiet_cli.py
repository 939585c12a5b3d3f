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
    """A .nemo that is a tar archive but no checkpoint: NeMo is imported (its logger, OneLogger, torchao and torch
    chatter) before it fails. stderr holds only the one-line error; the log holds the chatter; -v shows it."""
    import tarfile

    bad = tmp_path / "empty.nemo"
    with tarfile.open(bad, "w"):
        pass
    r = _run(tmp_path, "parakeet_executorch.export.cli", "--model", str(bad), "--output-dir", str(tmp_path / "o"))
    assert r.returncode == 2
    log = tmp_path / "cache" / "logs" / "parakeet-export.log"
    [line] = r.stderr.splitlines()
    assert line.startswith(f"parakeet-export: error: cannot load {bad} as a NeMo checkpoint"), r.stderr
    assert "[NeMo" not in r.stdout
    assert "Failed to load" in log.read_text()
    verbose = _run(
        tmp_path, "parakeet_executorch.export.cli", "-v", "--model", str(bad), "--output-dir", str(tmp_path / "o")
    )
    assert verbose.returncode == 2 and "Failed to load" in verbose.stderr
    assert f"cannot load {bad} as a NeMo checkpoint" in verbose.stderr


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
