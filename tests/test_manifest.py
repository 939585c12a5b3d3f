"""Manifest mode (``parakeet-transcribe --manifest in.jsonl --output out.jsonl``): one output line per input line
with the Python runner's own text, errors recorded, resume after an interruption (a torn last line, kill -9 of a
two-worker run), the same text with one or two workers, and bad input refused before anything is written."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from parakeet_executorch.runtime.cli import main as transcribe_main

from conftest import make_transcriber

PROG = "parakeet-transcribe"


@pytest.fixture(scope="module")
def corpus(manifest_corpus) -> Path:
    return manifest_corpus


@pytest.fixture(scope="module")
def reference(exported_xnnpack, corpus) -> dict[str, str | None]:
    """The Python runner's text for each entry (by resolved path); None for a file it cannot transcribe."""
    from parakeet_executorch.audio import AudioError

    transcriber = make_transcriber(exported_xnnpack)
    texts: dict[str, str | None] = {}
    for record in read_jsonl(corpus):
        path = (corpus.parent / record["audio_filepath"]).resolve()
        try:
            texts[str(path)] = transcriber.transcribe(path).text
        except AudioError:
            texts[str(path)] = None
    assert sum(t is None for t in texts.values()) == 4 and texts[str(corpus.parent / "audio/zero_frames.wav")] == ""
    return texts


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run(model_dir: Path, manifest: Path, output: Path, *extra: str) -> int:
    return transcribe_main(
        ["--model", str(model_dir / "model.pte"), "--manifest", str(manifest), "--output", str(output), *extra]
    )


def check_output(output: Path, manifest: Path, reference: dict) -> list[dict]:
    """Exactly one line per input line (this model), each with its input's keys and the runner's text or an error."""
    lines = read_jsonl(output)
    inputs = read_jsonl(manifest)
    assert Counter(line["audio_filepath"] for line in lines) == Counter(r["audio_filepath"] for r in inputs)
    by_audio = {r["audio_filepath"]: r for r in inputs}
    for line in lines:
        assert line.items() >= by_audio[line["audio_filepath"]].items()  # every input key kept, unchanged
        expected = reference[line["resolved_audio_filepath"]]
        if expected is None:
            assert "pred_text" not in line and line["error"] and "\n" not in line["error"]
        else:
            assert "error" not in line and line["pred_text"] == expected
    assert len({line["pte_sha256"] for line in lines}) == 1
    return lines


def test_manifest_lines_equal_the_runner_and_failures_are_recorded(
    exported_xnnpack, corpus, reference, tmp_path, capsys
):
    out = tmp_path / "out.jsonl"
    assert run(exported_xnnpack, corpus, out, "--timestamps", "word") == 2
    lines = check_output(out, corpus, reference)
    assert len(lines) == 13
    for line in lines:
        if "pred_text" in line:
            assert [w["text"] for w in line["words"]] == line["pred_text"].split()
            assert all(0 <= w["start"] <= w["end"] for w in line["words"]) and "tokens" not in line
    truncated = next(line for line in lines if line["audio_filepath"].endswith("truncated.wav"))
    assert "truncated" in " ".join(truncated["warnings"])
    missing = next(line for line in lines if line["audio_filepath"] == "audio/missing.wav")
    assert missing["error"] == f"audio file not found: {corpus.parent / 'audio' / 'missing.wav'}"
    empty = next(line for line in lines if line["audio_filepath"] == "audio/zero_bytes.wav")
    assert empty["error"] == f"audio file is empty (0 bytes): {corpus.parent / 'audio' / 'zero_bytes.wav'}"
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"{PROG}: 4 of 13 files failed"
    assert sum(e.startswith(f"{PROG}: error: ") for e in err) == 4


def test_rerun_after_interruption_skips_finished_lines_and_drops_a_torn_one(
    exported_xnnpack, corpus, reference, tmp_path, capsys
):
    full = tmp_path / "full.jsonl"
    assert run(exported_xnnpack, corpus, full, "--quiet") == 2
    lines = full.read_bytes().splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    other_model = json.loads(lines[0])
    other_model["pte_sha256"] = "0" * 64  # the same file done by another model: not taken as done
    out.write_bytes(b"".join(lines[:5]) + json.dumps(other_model).encode() + b"\n" + lines[5][:40])
    capsys.readouterr()
    assert run(exported_xnnpack, corpus, out, "--quiet") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"{PROG}: 4 of 13 files failed"
    kept = read_jsonl(out)
    assert kept[5] == other_model
    out_this_model = tmp_path / "this_model.jsonl"
    out_this_model.write_text("".join(json.dumps(line) + "\n" for line in kept if line is not kept[5]))
    resumed = check_output(out_this_model, corpus, reference)
    assert resumed[:5] == [json.loads(line) for line in lines[:5]]  # the finished lines were left alone
    # A rerun of a complete output writes nothing; the failures recorded earlier still give exit status 2.
    before = out.read_bytes()
    assert run(exported_xnnpack, corpus, out, "--quiet") == 2
    assert out.read_bytes() == before


def test_a_file_listed_twice_gets_two_lines_and_a_complete_output_is_left_alone(exported_xnnpack, corpus, tmp_path):
    clip = corpus.parent / "audio" / "a_8k.flac"
    manifest = tmp_path / "twice.jsonl"
    records = [{"audio_filepath": str(clip)}, {"audio_filepath": os.path.relpath(clip, tmp_path)}]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    assert run(exported_xnnpack, manifest, out, "--quiet") == 0
    lines = read_jsonl(out)
    assert [line["audio_filepath"] for line in lines] == [r["audio_filepath"] for r in records]
    assert lines[0]["pred_text"] == lines[1]["pred_text"]
    before = out.read_bytes()
    assert run(exported_xnnpack, manifest, out, "--quiet") == 0
    assert out.read_bytes() == before


def test_two_workers_give_the_same_text(exported_xnnpack, corpus, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    assert run(exported_xnnpack, corpus, out, "--workers", "2", "--quiet", "--timestamps", "all") == 2
    lines = check_output(out, corpus, reference)
    assert all("tokens" in line and "segments" in line for line in lines if "pred_text" in line)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads the worker processes from /proc")
def test_kill_9_of_a_two_worker_run_then_rerun(exported_xnnpack, corpus, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "parakeet_executorch.runtime.cli", "--model", str(exported_xnnpack / "model.pte")]
    cmd += ["--manifest", str(corpus), "--output", str(out), "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.read_bytes().count(b"\n") >= 1) and proc.poll() is None:
            assert time.monotonic() < deadline, "no output line within 120 s"
            time.sleep(0.01)
        children = [int(c) for c in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"
        deadline = time.monotonic() + 10
        while any(alive(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(c) for c in children), "a worker outlived its killed parent"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the run
    before = out.read_bytes().count(b"\n")
    assert 1 <= before < 13
    assert run(exported_xnnpack, corpus, out, "--quiet") == 2
    check_output(out, corpus, reference)


def test_context_flags_reach_every_file(exported_xnnpack, corpus, tmp_path):
    from parakeet_executorch.runtime.longform import LongFormOptions

    out = tmp_path / "out.jsonl"
    flags = ("--left-context-seconds", "1", "--chunk-seconds", "2", "--right-context-seconds", "1", "--quiet")
    assert run(exported_xnnpack, corpus, out, *flags) == 2
    transcriber = make_transcriber(exported_xnnpack)
    line = next(line for line in read_jsonl(out) if line.get("speaker") == "jfk")  # 11 s: buffered, 2 s chunks
    assert (
        line["pred_text"]
        == transcriber.transcribe(Path(line["audio_filepath"]), long_form=LongFormOptions(1, 2, 1)).text
    )


def bad_manifest(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "manifest not found: "),
        (b'{"audio_filepath": "a.wav"}\n\xff\xfe not utf-8\n', "bad.jsonl:2: not UTF-8"),
        ('{"audio_filepath": 5}\n', 'bad.jsonl:1: "audio_filepath" must be a non-empty string'),
        ('{"audio_filepath": "a.wav", "duration": NaN}\n', "bad.jsonl:1: NaN is not strict JSON"),
        ('{"audio_filepath": "a.wav"}\n{"duration": -Infinity}\n', "bad.jsonl:2: -Infinity is not strict JSON"),
        ('{"audio_filepath": "a.wav"}\n\n{"audio_filepath": "b.wav"\n', "bad.jsonl:3: not JSON"),
        ('{"audio_filepath": "a.wav"}\n{"duration": 1.0}\n', 'bad.jsonl:2: no "audio_filepath"'),
        ('["a.wav"]\n', "bad.jsonl:1: not a JSON object"),
        ("\n\n", "has no entries"),
    ],
)
def test_bad_manifest_is_one_error_line_and_writes_nothing(exported_xnnpack, tmp_path, capsys, content, message):
    manifest = tmp_path / "missing.jsonl" if content is None else bad_manifest(tmp_path, content)
    out = tmp_path / "out.jsonl"
    assert run(exported_xnnpack, manifest, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{PROG}: error: ") and message in err[0]
    assert not out.exists()


def test_output_equal_to_the_manifest_is_refused(exported_xnnpack, corpus, tmp_path, capsys):
    before = corpus.read_bytes()
    same = corpus.parent / "." / corpus.name
    assert run(exported_xnnpack, corpus, same) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{PROG}: error: --output ") and "manifest itself" in err[0]
    assert corpus.read_bytes() == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--manifest", "m.jsonl", "--output", "o.jsonl", "x.wav"], "exclusive"),
        (["--manifest", "m.jsonl"], "--manifest needs --output"),
        (["--output", "o.jsonl", "x.wav"], "--output is for --manifest"),
        (["--manifest", "m.jsonl", "--output", "o.jsonl", "--workers", "0"], "--workers must be at least 1"),
        (["--manifest", "m.jsonl", "--output", "o.jsonl", "--format", "json"], "--format does not apply"),
        (["x.wav", "--workers", "2"], "--workers is for --manifest"),
    ],
)
def test_usage_errors(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        transcribe_main(["--model", "model.pte", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"{PROG}: error: ") and message in err[-1]
    assert list(tmp_path.iterdir()) == []


def one_clip_manifest(corpus: Path, tmp_path: Path, name: str = "one.jsonl") -> Path:
    manifest = tmp_path / name
    manifest.write_text(json.dumps({"audio_filepath": str(corpus.parent / "audio" / "a_8k.flac")}) + "\n")
    return manifest


def refused(capsys, message: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{PROG}: error: --output ") and message in err[0], err


@pytest.mark.parametrize("kind", ["fifo", "device", "no folder", "read-only file", "read-only folder"])
def test_output_that_cannot_take_results_is_refused_before_anything_runs(
    exported_xnnpack, corpus, tmp_path, capsys, kind
):
    manifest = one_clip_manifest(corpus, tmp_path)
    if kind.startswith("read-only") and os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    out = tmp_path / "out.jsonl"
    message = {
        "fifo": "is not a regular file",
        "device": "is not a regular file",
        "no folder": "does not exist",
        "read-only file": "is not writable",
        "read-only folder": "is not writable",
    }[kind]
    if kind == "fifo":
        os.mkfifo(out)  # reading it for the resume scan would hang
    elif kind == "device":
        out = Path("/dev/null")
    elif kind == "no folder":
        out = tmp_path / "nodir" / "out.jsonl"
    elif kind == "read-only file":
        out.write_text("")
        out.chmod(0o444)
    else:
        (tmp_path / "ro").mkdir(0o555)
        out = tmp_path / "ro" / "out.jsonl"
    t0 = time.monotonic()
    assert run(exported_xnnpack, manifest, out) == 2
    assert time.monotonic() - t0 < 2  # before the model loads
    refused(capsys, message)
    assert kind != "no folder" or not out.parent.exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, which takes no new files")
def test_output_the_os_refuses_is_one_line_that_names_the_file(exported_xnnpack, corpus, tmp_path, capsys):
    manifest = one_clip_manifest(corpus, tmp_path)
    assert run(exported_xnnpack, manifest, Path("/proc/parakeet-out.jsonl")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{PROG}: error: cannot open /proc/parakeet-out.jsonl: ")
    assert "Errno" not in err[0] and err[0].endswith("pick a path in a folder you can write to")


def test_output_holding_other_content_or_audio_is_refused_untouched(exported_xnnpack, corpus, tmp_path, capsys):
    manifest = one_clip_manifest(corpus, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"first line\nlast line without newline")
    assert run(exported_xnnpack, manifest, notes) == 2
    refused(capsys, "holds something other than manifest results (line 1); pick another path")
    assert notes.read_bytes() == b"first line\nlast line without newline"
    notes.write_bytes(b'{"resolved_audio_filepath": "x", "pte_sha256": "y"}\nlast line')
    assert run(exported_xnnpack, manifest, notes) == 2
    refused(capsys, "(line 2)")
    clip = corpus.parent / "audio" / "a_8k.flac"
    before = clip.read_bytes()
    assert run(exported_xnnpack, manifest, clip) == 2
    refused(capsys, "is one of the manifest's audio files")
    assert clip.read_bytes() == before


def test_a_complete_last_line_without_newline_is_kept(exported_xnnpack, corpus, tmp_path, capsys):
    manifest = tmp_path / "two.jsonl"
    clips = [corpus.parent / "audio" / "a_8k.flac", corpus.parent / "audio" / "missing.wav"]
    manifest.write_text("".join(json.dumps({"audio_filepath": str(c)}) + "\n" for c in clips))
    out = tmp_path / "out.jsonl"
    assert run(exported_xnnpack, manifest, out, "--quiet") == 2
    full = out.read_bytes()
    out.write_bytes(full[:-1])  # the last line lacks only its newline: done, not torn
    assert run(exported_xnnpack, manifest, out, "--quiet") == 2
    assert out.read_bytes() == full


def test_changed_settings_redo_the_files_and_keep_the_old_lines(exported_xnnpack, corpus, tmp_path, capsys):
    manifest = one_clip_manifest(corpus, tmp_path)
    out = tmp_path / "out.jsonl"
    assert run(exported_xnnpack, manifest, out, "--quiet") == 0
    first = read_jsonl(out)
    assert len(first) == 1 and first[0]["settings"]["timestamps"] == "none" and "words" not in first[0]
    capsys.readouterr()
    assert run(exported_xnnpack, manifest, out, "--quiet", "--timestamps", "word") == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{PROG}: warning: ") and "1 lines of another model or other" in err[0]
    lines = read_jsonl(out)
    assert len(lines) == 2 and lines[0] == first[0] and "words" in lines[1]
    assert run(exported_xnnpack, manifest, out, "--quiet", "--chunk-seconds", "2") == 0
    assert len(read_jsonl(out)) == 3
    before = out.read_bytes()
    assert run(exported_xnnpack, manifest, out, "--quiet", "--timestamps", "word") == 0  # done: nothing added
    assert out.read_bytes() == before
    # A line written before the default chunk was evened out over each file recorded that chunk as None: redone.
    old = dict(lines[1], settings=dict(lines[1]["settings"], contexts=[4.0, None, 2.0]))
    out.write_text(json.dumps(old) + "\n")
    assert run(exported_xnnpack, manifest, out, "--quiet", "--timestamps", "word") == 0
    assert len(read_jsonl(out)) == 2


def test_bom_folder_and_too_many_workers(exported_xnnpack, corpus, tmp_path, capsys):
    manifest = tmp_path / "bom.jsonl"
    folder = corpus.parent / "audio"
    manifest.write_bytes(b"\xef\xbb\xbf" + json.dumps({"audio_filepath": str(folder)}).encode() + b"\n")
    out = tmp_path / "out.jsonl"
    workers = (os.cpu_count() or 1) + 1
    assert run(exported_xnnpack, manifest, out, "--workers", str(workers)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == (
        f"{PROG}: warning: --workers {workers} is more than the {workers - 1} cores; each worker holds its own copy "
        "of the model, so this adds memory, not speed"
    )
    assert read_jsonl(out)[0]["error"] == f"audio path is a folder, not a file: {folder}"


@pytest.mark.skipif(sys.platform != "linux", reason="signals a process group")
def test_ctrl_c_of_a_two_worker_run_is_one_line_then_rerun(exported_xnnpack, corpus, reference, jfk_path, tmp_path):
    import soundfile as sf

    # A 20-minute file first: one worker is still on it when the other has written its first line, so the run
    # cannot finish before the interrupt (13 short files alone can all be done by the time the signal is sent).
    audio, rate = sf.read(str(jfk_path), dtype="float32")
    long_wav = tmp_path / "long.wav"
    sf.write(str(long_wav), np.tile(audio, int(np.ceil(1200 * rate / len(audio)))), rate, subtype="PCM_16")
    records = [{"audio_filepath": str(long_wav)}]
    records += [{**r, "audio_filepath": str(corpus.parent / r["audio_filepath"])} for r in read_jsonl(corpus)]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "parakeet_executorch.runtime.cli", "--model", str(exported_xnnpack / "model.pte")]
    cmd += ["--manifest", str(manifest), "--output", str(out), "--workers", "2"]
    # A shell without job control starts background commands with SIGINT ignored, and a child inherits that (a CI
    # runner started with "&" did): give the run the default disposition a terminal's Ctrl-C meets.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.read_bytes().count(b"\n") >= 1) and proc.poll() is None:
            assert time.monotonic() < deadline, "no output line within 120 s"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group, workers included
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and elapsed < 5, (elapsed, err)  # the files in flight are not awaited
    last = err.strip().splitlines()[-1]
    written = out.read_bytes().count(b"\n")
    assert last == f"{PROG}: interrupted: {written} files written this run; run the same command again to resume"
    assert run(exported_xnnpack, manifest, out, "--quiet") == 2
    lines = read_jsonl(out)  # each input once: none lost, none twice
    assert Counter(line["audio_filepath"] for line in lines) == Counter(r["audio_filepath"] for r in records)
    for line in lines:
        if line["audio_filepath"] != str(long_wav):
            assert line.get("pred_text") == reference[line["resolved_audio_filepath"]]
