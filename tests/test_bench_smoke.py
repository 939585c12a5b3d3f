"""Smoke test of benchmarks/bench_transcribe.py, through bench_threads.py at 2 and then 1 threads, at tiny size:
it runs end to end, writes its outputs, and the fp32 systems (NeMo eager, ONNX Runtime fp32, ExecuTorch fp32 via
the Python and C++ runners) produce the same tokens. No timing assertions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


# Every system of the benchmark at tiny size (ONNX export and quantization included): minutes; -m extended.
@pytest.mark.extended
@pytest.mark.slow
def test_bench_transcribe_tiny(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("matplotlib")
    root = tmp_path / "bench"
    out = root / "threads_2"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # One xnnpack fp32 recipe keeps this under 4 minutes on 2 cores (the export dominates); --jobs 2 overlaps it
    # with NeMo's ONNX export. bench_threads runs it at 2 threads, then times the same exports at 1.
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "bench_threads.py"),
        "--out",
        str(root),
        "--threads",
        "2",
        "1",
        "--",
        "--size",
        "tiny",
        "--audio-seconds",
        "2",
        "--runs",
        "1",
        "--jobs",
        "2",
        "--recipes",
        "xnnpack-fp32",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("results.json", "results.md", "rtfx.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    res = json.loads((out / "results.json").read_text())
    assert res["fp32_agree"], res["fp32_disagree"]
    systems = res["systems"]
    expected = {"nemo-eager", "ort-fp32", "ort-int8", "et-py:xnnpack-fp32"}
    assert expected <= set(systems), sorted(systems)
    for name in expected:
        s = systems[name]
        assert "error" not in s, (name, s.get("error"))
        assert s["rtfx"]["2"] > 0 and s["peak_rss_mb"] > 0, (name, s)
        if s["fp32"]:
            assert s["token_equal_fp32"]["2"], name
    assert 0.0 <= systems["ort-int8"]["agreement"]["2"] <= 1.0
    # the realistic-token-rate bias took effect (random joints otherwise emit ~19 tokens/s on tiny)
    assert res["model"]["tokens_per_s_after"] < res["model"]["tokens_per_s_before"]
    md = (out / "results.md").read_text()
    assert "| system | recipe | size MB |" in md
    # the per-method profile: the Python runner's stage times add up to no more than its measured wall time
    stages = systems["et-py:xnnpack-fp32"]["stages_s"]["2"]
    assert set(stages) == {"preprocess", "encode", "decode"} and all(v > 0 for v in stages.values()), stages
    assert sum(stages.values()) <= min(systems["et-py:xnnpack-fp32"]["wall_s"]["2"]) * 1.001
    assert "| system | recipe | audio s | preprocess s | encoder s |" in md
    assert isinstance(res["host"]["isa"], list) and res["fp32_reference"] == "nemo-eager"
    if "et-cpp:xnnpack-fp32" in systems:  # built by the CI script before the tests
        assert "| recipe | audio s | RTFx Python | RTFx C++ |" in md
        ratio = systems["et-cpp:xnnpack-fp32"]["rtfx"]["2"] / systems["et-py:xnnpack-fp32"]["rtfx"]["2"]
        assert f"| {ratio:.2f} |" in md, md
    # NeMo's and ONNX Runtime's encoders are timed too, so the encoders can be compared alone
    for name in ("nemo-eager", "ort-fp32", "ort-int8"):
        st = systems[name]["stages_s"]["2"]
        assert st["encode"] > 0 and st["preprocess"] > 0, (name, st)
        assert st["encode"] + st["preprocess"] <= min(systems[name]["wall_s"]["2"]) * 1.001, (name, st)
    e = systems["et-py:xnnpack-fp32"]["stages_s"]["2"]["encode"]
    assert f"| {systems['nemo-eager']['stages_s']['2']['encode'] / e:.2f} |" in md, md

    # the second count reused the first one's exports and timed every system again at 1 thread
    one = json.loads((root / "threads_1" / "results.json").read_text())
    assert one["threads"] == 1 and one["steps"] == res["steps"], one["steps"]
    assert (root / "threads_1" / "pte").is_symlink()
    assert set(one["systems"]) == set(systems) and one["fp32_agree"], one["fp32_disagree"]
    if "et-cpp:xnnpack-fp32" in systems:
        log = (root / "threads_1" / "logs" / "cpp_xnnpack-fp32.log").read_text()
        assert "1 CPU threads" in log and "2 CPU threads" not in log, log[-2000:]
    sc = json.loads((root / "scaling.json").read_text())
    row = sc["rows"]["et-py:xnnpack-fp32@2"]
    assert abs(row["rtfx_ratio"]["2"] - systems["et-py:xnnpack-fp32"]["rtfx"]["2"] / row["rtfx"]["1"]) < 1e-9
    assert "| RTFx 2 / 1 |" in (root / "scaling.md").read_text()


@pytest.mark.slow
def test_bench_export_tiny(tmp_path):
    """benchmarks/bench_export.py at tiny size: export time, peak RSS, delegate count, encoder RTFx and
    the ETDump profile all land in its table."""
    out = tmp_path / "bench"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "bench_export.py"),
        "--size",
        "tiny",
        "--recipes",
        "none",
        "--etdump",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = json.loads((out / "results.json").read_text())
    assert row["rc"] == 0 and row["export_s"] > 0 and row["export_peak_rss_gb"] > 0, row
    assert 1 <= row["encoder_delegates"] <= 18, row  # MAX_ENCODER_DELEGATES of test_xnnpack_partitions (tiny)
    assert row["encoder_rtfx_10s"] > 0 and row["encoder_rtfx_60s"] > 0, row
    assert row["encoder_rtfx_best_10s"] >= row["encoder_rtfx_10s"], row
    assert {"load", "export", "lower", "to_executorch", "serialize"} <= set(row["stages_s"]), row
    e = row["etdump"]
    assert "error" not in e, e
    assert e["delegate_calls"] == row["encoder_delegates"], e
    assert 0 < e["delegate_ms"] + e["portable_ops_ms"] <= e["execute_ms"] * 1.05, e
    assert row["etdump_60s"]["seconds"] == 60 and row["etdump_60s"]["execute_ms"] > e["execute_ms"], row
    assert "ETDump of the encoder on 60 s" in (out / "results.md").read_text()
    assert "Host: " in (out / "results.md").read_text()
