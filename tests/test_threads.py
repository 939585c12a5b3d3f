"""--threads: ExecuTorch's thread pool resized for one transcription, the transcript unchanged, bad counts refused."""

from __future__ import annotations

import json
import re

import pytest

from parakeet_executorch.runtime.cli import main as transcribe_main
from parakeet_executorch.runtime.threads import (
    MAX_THREADS,
    ThreadsError,
    available_cpus,
    cpu_threads,
    oversubscription_warning,
    set_cpu_threads,
)


@pytest.mark.parametrize("threads", [1, 3])
def test_threads_resizes_the_pool_for_the_run_and_restores_it(exported_xnnpack, jfk_path, capsys, threads):
    pte = str(exported_xnnpack / "model.pte")
    before = cpu_threads()
    assert transcribe_main(["--model", pte, "--format", "json", str(jfk_path)]) == 0
    default = capsys.readouterr()
    assert transcribe_main(["--model", pte, "--format", "json", "--threads", str(threads), str(jfk_path)]) == 0
    got = capsys.readouterr()
    assert re.search(rf"load: [0-9.]+ s, {threads} CPU threads, (native|pybind) runtime\n", got.err), got.err
    assert json.loads(got.out) == json.loads(default.out)
    assert cpu_threads() == before  # main() called in-process leaves the pool as it found it
    warning = oversubscription_warning(threads)
    assert (warning is not None) == (threads > available_cpus())
    assert (f"parakeet-transcribe: warning: {warning}\n" in got.err) if warning else ("warning" not in got.err)


def test_more_threads_than_cpus_is_warned_about(monkeypatch):
    from parakeet_executorch.runtime import threads

    monkeypatch.setattr(threads, "available_cpus", lambda: 2)
    assert threads.oversubscription_warning(2) is None
    assert threads.oversubscription_warning(1000) == (
        "--threads 1000 is more than the 2 CPUs this process may use; the extra threads only take turns on the "
        "same cores (slower): use --threads 2 or fewer"
    )


@pytest.mark.parametrize("threads", [0, -1, MAX_THREADS + 1])
def test_bad_thread_count_is_a_usage_error(exported_xnnpack, jfk_path, capsys, threads):
    with pytest.raises(SystemExit) as exc:
        transcribe_main(["--model", str(exported_xnnpack / "model.pte"), "--threads", str(threads), str(jfk_path)])
    assert exc.value.code == 2
    assert f"--threads must be between 1 and {MAX_THREADS}, not {threads}" in capsys.readouterr().err


def test_threads_with_manifest_names_the_workers_flag(tmp_path, capsys):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("")
    args = ["--model", "m.pte", "--manifest", str(manifest), "--output", str(tmp_path / "o.jsonl"), "--threads", "2"]
    with pytest.raises(SystemExit):
        transcribe_main(args)
    assert "--workers" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_set_cpu_threads_refuses_a_bad_count():
    before = cpu_threads()
    with pytest.raises(ThreadsError, match="between 1 and"):
        set_cpu_threads(0)
    assert cpu_threads() == before


def test_public_api_sets_the_pool():
    import parakeet_executorch as pe

    before = cpu_threads()
    try:
        pe.set_cpu_threads(1)
        assert cpu_threads() == 1
    finally:
        pe.set_cpu_threads(before)
    assert cpu_threads() == before
