"""Bad input to parakeet-transcribe and the audio loader: non-finite samples, several files of which some fail,
truncated files, another export's tokenizer, truncated .pte files, subtitle output checked by real parsers, and a
fuzzed audio loader. The C++ runner's side of the same inputs is in test_cpp_runner.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from parakeet_executorch.audio import AudioError, AudioWarning, check_finite, load_audio, zero_non_finite
from parakeet_executorch.runtime.cli import main as transcribe_main

from conftest import REPO, SAMPLE_RATE, make_transcriber

PROG = "parakeet-transcribe: "


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(PROG + "error: ")]


def warning_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(PROG + "warning: ")]


# ---- non-finite samples ---------------------------------------------------------------------------------------


def test_check_finite_names_the_first_bad_sample_and_its_time():
    audio = np.zeros((32000, 2), np.float32)
    audio[24000, 1] = np.inf
    audio[30000, 0] = np.nan
    with pytest.raises(
        AudioError,
        match=r"^clip\.wav: sample 24000 at 1\.500 s is inf \(2 non-finite samples\);"
        r".*--zero-non-finite",
    ):
        check_finite(audio, "clip.wav", 0, 16000)
    # A block reader passes the block's offset: times are the file's, not the block's.
    with pytest.raises(AudioError, match=r"sample 40000 at 2\.500 s is inf"):
        check_finite(audio, "clip.wav", 16000, 16000)
    with pytest.raises(AudioError, match=r"sample 3 at 0\.375 s is -inf \(1 non-finite sample\)"):
        check_finite(np.array([0, 0, 0, -np.inf], np.float32), "x", 0, 8)
    check_finite(np.zeros(10, np.float32), "silence", 0, 16000)  # finite: nothing raised


def test_zero_non_finite_replaces_them_and_warns_once():
    audio = np.ones(100, np.float32)
    audio[[10, 20, 30]] = [np.nan, np.inf, -np.inf]
    with pytest.warns(
        AudioWarning,
        match=r"x\.wav: sample 10 at 0\.625 s is nan \(3 non-finite samples\); "
        r"replaced by silence",
    ) as caught:
        assert zero_non_finite(audio, "x.wav", 0, 16) == 3
    assert len(caught) == 1
    assert np.isfinite(audio).all() and audio[[10, 20, 30]].tolist() == [0, 0, 0] and audio.sum() == 97


def test_nan_samples_are_refused_with_the_file_and_time(exported_xnnpack, bad_clips, capsys):
    rc = transcribe_main(["--model", str(exported_xnnpack / "model.pte"), str(bad_clips / "nan.wav")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    [line] = error_lines(err)
    assert str(bad_clips / "nan.wav") in line and "sample 16000 at 1.000 s is nan (100 non-finite samples)" in line
    assert "--zero-non-finite" in line


def test_inf_in_one_channel_is_found_before_mixing(exported_xnnpack, bad_clips, capsys):
    rc = transcribe_main(["--model", str(exported_xnnpack / "model.pte"), str(bad_clips / "inf_stereo.wav")])
    assert rc == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "sample 24000 at 1.500 s is inf (1 non-finite sample)" in line


def test_zero_non_finite_flag_transcribes_the_zeroed_audio(exported_xnnpack, bad_clips, capsys):
    rc = transcribe_main(
        ["--model", str(exported_xnnpack / "model.pte"), "--zero-non-finite", str(bad_clips / "nan.wav")]
    )
    out, err = capsys.readouterr()
    assert rc == 0
    [line] = warning_lines(err)
    assert "sample 16000 at 1.000 s is nan (100 non-finite samples); replaced by silence" in line
    import soundfile as sf

    audio, _ = sf.read(str(bad_clips / "nan.wav"), dtype="float32")
    audio[~np.isfinite(audio)] = 0.0
    assert out == make_transcriber(exported_xnnpack).transcribe(audio).text + "\n"


# ---- several files, some failing ------------------------------------------------------------------------------


def test_one_bad_file_does_not_throw_away_the_others(exported_xnnpack, jfk_path, bad_clips, tmp_path, capsys):
    missing = tmp_path / "missing.wav"
    files = [str(jfk_path), str(missing), str(bad_clips / "nan.wav"), str(bad_clips / "truncated.wav")]
    rc = transcribe_main(["--model", str(exported_xnnpack / "model.pte"), "--format", "json", *files])
    out, err = capsys.readouterr()
    assert rc == 2
    entries = json.loads(out)
    assert [e["audio"] for e in entries] == files
    assert set(entries[0]) == {"audio", "text", "tokens", "words", "segments"} and entries[0]["tokens"]
    assert entries[1] == {"audio": str(missing), "error": f"audio file not found: {missing}"}
    assert set(entries[2]) == {"audio", "error"} and "1.000 s" in entries[2]["error"]
    assert "text" in entries[3]
    errors = error_lines(err)
    assert len(errors) == 2 and str(missing) in errors[0] and "nan.wav" in errors[1]
    assert f"{PROG}2 of 4 files failed" in err
    assert f"{jfk_path}: 11.00 s of audio" in err  # the good files were transcribed and timed


def test_text_output_keeps_the_files_that_worked(exported_xnnpack, jfk_path, tmp_path, capsys):
    missing = tmp_path / "missing.wav"
    rc = transcribe_main(["--model", str(exported_xnnpack / "model.pte"), str(missing), str(jfk_path)])
    out, err = capsys.readouterr()
    assert rc == 2
    text = make_transcriber(exported_xnnpack).transcribe(load_audio(jfk_path, SAMPLE_RATE)).text
    assert out == f"{jfk_path}\t{text}\n"
    assert len(error_lines(err)) == 1


def test_nothing_on_stdout_when_every_file_fails(exported_xnnpack, tmp_path, capsys):
    rc = transcribe_main(
        [
            "--model",
            str(exported_xnnpack / "model.pte"),
            "--format",
            "json",
            str(tmp_path / "a.wav"),
            str(tmp_path / "b.wav"),
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and len(error_lines(err)) == 2


def test_error_for_audio_too_long_names_the_file(exported_xnnpack, jfk_path, tmp_path, capsys):
    import soundfile as sf

    meta = make_transcriber(exported_xnnpack).model.metadata
    long = tmp_path / "long.wav"
    sf.write(str(long), np.zeros(meta.max_audio_samples + meta.sample_rate, np.float32), meta.sample_rate)
    # One pass only: by default a file past the bound is decoded in windows (tests/test_longform.py).
    rc = transcribe_main(
        ["--model", str(exported_xnnpack / "model.pte"), str(long), str(jfk_path), "--chunk-seconds", "0"]
    )
    out, err = capsys.readouterr()
    assert rc == 2 and out.startswith(f"{jfk_path}\t")
    [line] = error_lines(err)
    assert line.startswith(f"{PROG}error: {long}: audio is ") and "supports up to" in line


# ---- truncated files ------------------------------------------------------------------------------------------


def test_truncated_wav_warns_and_transcribes_what_is_there(exported_xnnpack, bad_clips, jfk_path, capsys):
    with pytest.warns(
        AudioWarning,
        match="truncated: its header promises 352000 bytes of audio but the file "
        "holds 175961; transcribing the 5.50 s that are there",
    ):
        audio = load_audio(bad_clips / "truncated.wav", SAMPLE_RATE)
    assert len(audio) == 87980 and np.array_equal(audio, load_audio(jfk_path, SAMPLE_RATE)[:87980])
    rc = transcribe_main(["--model", str(exported_xnnpack / "model.pte"), str(bad_clips / "truncated.wav")])
    out, err = capsys.readouterr()
    assert rc == 0 and out == make_transcriber(exported_xnnpack).transcribe(audio).text + "\n"
    [line] = warning_lines(err)
    assert str(bad_clips / "truncated.wav") in line and "truncated" in line


def test_streaming_placeholder_length_is_not_called_truncated(jfk_path, tmp_path):
    import struct
    import warnings

    data = bytearray(jfk_path.read_bytes())
    at = data.find(b"data")
    data[at + 4 : at + 8] = struct.pack("<I", 0xFFFFFFFF)  # "length unknown", as a writer that cannot seek leaves it
    (tmp_path / "stream.wav").write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error", AudioWarning)
        assert len(load_audio(tmp_path / "stream.wav", SAMPLE_RATE)) == 176000


def test_undecodable_audio_message_has_one_period(exported_xnnpack, tmp_path, capsys):
    bad = tmp_path / "bad.wav"
    bad.write_text("this is not audio")
    assert transcribe_main(["--model", str(exported_xnnpack / "model.pte"), str(bad)]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "Format not recognised. Pass a WAV" in line and ".." not in line


def test_header_with_an_absurd_sample_rate_is_refused(jfk_path, tmp_path):
    import struct

    data = bytearray(jfk_path.read_bytes())
    at = data.find(b"fmt ") + 12  # the fmt chunk's sample rate field
    data[at : at + 4] = struct.pack("<I", 3)
    (tmp_path / "3hz.wav").write_bytes(bytes(data))
    with pytest.raises(AudioError, match="reports 1 channels at 3 Hz .*header is probably damaged"):
        load_audio(tmp_path / "3hz.wav", SAMPLE_RATE)


# ---- the tokenizer fingerprint --------------------------------------------------------------------------------


def test_export_stores_the_tokenizer_fingerprint(exported_xnnpack):
    import hashlib

    meta = make_transcriber(exported_xnnpack).model.metadata
    assert meta.tokenizer_sha256 == hashlib.sha256((exported_xnnpack / "tokenizer.model").read_bytes()).hexdigest()


def test_tokenizer_of_the_same_size_from_another_export_is_refused(
    exported_xnnpack, same_size_tokenizer, jfk_path, capsys
):
    from parakeet_executorch.tokenizer import Tokenizer

    other = Tokenizer(same_size_tokenizer)
    assert other.vocab_size == Tokenizer(exported_xnnpack / "tokenizer.model").vocab_size
    args = ["--model", str(exported_xnnpack / "model.pte"), "--tokenizer", str(same_size_tokenizer), str(jfk_path)]
    assert transcribe_main(args) == 2
    out, err = capsys.readouterr()
    [line] = error_lines(err)
    assert out == "" and f"tokenizer {same_size_tokenizer} is not the one" in line
    assert other.fingerprint[:12] in line and "--ignore-tokenizer-fingerprint" in line
    assert transcribe_main([*args, "--ignore-tokenizer-fingerprint"]) == 0
    assert capsys.readouterr().out.strip()


def test_pte_without_fingerprint_loads_with_one_warning(
    exported_without_fingerprint, exported_xnnpack, jfk_path, capsys
):
    rc = transcribe_main(["--model", str(exported_without_fingerprint / "model.pte"), str(jfk_path), str(jfk_path)])
    out, err = capsys.readouterr()
    assert rc == 0
    [line] = warning_lines(err)
    assert "carries no tokenizer fingerprint" in line
    text = make_transcriber(exported_xnnpack).transcribe(load_audio(jfk_path, SAMPLE_RATE)).text
    assert out == f"{jfk_path}\t{text}\n{jfk_path}\t{text}\n"


# ---- .pte files ExecuTorch refuses ----------------------------------------------------------------------------


def test_truncated_pte_says_what_the_error_code_means(exported_xnnpack, jfk_path, tmp_path, capfd):
    data = (exported_xnnpack / "model.pte").read_bytes()
    (tmp_path / "model.pte").write_bytes(data[: len(data) // 2])
    (tmp_path / "tokenizer.model").write_bytes((exported_xnnpack / "tokenizer.model").read_bytes())
    assert transcribe_main(["--model", str(tmp_path / "model.pte"), str(jfk_path)]) == 2
    out, err = capfd.readouterr()
    [line] = error_lines(err)
    assert "0x:23" not in line and "ExecuTorch error 0x23 InvalidProgram" in line
    assert "truncated or corrupt .pte" in line and "runtime says: File size is too small" in line
    assert "[program.cpp" not in err, "the runtime's raw log line belongs in the message, not on its own"


def test_empty_pte_is_named_as_empty(exported_xnnpack, jfk_path, tmp_path, capfd):
    (tmp_path / "model.pte").write_bytes(b"")
    (tmp_path / "tokenizer.model").write_bytes((exported_xnnpack / "tokenizer.model").read_bytes())
    assert transcribe_main(["--model", str(tmp_path / "model.pte"), str(jfk_path)]) == 2
    [line] = error_lines(capfd.readouterr().err)
    assert line.endswith("model.pte is empty (0 bytes): export it again with parakeet-export")


def test_a_method_that_fails_verification_is_called_damaged():
    from parakeet_executorch.runtime.et_errors import explain
    from parakeet_executorch.runtime.pte_checks import method_load_hint

    damaged = explain("Failed to load method preprocessor, error: 0x23", "Arg index 16713426 >= 2139")
    assert "damaged or truncated: export it again" in method_load_hint(damaged)
    missing = explain("Failed to load method encoder, error: 0x14", "Missing operator: torchao::x.out")
    assert "backend or kernel library this runtime lacks" in method_load_hint(missing)


def test_error_tables_cover_executorchs_error_codes():
    """Both runners' tables list exactly executorch's Error enum, with the same words."""
    import executorch

    from parakeet_executorch.runtime.et_errors import ERROR_CODES

    header = Path(list(executorch.__path__)[0]) / "include" / "executorch" / "runtime" / "core" / "error.h"
    enum = {
        int(code, 16): name
        for name, code in re.findall(r"^\s+(\w+) = (0x[0-9a-fA-F]+),", header.read_text(), re.MULTILINE)
    }
    assert enum and {code: name for code, (name, _) in ERROR_CODES.items()} == enum
    cpp = (REPO / "examples" / "parakeet" / "runner" / "et_errors.cpp").read_text()
    entries = re.findall(r'\{(0x[0-9a-f]+), "(\w+)",\s*((?:"[^"]*"\s*)+)\}', cpp)
    cpp_table = {int(code, 16): (name, "".join(re.findall(r'"([^"]*)"', text))) for code, name, text in entries}
    assert cpp_table == ERROR_CODES


# ---- output formats, read back by real parsers ----------------------------------------------------------------


def _transcript(texts_and_times):
    from parakeet_executorch.decoding.timestamps import Span
    from parakeet_executorch.runtime.transcribe import Transcript

    segments = [Span(text, 0, 0, start, end) for text, start, end in texts_and_times]
    return Transcript(" ".join(t for t, _, _ in texts_and_times), segments=segments, words=list(segments))


SUBTITLE_INPUTS = {
    "one": [("a.wav", [("Hello there.", 0.0, 1.2), ("How are you?", 1.3, 2.5)])],
    "several": [
        ("a.wav", [("Hello there.", 0.0, 1.2), ("How are you?", 1.3, 2.5)]),
        ("b --> c.wav", [("Fine.", 0.4, 0.9)]),
        ("empty.wav", []),
    ],
}


@pytest.mark.parametrize("case", SUBTITLE_INPUTS)
def test_vtt_output_reads_back_with_a_webvtt_parser(case):
    import webvtt

    from parakeet_executorch.runtime.formats import render

    files = [(name, _transcript(segs)) for name, segs in SUBTITLE_INPUTS[case]]
    vtt = webvtt.from_string(render(files, "vtt", "none"))
    expected = [seg for _, segs in SUBTITLE_INPUTS[case] for seg in segs]
    assert [(c.text, c.start, c.end) for c in vtt.captions] == [
        (t, f"00:00:{s:06.3f}", f"00:00:{e:06.3f}") for t, s, e in expected
    ]
    assert all(c.identifier is None for c in vtt.captions), "a NOTE must not become a cue identifier"


@pytest.mark.parametrize("case", SUBTITLE_INPUTS)
def test_srt_output_reads_back_with_an_srt_parser(case):
    from datetime import timedelta

    import srt

    from parakeet_executorch.runtime.formats import render

    files = [(name, _transcript(segs)) for name, segs in SUBTITLE_INPUTS[case]]
    subs = list(srt.parse(render(files, "srt", "none")))
    expected = [seg for _, segs in SUBTITLE_INPUTS[case] for seg in segs]
    assert [(s.content, s.start, s.end) for s in subs] == [
        (t, timedelta(seconds=a), timedelta(seconds=b)) for t, a, b in expected
    ]
    assert [s.index for s in subs] == list(range(1, len(expected) + 1)), "cue numbers run on across files"


@pytest.mark.parametrize("fmt", ["txt", "json", "srt", "vtt"])
def test_every_format_of_two_files_parses(exported_xnnpack, jfk_path, bad_clips, capsys, fmt):
    import srt
    import webvtt

    from parakeet_executorch.runtime.subtitles import subtitle_cues

    transcript = make_transcriber(exported_xnnpack).transcribe(load_audio(jfk_path, SAMPLE_RATE))
    files = [str(jfk_path), str(bad_clips / "truncated.wav")]
    assert transcribe_main(["--model", str(exported_xnnpack / "model.pte"), "--format", fmt, *files]) == 0
    out = capsys.readouterr().out
    if fmt == "txt":
        lines = out.splitlines()
        assert len(lines) == 2 and lines[0] == f"{jfk_path}\t{transcript.text}" and lines[1].startswith(files[1])
    elif fmt == "json":
        assert [e["audio"] for e in json.loads(out)] == files
    elif fmt == "srt":
        subs = list(srt.parse(out))
        assert subs and subs[0].content == subtitle_cues(transcript.words)[0].text
        assert [s.index for s in subs] == list(range(1, len(subs) + 1))
    else:
        captions = webvtt.from_string(out).captions
        assert captions and captions[0].text == subtitle_cues(transcript.words)[0].text
        assert all(c.identifier is None for c in captions)


# ---- the audio loader, fuzzed ---------------------------------------------------------------------------------


def test_fuzzed_audio_loader_fails_only_with_audio_errors(tmp_path):
    """A few hundred damaged WAV/FLAC files (headers, bytes, lengths): each loads to finite float32 mono or raises
    AudioError; nothing else escapes, and no file takes long. A watchdog ends the run if the loader hangs."""
    import faulthandler
    import time
    import warnings

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from parakeet_executorch.testing.audio_mutations import EXTREMES, HEADER_BYTES, mutate, write_seeds

    seeds = [p.read_bytes() for p in write_seeds(tmp_path / "seeds")]
    header = st.integers(0, HEADER_BYTES - 1)
    mutation = st.one_of(
        st.tuples(st.just("byte"), header, st.integers(0, 255)),
        st.tuples(st.just("word"), header, st.sampled_from(EXTREMES)),
        st.tuples(st.just("anybyte"), st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
        st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
        st.tuples(st.just("append"), st.integers(1, 300), st.integers(0, 255)),
    )
    path = tmp_path / "fuzzed"
    slowest = [0.0]

    @settings(
        max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(
        seed=st.sampled_from(range(len(seeds))),
        mutations=st.lists(mutation, min_size=1, max_size=4),
        non_finite=st.sampled_from(["error", "zero"]),
    )
    def check(seed, mutations, non_finite):
        suffix = ".flac" if seeds[seed][:4] == b"fLaC" else ".wav"
        target = path.with_suffix(suffix)
        target.write_bytes(mutate(seeds[seed], mutations))
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AudioWarning)
                audio = load_audio(target, SAMPLE_RATE, non_finite=non_finite)
        except AudioError as exc:
            assert str(target) in str(exc) and "\n" not in str(exc)
        else:
            assert audio.dtype == np.float32 and audio.ndim == 1 and np.isfinite(audio).all()
        slowest[0] = max(slowest[0], time.perf_counter() - t0)

    faulthandler.dump_traceback_later(240, exit=True)  # a hang inside libsndfile/libsoxr cannot be interrupted
    try:
        t0 = time.perf_counter()
        check()
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert slowest[0] < 5, f"one damaged file took {slowest[0]:.1f} s to load"
    assert time.perf_counter() - t0 < 60
