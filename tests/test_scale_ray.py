"""The Ray mode (``parakeet_executorch.scale``, ``parakeet-transcribe-ray``) on a local 2-CPU Ray: its rows are
manifest mode's output lines for the same inputs, errors included, read back from JSONL and Parquet; bad input is
one error line before Ray runs, with nothing written. One ``ray.init`` serves the whole module."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from parakeet_executorch.runtime.manifest import ManifestOptions, transcribe_manifest
from parakeet_executorch.scale import OutputError, ResultsSummary, transcribe_dataset, write_results
from parakeet_executorch.scale.cli import main as ray_main

PROG = "parakeet-transcribe-ray"


@pytest.fixture(scope="module")
def ray_local():
    import ray  # CI installs the scale extra: a missing Ray fails here rather than skipping

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def manifest_lines(exported_xnnpack, manifest_corpus, tmp_path_factory) -> list[str]:
    """Manifest mode's output lines for the shared corpus (word timestamps, one worker), as text."""
    out = tmp_path_factory.mktemp("manifest_mode") / "out.jsonl"
    options = ManifestOptions(timestamps="word", quiet=True)
    summary = transcribe_manifest(manifest_corpus, out, exported_xnnpack / "model.pte", options)
    assert summary.total == 13 and summary.failed == 4
    return out.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def ray_rows(ray_local, exported_xnnpack, manifest_corpus):
    """The Ray mode's dataset of the same corpus on two actors, run once (materialized)."""
    ds = transcribe_dataset(
        manifest_corpus, exported_xnnpack / "model.pte", concurrency=2, batch_size=2, timestamps="word"
    )
    return ds.materialize()


def test_rows_are_the_manifest_mode_lines(ray_rows, manifest_lines):
    rows = ray_rows.take_all()
    assert sorted(r["line"] for r in rows) == sorted(manifest_lines)  # byte for byte, in some order
    assert sorted(r["input_line"] for r in rows) == list(range(1, 14))
    for r in rows:
        line = json.loads(r["line"])
        assert r["pred_text"] == line.get("pred_text") and r["error"] == line.get("error")
        assert (r["pred_text"] is None) != (r["error"] is None)
        assert r["audio_filepath"] == line["audio_filepath"]
        assert r["resolved_audio_filepath"] == line["resolved_audio_filepath"]
        assert (r["audio_seconds"] > 0) == bool(line.get("words")), line
    errors = {json.loads(r["line"])["audio_filepath"]: r["error"] for r in rows if r["error"]}
    assert len(errors) == 4 and errors["audio/zero_bytes.wav"].startswith("audio file is empty (0 bytes): ")
    assert "audio/not_audio.wav" in errors and errors["audio/missing.wav"].startswith("audio file not found: ")


def test_jsonl_and_parquet_read_back(ray_rows, manifest_lines, tmp_path):
    import pyarrow.parquet as pq

    from parakeet_executorch.scale.rows import row_schema

    jsonl = tmp_path / "out.jsonl"
    summary = write_results(ray_rows, jsonl)
    assert isinstance(summary, ResultsSummary) and (summary.rows, summary.failed) == (13, 4)
    assert summary.audio_seconds > 0
    text = jsonl.read_text(encoding="utf-8")
    assert text.endswith("\n") and sorted(text.splitlines()) == sorted(manifest_lines)
    parquet = tmp_path / "out.parquet"
    assert write_results(ray_rows, parquet).rows == 13
    table = pq.read_table(parquet)
    assert table.schema.equals(row_schema())
    assert sorted(table.column("line").to_pylist()) == sorted(manifest_lines)
    assert table.column("error").null_count == 9
    with pytest.raises(OutputError, match="exists; pass --overwrite"):
        write_results(ray_rows, parquet)
    assert write_results(ray_rows, parquet, "parquet", overwrite=True).rows == 13
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_cli_on_audio_paths_writes_parquet_equal_to_manifest_mode(
    ray_local, exported_xnnpack, manifest_corpus, tmp_path, capsys
):
    import pyarrow.parquet as pq

    audio = manifest_corpus.parent / "audio"
    paths = [str(audio / "a_8k.flac"), str(audio / "zero_bytes.wav"), str(audio / "e_float.wav")]
    manifest = tmp_path / "same.jsonl"
    manifest.write_text("".join(json.dumps({"audio_filepath": p}) + "\n" for p in paths))
    reference = tmp_path / "manifest_mode.jsonl"
    transcribe_manifest(manifest, reference, exported_xnnpack / "model.pte", ManifestOptions(quiet=True))
    out = tmp_path / "out.parquet"
    model = str(exported_xnnpack / "model.pte")
    assert ray_main([*paths, "--model", model, "--output", str(out), "--batch-size", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"{PROG}: 1 of 3 files failed" and err[-2].startswith(f"{out}: 3 files, ")
    table = pq.read_table(out)
    assert sorted(table.column("line").to_pylist()) == sorted(reference.read_text().splitlines())
    assert sorted(table.column("input_line").to_pylist()) == [1, 2, 3]


def test_write_results_leaves_nothing_when_the_run_fails(tmp_path):
    class Failing:  # a dataset whose run breaks after its first block
        def iter_batches(self, **_):
            from parakeet_executorch.scale.rows import Row, table

            yield table([Row(1, {"audio_filepath": "a.wav", "resolved_audio_filepath": "/a.wav", "pred_text": ""}, 1)])
            raise KeyboardInterrupt

    for name in ("out.jsonl", "out.parquet"):
        with pytest.raises(KeyboardInterrupt):
            write_results(Failing(), tmp_path / name)
    (tmp_path / "kept.jsonl").write_text("earlier\n")
    with pytest.raises(KeyboardInterrupt):
        write_results(Failing(), tmp_path / "kept.jsonl", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.jsonl"]
    assert (tmp_path / "kept.jsonl").read_text() == "earlier\n"


def test_actor_refuses_another_copy_of_the_model(exported_xnnpack, manifest_corpus):
    """An actor checks the .pte it finds against the driver's hash (every node must read the same file), and on
    a batch gives manifest mode's lines; run in this process, without Ray."""
    import dataclasses

    import pyarrow as pa

    from parakeet_executorch.scale.actor import ModelMismatch, TranscribeActor
    from parakeet_executorch.scale.job import ScaleOptions, prepare
    from parakeet_executorch.scale.rows import input_items

    job = prepare([manifest_corpus.parent / "audio" / "a_8k.flac"], exported_xnnpack / "model.pte", ScaleOptions())
    with pytest.raises(ModelMismatch, match="every node must read the same .pte"):
        TranscribeActor(dataclasses.replace(job.config, pte_sha256="0" * 64))
    out = TranscribeActor(job.config)(pa.Table.from_pylist(input_items(job.entries)))
    line = json.loads(out.column("line")[0].as_py())
    assert line["pte_sha256"] == job.config.pte_sha256 and line["pred_text"] == out.column("pred_text")[0].as_py()


def test_import_is_light_and_missing_ray_is_one_line(exported_xnnpack, manifest_corpus, tmp_path, capsys, monkeypatch):
    import subprocess
    import sys

    code = "import sys, parakeet_executorch.scale as s; s.__all__; print('ray' in sys.modules, 'torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split() == [
        "False",
        "False",
    ]
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ModuleNotFoundError
    out = tmp_path / "out.jsonl"
    args = ["--manifest", str(manifest_corpus), "--model", str(exported_xnnpack / "model.pte"), "--output", str(out)]
    assert ray_main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    hint = 'pip install "parakeet-executorch[scale]"'
    assert err == [f"{PROG}: error: the Ray mode needs Ray Data, and ray is not installed: {hint}"]
    assert not out.exists()


def bad(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "case, message",
    [
        ("no input", "no input: pass --manifest in.jsonl or audio files"),
        ("both inputs", "--manifest and audio files are exclusive"),
        ("words and all", "--words is --timestamps word; it cannot go with --timestamps all"),
        ("concurrency 0", "--concurrency must be at least 1"),
        ("cpus 0", "--num-cpus-per-actor must be more than 0"),
        ("csv output", "name it .jsonl or .parquet"),
        ("output exists", "exists; pass --overwrite to replace it"),
        ("output is the manifest", "is the manifest or one of its audio files"),
        ("output is an audio file", "is the manifest or one of its audio files"),
        ("output is a folder", "is a folder"),
        ("no output folder", "does not exist; create it or pick another path"),
        ("bad manifest", "m.jsonl:2: not JSON"),
        ("no model", "model.pte"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(exported_xnnpack, tmp_path, capsys, monkeypatch, case, message):
    monkeypatch.chdir(tmp_path)
    bad(tmp_path, "a.wav", "not audio, but a file")
    manifest = bad(tmp_path, "m.jsonl", json.dumps({"audio_filepath": "a.wav"}) + "\n")
    model = str(exported_xnnpack / "model.pte")
    out = "out.jsonl"
    args = ["--manifest", "m.jsonl"]
    extra: list[str] = []
    if case == "no input":
        args = []
    elif case == "both inputs":
        extra = ["a.wav"]
    elif case == "words and all":
        extra = ["--words", "--timestamps", "all"]
    elif case == "concurrency 0":
        extra = ["--concurrency", "0"]
    elif case == "cpus 0":
        extra = ["--num-cpus-per-actor", "0"]
    elif case == "csv output":
        out = "out.csv"
    elif case == "output exists":
        bad(tmp_path, out, "earlier results\n")
    elif case == "output is the manifest":
        out = "m.jsonl"
    elif case == "output is an audio file":
        bad(tmp_path, "a.parquet", "an audio path that is also the output")
        args, out, extra = ["a.parquet"], "a.parquet", ["--overwrite"]  # refused even so
    elif case == "output is a folder":
        (tmp_path / "folder.jsonl").mkdir()
        out = "folder.jsonl"
    elif case == "no output folder":
        out = "missing/out.jsonl"
    elif case == "bad manifest":
        manifest.write_text('{"audio_filepath": "a.wav"}\n{"audio_filepath": \n')
    elif case == "no model":
        model = str(tmp_path / "model.pte")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    rc = None
    try:
        rc = ray_main([*args, "--model", model, "--output", out, *extra])
    except SystemExit as exc:  # argparse's usage errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"{PROG}: error: ") and message in err[-1], err
    if case not in ("no input", "both inputs", "words and all", "concurrency 0", "cpus 0"):
        assert len(err) == 1, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    folders = ["folder.jsonl"] if case == "output is a folder" else []
    assert sorted(os.listdir(tmp_path)) == sorted([*before, *folders])  # no temporary file left either
