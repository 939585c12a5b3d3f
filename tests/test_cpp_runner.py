"""The C++ runner (examples/parakeet) against the Python runner: same tokens, timestamps and JSON; clean errors.

The runner is built once per session with the CI build script; a failed build fails these tests (it is what
users run on device, so it must build wherever the tests run).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SAMPLE_RATE, export_tiny, make_transcriber

BUILD_SCRIPT = REPO / ".ci" / "scripts" / "build_parakeet_runner.sh"
RUNNER = REPO / "cmake-out" / "examples" / "parakeet" / "parakeet_runner"
ERROR_PREFIX = "parakeet_runner: error: "


@pytest.fixture(scope="session")
def runner() -> Path:
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=REPO, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not RUNNER.is_file():
        pytest.fail(
            f"{BUILD_SCRIPT.relative_to(REPO)} failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}",
            pytrace=False,
        )
    return RUNNER


def run_runner(
    runner: Path,
    folder: Path | None,
    audio: Path | None,
    *extra: str,
    model: Path | None = None,
    tokenizer: Path | None = None,
) -> subprocess.CompletedProcess:
    args = [str(runner)]
    if model is not None or folder is not None:
        args += ["--model_path", str(model if model is not None else folder / "model.pte")]
    if tokenizer is not None or folder is not None:
        args += ["--tokenizer_path", str(tokenizer if tokenizer is not None else folder / "tokenizer.model")]
    if audio is not None:
        args += ["--audio_path", str(audio)]
    return subprocess.run(args + list(extra), capture_output=True, text=True, timeout=600)


def python_result(folder: Path, audio: Path):
    from parakeet_executorch.audio import load_audio

    transcriber = make_transcriber(folder)
    return transcriber.transcribe(load_audio(audio, transcriber.model.metadata.sample_rate))


def assert_same_as_python(runner: Path, folder: Path, audio: Path) -> dict:
    """Runs both runners on one file; token ids and every timestamp must be equal, and the JSON identical."""
    from parakeet_executorch.runtime.formats import render

    proc = run_runner(runner, folder, audio, "--format", "json", "--timestamps", "all")
    assert proc.returncode == 0, proc.stderr
    cpp = json.loads(proc.stdout)
    transcript = python_result(folder, audio)
    py = transcript.as_dict()
    assert len(py["tokens"]) >= 20, "the tiny model must emit tokens, or equality would prove nothing"
    assert [t["id"] for t in cpp["tokens"]] == [t["id"] for t in py["tokens"]]
    assert [(t["start"], t["end"]) for t in cpp["tokens"]] == [(t["start"], t["end"]) for t in py["tokens"]]
    assert cpp == py
    # Byte for byte, so that anything parsing the Python runner's JSON reads the C++ runner's the same way.
    assert proc.stdout.rstrip("\n") == render([(str(audio), transcript)], "json", "all")
    return cpp


CLIPS = ["jfk.wav", "jfk_48k_stereo.wav", "jfk_24bit.wav"]


def clip_path(name: str, jfk_path: Path, clips_dir: Path) -> Path:
    return jfk_path if name == "jfk.wav" else clips_dir / name


@pytest.mark.slow
@pytest.mark.parametrize("clip", CLIPS)
def test_fp32_matches_python_runner(runner, exported, jfk_path, clips_dir, clip):
    assert_same_as_python(runner, exported, clip_path(clip, jfk_path, clips_dir))


@pytest.mark.slow
def test_other_wav_encodings_match_python_runner(runner, exported_xnnpack, jfk_path, tmp_path):
    """float32 WAV, WAVE_FORMAT_EXTENSIBLE with 3 channels at 22.05 kHz in PCM 32, and a file with extra chunks."""
    import soundfile as sf

    mono, rate = sf.read(str(jfk_path), dtype="float32")
    sf.write(str(tmp_path / "float.wav"), mono, rate, subtype="FLOAT")
    three = np.stack([mono, 0.5 * mono, 0.2 * mono], axis=1)
    sf.write(str(tmp_path / "pcm32_3ch_22k.wav"), three, 22050, subtype="PCM_32")  # > 2 channels: extensible
    with sf.SoundFile(str(tmp_path / "chunks.wav"), "w", rate, 1, subtype="PCM_16") as f:
        f.title, f.artist = "jfk", "test"  # written as a LIST/INFO chunk
        f.write(mono)
    assert (tmp_path / "chunks.wav").read_bytes().find(b"LIST") > 0
    for name in ("float.wav", "pcm32_3ch_22k.wav", "chunks.wav"):
        assert_same_as_python(runner, exported_xnnpack, tmp_path / name)


@pytest.mark.slow
def test_silence_dc_and_low_noise_match_python_runner(runner, exported_xnnpack, tmp_path):
    """11 s of zeros, of DC and of -80 dBFS noise: the preprocessor's reordered sums and elementwise divisions
    (export/preprocessor_rewrites.py) must give the C++ runner's kernels the Python runner's bits too, or constant
    mel bands would normalise differently."""
    import soundfile as sf

    n = 11 * SAMPLE_RATE
    signals = {
        "zeros.wav": np.zeros(n, np.float32),
        "dc.wav": np.full(n, 0.3, np.float32),
        "low_noise.wav": (np.random.RandomState(n).randn(n) * 1e-4).astype(np.float32),
    }
    for name, audio in signals.items():
        sf.write(str(tmp_path / name), audio, SAMPLE_RATE, subtype="FLOAT")
        assert_same_as_python(runner, exported_xnnpack, tmp_path / name)


def _recipe_on(recipe: str, backends: tuple[str, ...]) -> str | None:
    from parakeet_executorch.export.recipe_registry import RECIPES, get_recipe

    return next((b for b in backends if recipe in RECIPES and get_recipe(recipe).runs_on(b)), None)


# The quantization recipes are another issue's work; these tests run as soon as the export offers them (the
# condition is re-read from the export's own recipe table), and until then they must fail for that reason only.
_NO_8DA4W = _recipe_on("8da4w", ("xnnpack",)) is None
_NO_FPA4W = _recipe_on("fpa4w", ("xnnpack", "portable")) is None


@pytest.mark.slow
@pytest.mark.xfail(
    _NO_8DA4W,
    strict=True,
    raises=SystemExit,
    reason="parakeet-export has no --quantize 8da4w recipe yet (argparse rejects the choice)",
)
@pytest.mark.parametrize("clip", CLIPS)
def test_8da4w_matches_python_runner(runner, tiny_nemo, export_root, jfk_path, clips_dir, clip):
    folder = export_tiny(tiny_nemo, export_root, "xnnpack", "--quantize", "8da4w")
    assert_same_as_python(runner, folder, clip_path(clip, jfk_path, clips_dir))


@pytest.mark.slow
@pytest.mark.xfail(
    _NO_FPA4W,
    strict=True,
    raises=SystemExit,
    reason="parakeet-export has no --quantize fpa4w recipe yet (argparse rejects the choice)",
)
def test_fpa4w_matches_python_runner(runner, tiny_nemo, export_root, jfk_path):
    backend = _recipe_on("fpa4w", ("xnnpack", "portable")) or "xnnpack"
    folder = export_tiny(tiny_nemo, export_root, backend, "--quantize", "fpa4w")
    assert_same_as_python(runner, folder, jfk_path)


@pytest.mark.slow
def test_text_output_and_timings(runner, exported_xnnpack, jfk_path):
    proc = run_runner(runner, exported_xnnpack, jfk_path)
    assert proc.returncode == 0, proc.stderr
    expected = python_result(exported_xnnpack, jfk_path).text
    assert proc.stdout == expected + "\n", "stdout must hold the transcript alone, on one line"
    for stage in ("load:", "preprocess:", "encode:", "decode:", "RTFx"):
        assert stage in proc.stderr
    assert expected not in proc.stderr


@pytest.mark.slow
def test_text_output_with_word_timestamps(runner, exported_xnnpack, jfk_path):
    from parakeet_executorch.runtime.formats import render

    proc = run_runner(runner, exported_xnnpack, jfk_path, "--timestamps", "word")
    assert proc.returncode == 0, proc.stderr
    expected = render([(str(jfk_path), python_result(exported_xnnpack, jfk_path))], "txt", "word")
    assert proc.stdout.rstrip("\n") == expected


# ---- errors: one line naming the problem, a non-zero exit, nothing on stdout -------------------------------------


def assert_clean_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode != 0, proc.stdout
    assert proc.returncode not in (-6, -11, 134, 139), f"crashed: {proc.stderr}"
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1, proc.stderr
    others = [line for line in lines if not line.startswith((ERROR_PREFIX, "load:"))]
    assert others == [], f"stderr should hold only the error (after the load timing):\n{proc.stderr}"
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def test_missing_model(runner, tmp_path, jfk_path):
    proc = run_runner(runner, None, jfk_path, model=tmp_path / "nope.pte", tokenizer=tmp_path / "t.model")
    assert_clean_error(proc, "model file not found", "nope.pte")


@pytest.mark.slow
def test_missing_tokenizer(runner, exported_xnnpack, tmp_path, jfk_path):
    proc = run_runner(runner, exported_xnnpack, jfk_path, tokenizer=tmp_path / "missing.model")
    assert_clean_error(proc, "tokenizer file not found", "missing.model")


@pytest.mark.slow
def test_missing_audio(runner, exported_xnnpack, tmp_path):
    proc = run_runner(runner, exported_xnnpack, tmp_path / "missing.wav")
    assert_clean_error(proc, "audio file not found", "missing.wav")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["folder", "empty"])
def test_folder_or_empty_audio_is_named_as_the_python_runner_names_it(runner, exported_xnnpack, tmp_path, kind):
    from parakeet_executorch.audio import AudioError, load_audio

    path = tmp_path / "clip.wav"
    if kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"")
    with pytest.raises(AudioError) as python_error:
        load_audio(path, SAMPLE_RATE)
    message = assert_clean_error(run_runner(runner, exported_xnnpack, path), str(path))
    assert message == ERROR_PREFIX + str(python_error.value)
    assert ("folder" if kind == "folder" else "empty (0 bytes)") in message


@pytest.mark.slow
def test_missing_data_file(runner, exported_xnnpack, tmp_path, jfk_path):
    proc = run_runner(runner, exported_xnnpack, jfk_path, "--data_path", str(tmp_path / "weights.ptd"))
    assert_clean_error(proc, "data file not found", "weights.ptd")


@pytest.mark.slow
def test_undecodable_audio(runner, exported_xnnpack, transcriber_xnnpack, tmp_path):
    """libsndfile's reason in both runners' words alike (soundfile's own "Error opening ..." prefix dropped), so
    several files' JSON with an error entry stays byte-identical between them."""
    fake = tmp_path / "notes.wav"
    fake.write_text("this is a text file, not audio\n")
    proc = run_runner(runner, exported_xnnpack, fake)
    assert_clean_error(proc, "cannot decode audio file", "notes.wav")
    cpp_line = [line for line in proc.stderr.splitlines() if line.startswith(ERROR_PREFIX)][0]
    py_code, _, py_err = python_cli(transcriber_xnnpack, fake, [])
    assert py_code == 2 and cpp_error_as_python(cpp_line) == py_err.splitlines()[-1]
    assert "Error opening" not in py_err


@pytest.mark.slow
def test_audio_longer_than_the_pte_supports(runner, exported_xnnpack, tmp_path):
    import soundfile as sf

    meta = make_transcriber(exported_xnnpack).model.metadata
    long = tmp_path / "long.wav"
    sf.write(str(long), np.zeros(meta.max_audio_samples + meta.sample_rate, np.float32), meta.sample_rate)
    proc = run_runner(runner, exported_xnnpack, long, "--chunk_seconds", "0")  # one pass only
    assert_clean_error(proc, "supports up to", "in one pass", "--chunk_seconds", "--max-audio-seconds")
    buffered = run_runner(runner, exported_xnnpack, long)  # by default such a file is decoded buffered
    assert buffered.returncode == 0 and "; 2 windows;" in buffered.stderr, buffered.stderr


def test_file_that_is_not_a_pte(runner, tmp_path, jfk_path):
    fake = tmp_path / "model.pte"
    fake.write_bytes(b"not a flatbuffer" * 64)
    proc = run_runner(runner, None, jfk_path, model=fake, tokenizer=tmp_path / "tokenizer.model")
    assert_clean_error(proc, "cannot load", "ExecuTorch program")


@pytest.fixture(scope="session")
def one_method_pte(tmp_path_factory) -> Path:
    """A real ExecuTorch program whose only method is called preprocessor."""
    import torch
    from executorch.exir import to_edge

    class Toy(torch.nn.Module):
        def forward(self, x):
            return x * 2.0

    program = torch.export.export(Toy(), (torch.zeros(4),))
    path = tmp_path_factory.mktemp("toy") / "model.pte"
    path.write_bytes(to_edge({"preprocessor": program}).to_executorch().buffer)
    return path


@pytest.mark.slow
def test_pte_missing_methods(runner, one_method_pte, exported_xnnpack, jfk_path):
    proc = run_runner(runner, None, jfk_path, model=one_method_pte, tokenizer=exported_xnnpack / "tokenizer.model")
    line = assert_clean_error(proc, "lacks method(s)", "encoder", "decoder_step", "joint", "blank_id")
    assert "preprocessor," not in line


@pytest.fixture(scope="session")
def other_tokenizer(tmp_path_factory, exported_xnnpack) -> tuple[Path, int]:
    """A SentencePiece model trained here with a vocabulary size other than the tiny model's."""
    import sentencepiece as spm

    from parakeet_executorch.testing.tokenizer_corpus import corpus_lines

    size = make_transcriber(exported_xnnpack).model.metadata.vocab_size - 7
    prefix = tmp_path_factory.mktemp("other_tokenizer") / "tokenizer"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus_lines(2000, seed=1)),
        model_prefix=str(prefix),
        vocab_size=size,
        model_type="bpe",
        minloglevel=2,
    )
    return prefix.with_suffix(".model"), size


@pytest.mark.slow
def test_tokenizer_of_another_size(runner, exported_xnnpack, other_tokenizer, jfk_path):
    path, size = other_tokenizer
    proc = run_runner(runner, exported_xnnpack, jfk_path, tokenizer=path)
    vocab = make_transcriber(exported_xnnpack).model.metadata.vocab_size
    assert_clean_error(proc, f"has {size} tokens", f"vocabulary has {vocab}")


@pytest.mark.slow
def test_tokenizer_file_that_is_not_sentencepiece(runner, exported_xnnpack, tmp_path, jfk_path):
    fake = tmp_path / "tokenizer.model"
    fake.write_bytes(b"\x00\xffgarbage" * 100)
    proc = run_runner(runner, exported_xnnpack, jfk_path, tokenizer=fake)
    assert_clean_error(proc, "is not a SentencePiece model")


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([], "--model_path is required"),
        (["--model_path", "m.pte"], "--audio_path is required"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--format", "srt"], "--format must be text, json or jsonl"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--timestamps", "char"], "--timestamps must be"),
        (["--bogus"], "unknown argument"),
        (["--model_path", "m.pte", "--stream", "x.raw"], "--stream takes '-'"),
        (["--model_path", "m.pte", "--stream", "-", "--audio_path", "a.wav"], "exclusive"),
        (["--model_path", "m.pte", "--stream", "-", "--format", "json"], "needs the whole transcript"),
        (["--model_path", "m.pte", "--stream", "-", "--chunk_seconds", "0"], "cannot be used with --stream"),
        (["--model_path", "m.pte", "--stream", "-", "--stream_rate", "0"], "must be positive"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--chunk_seconds", "ten"], "must be a number of seconds"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--repeat", "0"], "--repeat must be a positive number"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--repeat", "-2"], "--repeat must be a positive number"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--repeat", "two"], "--repeat must be a whole number"),
        (["--model_path", "m.pte", "--stream", "-", "--repeat", "2"], "--repeat is for audio files"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--threads", "0"], "--threads must be between 1 and"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--threads", "5000"], "--threads must be between 1 and"),
        (["--model_path", "m.pte", "--audio_path", "a.wav", "--threads", "two"], "--threads must be a whole number"),
    ],
)
def test_bad_arguments(runner, args, fragment):
    proc = subprocess.run([str(runner), *args], capture_output=True, text=True, timeout=60)
    assert_clean_error(proc, fragment)


# ---- long and live audio: buffered decoding, block readers, --stream - ---------------------------------------------

AUDIO_BLOCKS = RUNNER.parent / "parakeet_audio_blocks"
SMALL_CONTEXT = ["--chunk_seconds", "8", "--left_context_seconds", "4", "--right_context_seconds", "2"]


@pytest.fixture(scope="module")
def long_clips(tmp_path_factory, jfk_audio) -> dict:
    """jfk.wav six times with a little silence between (68 s, past the default .pte's bound) at 16 kHz and 44.1 kHz
    PCM16, a 48 kHz stereo copy, and the 16 kHz samples as raw PCM16."""
    import soundfile as sf
    import soxr

    gap = np.zeros(int(0.37 * SAMPLE_RATE), np.float32)
    long = np.concatenate([np.concatenate([jfk_audio, gap])] * 6)
    d = tmp_path_factory.mktemp("long")
    sf.write(str(d / "long16.wav"), long, SAMPLE_RATE, subtype="PCM_16")
    sf.write(str(d / "long44.wav"), soxr.resample(long, SAMPLE_RATE, 44100), 44100, subtype="PCM_16")
    up = soxr.resample(long, SAMPLE_RATE, 48000)
    sf.write(str(d / "long48_stereo.wav"), np.stack([0.9 * up, 0.6 * up], axis=1), 48000, subtype="PCM_16")
    pcm, _ = sf.read(str(d / "long16.wav"), dtype="int16")
    return {
        "16k": d / "long16.wav",
        "44k": d / "long44.wav",
        "48k_stereo": d / "long48_stereo.wav",
        "raw16": pcm.tobytes(),
    }


def pcm_bytes(path: Path) -> bytes:
    import soundfile as sf

    return sf.read(str(path), dtype="int16", always_2d=True)[0].tobytes()


# The C++ runner's flags and usage are its own (underscores, --audio_path); otherwise its messages are the Python
# runner's word for word.
_PYTHON_SPELLING = {
    "--chunk_seconds": "--chunk-seconds",
    "--left_context_seconds": "--left-context-seconds",
    "--right_context_seconds": "--right-context-seconds",
    "--stream_rate": "--stream-rate",
    "--stream_channels": "--stream-channels",
    "pass the file with --audio_path": "pass the file as an argument",
}


def cpp_error_as_python(line: str) -> str:
    for cpp, py in _PYTHON_SPELLING.items():
        if cpp.startswith("--") or " " in cpp:
            line = line.replace(cpp, py)
    return line.replace(ERROR_PREFIX, "parakeet-transcribe: error: ")


def python_cli(transcriber, audio: Path | None, args: list[str], stdin: bytes | None = None):
    """parakeet-transcribe's main() in this process (the session's transcriber, stdin from bytes): (exit code,
    stdout, stderr). Its argument spellings are translated from the C++ runner's."""
    import contextlib
    import io
    from unittest import mock

    from parakeet_executorch.runtime import cli

    argv = [
        "--model",
        "unused.pte",
        *([str(audio)] if audio is not None else []),
        *(_PYTHON_SPELLING.get(a, a) for a in args),
    ]
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(cli, "load_transcriber", lambda *_a, **_k: transcriber),
        mock.patch("parakeet_executorch.audio_stream.stdin_binary", lambda: io.BytesIO(stdin or b"")),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def cpp_cli(runner: Path, folder: Path, audio: Path | None, args: list[str], stdin: bytes | None = None):
    cmd = [str(runner), "--model_path", str(folder / "model.pte")]
    cmd += ["--audio_path", str(audio)] if audio is not None else []
    proc = subprocess.run(cmd + args, input=stdin if stdin is not None else b"", capture_output=True, timeout=600)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def test_block_readers_give_python_samples(runner, long_clips, tmp_path):
    """The file and PCM readers resample with libsoxr exactly as audio_stream.py (python-soxr's ResampleStream):
    same blocks, same samples, at 48 kHz stereo and 44.1 kHz mono, each longer than one 65536-frame block."""
    from parakeet_executorch.audio_stream import read_blocks, read_pcm_blocks

    def cpp_blocks(args, stdin=None):
        feed = {"stdin": stdin} if hasattr(stdin, "read") else {"input": stdin}
        proc = subprocess.run([str(AUDIO_BLOCKS), *args], **feed, capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()
        return np.frombuffer(proc.stdout, np.float32), [int(n) for n in proc.stderr.split()]

    for name, rate, channels in (("48k_stereo", 48000, 2), ("44k", 44100, 1), ("16k", SAMPLE_RATE, 1)):
        path = long_clips[name]
        py = list(read_blocks(path, SAMPLE_RATE))
        samples, lengths = cpp_blocks([str(path), str(SAMPLE_RATE)])
        assert len(py) > 10 and lengths == [len(b) for b in py]
        assert np.array_equal(samples, np.concatenate(py)), name
        raw = pcm_bytes(path)
        raw_file = tmp_path / f"{name}.raw"
        raw_file.write_bytes(raw)
        with open(raw_file, "rb") as f:
            py = list(read_pcm_blocks(f, rate, channels, SAMPLE_RATE))
        pcm_args = ["-", str(rate), str(channels), str(SAMPLE_RATE)]
        with open(raw_file, "rb") as f:
            samples, lengths = cpp_blocks(pcm_args, stdin=f)
        assert lengths == [len(b) for b in py]
        assert np.array_equal(samples, np.concatenate(py)), name
        # Through a pipe a read takes what is there, so the blocks differ; libsoxr's samples do not.
        assert np.array_equal(cpp_blocks(pcm_args, stdin=raw)[0], samples), name


@pytest.mark.slow
@pytest.mark.parametrize("clip", ["16k", "44k"])
def test_long_file_small_contexts_match_python(runner, exported_xnnpack, transcriber_xnnpack, long_clips, clip):
    path = long_clips[clip]
    args = ["--format", "json", *SMALL_CONTEXT]
    code, cpp_out, cpp_err = cpp_cli(runner, exported_xnnpack, path, args)
    assert code == 0, cpp_err
    py_code, py_out, py_err = python_cli(transcriber_xnnpack, path, args)
    assert py_code == 0, py_err
    result = json.loads(cpp_out)
    assert len(result["tokens"]) > 100 and result["tokens"][-1]["end"] > 60
    assert cpp_out == py_out  # byte for byte
    assert "68.22 s of audio; 9 windows;" in cpp_err and "68.22 s of audio; 9 windows;" in py_err


@pytest.mark.slow
def test_long_file_default_contexts_match_python(runner, exported_xnnpack, transcriber_xnnpack, long_clips):
    for clip, fmt in (("16k", "json"), ("44k", "jsonl")):
        args = ["--format", fmt]
        code, cpp_out, cpp_err = cpp_cli(runner, exported_xnnpack, long_clips[clip], args)
        assert code == 0, cpp_err
        assert cpp_out == python_cli(transcriber_xnnpack, long_clips[clip], args)[1]
        assert "; 2 windows;" in cpp_err  # 4 | 34 | 2 s (the default bound), evened, over 68 s
    quiet = cpp_cli(runner, exported_xnnpack, long_clips["16k"], ["--quiet", *SMALL_CONTEXT])
    assert quiet[0] == 0 and quiet[2].splitlines()[1:] == []  # the load time only


@pytest.mark.slow
def test_long_file_progress_bar_on_a_terminal(runner, exported_xnnpack, jfk_path):
    """A plain text bar on stderr when it is a terminal, cleared at the end; stdout unchanged."""
    import os
    import pty

    args = [
        str(runner),
        "--model_path",
        str(exported_xnnpack / "model.pte"),
        "--audio_path",
        str(jfk_path),
        "--chunk_seconds",
        "2",
        "--right_context_seconds",
        "1",
    ]
    plain = subprocess.run(args, capture_output=True, timeout=120)
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=terminal, timeout=120)
        os.close(terminal)
        terminal = -1
        seen = b""
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:
                break
            if not data:
                break
            seen += data
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert proc.returncode == 0 and proc.stdout == plain.stdout
    assert b"s audio [" in seen and b"100%|" in seen and b"\r\x1b[K" in seen
    assert b"s audio [" not in plain.stderr  # not on a pipe


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, args",
    [
        ("jsonl-small", ["--format", "jsonl", *SMALL_CONTEXT]),
        ("text-live-defaults", []),
        (
            "jsonl-44k-stereo-partial",
            [
                "--format",
                "jsonl",
                "--partial",
                "--stream_rate",
                "44100",
                "--stream_channels",
                "2",
                "--timestamps",
                "none",
            ],
        ),
    ],
)
def test_stdin_stream_matches_python(runner, exported_xnnpack, transcriber_xnnpack, long_clips, tmp_path, name, args):
    if "--stream_channels" in args:
        import soundfile as sf
        import soxr

        mono, _ = sf.read(str(long_clips["16k"]), dtype="float32", frames=20 * SAMPLE_RATE)
        up = soxr.resample(mono, SAMPLE_RATE, 44100)
        sf.write(str(tmp_path / "s.wav"), np.stack([0.9 * up, 0.5 * up], axis=1), 44100, subtype="PCM_16")
        stdin = pcm_bytes(tmp_path / "s.wav")
    else:
        stdin = long_clips["raw16"]
    code, cpp_out, cpp_err = cpp_cli(runner, exported_xnnpack, None, ["--stream", "-", *args], stdin=stdin)
    assert code == 0, cpp_err
    py_code, py_out, py_err = python_cli(transcriber_xnnpack, None, ["--stream", "-", *args], stdin=stdin)
    assert py_code == 0, py_err
    assert cpp_out == py_out  # byte for byte: the same chunks, keys, rounding and text
    if "jsonl" in args:
        chunks = [json.loads(line) for line in cpp_out.splitlines()]
        assert len(chunks) >= 7 and all(c["final"] for c in chunks)
        assert ("draft" in chunks[0]) == ("--partial" in args)
    else:
        assert cpp_out.endswith("\n") and len(cpp_out) > 100


@pytest.mark.slow
@pytest.mark.parametrize(
    "audio, stdin, args",
    [
        (None, b"\x00" * 64, ["--right_context_seconds", "-1"]),
        (None, b"\x00" * 64, ["--chunk_seconds", "0.01"]),
        (None, b"\x00" * 64, ["--left_context_seconds", "70"]),
        (None, b"\x00" * 64, ["--chunk_seconds", "inf"]),
        ("jfk", None, ["--left_context_seconds", "-2"]),
        ("jfk", None, ["--chunk_seconds", "50", "--right_context_seconds", "30"]),
        ("long", None, ["--chunk_seconds", "0"]),
        (None, "wav", []),
        (None, b"\x01\x02\x03", []),
        (None, b"\x00" * 6002, ["--stream_channels", "2"]),
        (None, b"", []),
        (None, b"", ["--format", "jsonl"]),
    ],
    ids=[
        "negative",
        "chunk-below-a-frame",
        "window-past-bound",
        "inf",
        "file-negative",
        "file-window-past-bound",
        "one-pass-past-bound",
        "wav-on-stdin",
        "mid-frame",
        "mid-frame-stereo",
        "empty",
        "empty-jsonl",
    ],
)
def test_bad_long_and_live_input(
    runner, exported_xnnpack, transcriber_xnnpack, jfk_path, long_clips, audio, stdin, args
):
    """Exit 2 with one error line, the Python runner's message (in the C++ runner's spelling of its flags); an empty
    stream is an empty transcript with exit 0, exactly as the Python runner prints it."""
    path = {"jfk": jfk_path, "long": long_clips["16k"], None: None}[audio]
    stdin = jfk_path.read_bytes() if stdin == "wav" else stdin
    if path is None:
        args = ["--stream", "-", *args]
    code, cpp_out, cpp_err = cpp_cli(runner, exported_xnnpack, path, args, stdin=stdin)
    py_code, py_out, py_err = python_cli(transcriber_xnnpack, path, args, stdin=stdin)
    assert code == py_code
    assert cpp_out == py_out
    if py_code == 0:
        assert cpp_out.strip() in ("", '{"start": 0.0, "end": 0.0, "text": "", "final": true, "tokens": []}')
        return
    assert code == 2 and cpp_out == ""
    errors = [line for line in cpp_err.splitlines() if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1 and cpp_err.splitlines()[-1] == errors[0], cpp_err
    assert cpp_error_as_python(errors[0]) == py_err.splitlines()[-1]


def test_help_documents_several_files_and_the_new_flags(runner):
    proc = subprocess.run([str(runner), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for fragment in (
        "[--audio_path AUDIO ...]",
        "repeat it for several files",
        "--zero_non_finite",
        "--ignore_tokenizer_fingerprint",
    ):
        assert fragment in proc.stdout


# ---- damaged audio, several files, another export's tokenizer, damaged .pte -------------------------------------

WARNING_PREFIX = "parakeet_runner: warning: "


def run_files(runner: Path, folder: Path, files: list, *extra: str) -> subprocess.CompletedProcess:
    args = [a for f in files for a in ("--audio_path", str(f))]
    return run_runner(runner, folder, None, *args, *extra)


def python_results(folder: Path, files: list) -> list:
    """What parakeet-transcribe produces for these files (failures in place), with its stderr left to pytest."""
    import warnings

    from parakeet_executorch.runtime.cli import transcribe_files

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transcribe_files(make_transcriber(folder), [str(f) for f in files], keep_going=True)


def assert_not_crashed(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode in (0, 2), f"exit {proc.returncode} (a signal if negative):\n{proc.stderr[-3000:]}"


@pytest.mark.slow
def test_nan_samples_are_refused(runner, exported_xnnpack, bad_clips):
    proc = run_runner(runner, exported_xnnpack, bad_clips / "nan.wav")
    assert_clean_error(
        proc, str(bad_clips / "nan.wav"), "sample 16000 at 1.000 s is nan (100 non-finite samples)", "--zero_non_finite"
    )


@pytest.mark.slow
def test_inf_in_one_channel_is_refused(runner, exported_xnnpack, bad_clips):
    proc = run_runner(runner, exported_xnnpack, bad_clips / "inf_stereo.wav")
    assert_clean_error(proc, "sample 24000 at 1.500 s is inf (1 non-finite sample)")


@pytest.mark.slow
def test_zero_non_finite_matches_python(runner, exported_xnnpack, bad_clips):
    from parakeet_executorch.runtime.formats import render

    proc = run_runner(runner, exported_xnnpack, bad_clips / "nan.wav", "--zero_non_finite", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith(WARNING_PREFIX)]
    assert warnings == [
        f"{WARNING_PREFIX}{bad_clips / 'nan.wav'}: sample 16000 at 1.000 s is nan "
        "(100 non-finite samples); replaced by silence"
    ]
    import warnings as py_warnings

    from parakeet_executorch.audio import load_audio

    transcriber = make_transcriber(exported_xnnpack)
    with py_warnings.catch_warnings():
        py_warnings.simplefilter("ignore")
        audio = load_audio(bad_clips / "nan.wav", SAMPLE_RATE, non_finite="zero")
    assert proc.stdout.rstrip("\n") == render(
        [(str(bad_clips / "nan.wav"), transcriber.transcribe(audio))], "json", "all"
    )


@pytest.mark.slow
@pytest.mark.parametrize("fmt, py_fmt", [("json", "json"), ("text", "txt")])
def test_one_bad_file_does_not_throw_away_the_others(
    runner, exported_xnnpack, jfk_path, bad_clips, tmp_path, fmt, py_fmt
):
    from parakeet_executorch.runtime.formats import render

    missing = tmp_path / "missing.wav"
    files = [jfk_path, missing, bad_clips / "nan.wav", bad_clips / "truncated.wav"]
    proc = run_files(runner, exported_xnnpack, files, "--format", fmt)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith(ERROR_PREFIX)]
    assert errors[0] == f"{ERROR_PREFIX}audio file not found: {missing}" and "nan.wav" in errors[1]
    assert len(errors) == 2 and "parakeet_runner: 2 of 4 files failed" in proc.stderr
    assert f"{jfk_path}: 11.00 s of audio" in proc.stderr
    py = render(python_results(exported_xnnpack, files), py_fmt, "all" if fmt == "json" else "none")
    if fmt == "json":
        # Byte for byte, except the NaN file's fix, which names each runner's own flag.
        py = py.replace("--zero-non-finite", "--zero_non_finite")
    assert proc.stdout.rstrip("\n") == py


@pytest.mark.slow
def test_truncated_wav_warns_and_matches_python(runner, exported_xnnpack, bad_clips):
    proc = run_runner(runner, exported_xnnpack, bad_clips / "truncated.wav")
    assert proc.returncode == 0, proc.stderr
    [warning] = [line for line in proc.stderr.splitlines() if line.startswith(WARNING_PREFIX)]
    assert warning == (
        f"{WARNING_PREFIX}{bad_clips / 'truncated.wav'} is truncated: its header promises 352000 "
        "bytes of audio but the file holds 175961; transcribing the 5.50 s that are there. Re-copy or "
        "re-encode the file if the rest matters."
    )
    assert proc.stdout == python_result(exported_xnnpack, bad_clips / "truncated.wav").text + "\n"


@pytest.mark.slow
def test_tokenizer_of_the_same_size_from_another_export(runner, exported_xnnpack, same_size_tokenizer, jfk_path):
    proc = run_runner(runner, exported_xnnpack, jfk_path, tokenizer=same_size_tokenizer)
    assert_clean_error(proc, f"tokenizer {same_size_tokenizer} is not the one", "--ignore_tokenizer_fingerprint")
    proc = run_runner(
        runner, exported_xnnpack, jfk_path, "--ignore_tokenizer_fingerprint", tokenizer=same_size_tokenizer
    )
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr


@pytest.mark.slow
def test_pte_without_fingerprint_loads_with_one_warning(
    runner, exported_without_fingerprint, exported_xnnpack, jfk_path
):
    proc = run_files(runner, exported_without_fingerprint, [jfk_path, jfk_path])
    assert proc.returncode == 0, proc.stderr
    [warning] = [line for line in proc.stderr.splitlines() if line.startswith(WARNING_PREFIX)]
    assert "carries no tokenizer fingerprint" in warning
    text = python_result(exported_xnnpack, jfk_path).text
    assert proc.stdout == f"{jfk_path}\t{text}\n{jfk_path}\t{text}\n"


def test_empty_pte_is_named_as_empty(runner, exported_xnnpack, tmp_path, jfk_path):
    (tmp_path / "model.pte").write_bytes(b"")
    proc = run_runner(
        runner, None, jfk_path, model=tmp_path / "model.pte", tokenizer=exported_xnnpack / "tokenizer.model"
    )
    assert_clean_error(proc, "model.pte is empty (0 bytes): export it again with parakeet-export")


@pytest.mark.slow
def test_truncated_pte_says_what_the_error_code_means(runner, exported_xnnpack, tmp_path, jfk_path):
    data = (exported_xnnpack / "model.pte").read_bytes()
    (tmp_path / "model.pte").write_bytes(data[: len(data) // 2])
    proc = run_runner(
        runner, None, jfk_path, model=tmp_path / "model.pte", tokenizer=exported_xnnpack / "tokenizer.model"
    )
    assert_clean_error(
        proc,
        "ExecuTorch error 0x23 InvalidProgram",
        "truncated or corrupt .pte",
        "runtime says: File size is too small",
    )


@pytest.mark.slow
def test_fuzzed_audio_files_give_an_error_line_or_a_transcript(runner, exported_xnnpack, tmp_path):
    """200 damaged WAV/FLAC files in one run: each gets exactly one error line naming it or is transcribed (a
    timing line); the runner exits 0 or 2, never on a signal. After a crash, each file is run alone to name the
    culprits."""
    from parakeet_executorch.testing.audio_mutations import write_mutants

    files = write_mutants(tmp_path, 200, seed=0)
    proc = run_files(runner, exported_xnnpack, files)
    if proc.returncode not in (0, 2):
        crashers = [f.name for f in files if run_runner(runner, exported_xnnpack, f).returncode not in (0, 2)]
        pytest.fail(f"runner exit {proc.returncode} on the damaged files; alone, these crash it: {crashers}")
    lines = proc.stderr.splitlines()
    for f in files:
        errors = [line for line in lines if line.startswith(ERROR_PREFIX) and str(f) in line]
        timed = [line for line in lines if line.startswith(f"{f}: ") and " s of audio; " in line]
        assert len(errors) + len(timed) == 1, f"{f.name}: {errors + timed}"
        assert all(line.count("\n") == 0 for line in errors)


# ---- --repeat: the runners as benchmarks ------------------------------------------------------------------------

_RUN_LINE = re.compile(
    r"^(?P<path>.+?) \(run (?P<i>\d+)/(?P<n>\d+)\): [0-9.]+ s of audio; preprocess: (?P<preprocess>[0-9.]+) s, "
    r"encode: (?P<encode>[0-9.]+) s, decode: (?P<decode>[0-9.]+) s; wall: (?P<wall>[0-9.]+) s; RTFx [0-9.]+$"
)
_MEDIAN_LINE = re.compile(
    r"^(?P<path>.+?): median of (?P<n>\d+) runs: preprocess: (?P<preprocess>[0-9.]+) s, encode: (?P<encode>[0-9.]+) "
    r"s, decode: (?P<decode>[0-9.]+) s; wall: (?P<wall>[0-9.]+) s; RTFx [0-9.]+$"
)


def assert_repeat_report(stderr: str, path: str, runs: int) -> None:
    """One timing line per run, in order, then one medians line whose figures are the medians of the runs' (to the
    printed millisecond)."""
    lines = [m for m in map(_RUN_LINE.match, stderr.splitlines()) if m]
    assert [(m["path"], int(m["i"]), int(m["n"])) for m in lines] == [(path, i, runs) for i in range(1, runs + 1)]
    medians = [m for m in map(_MEDIAN_LINE.match, stderr.splitlines()) if m]
    assert len(medians) == 1 and medians[0]["path"] == path and int(medians[0]["n"]) == runs, stderr
    for key in ("preprocess", "encode", "decode", "wall"):
        assert float(medians[0][key]) == pytest.approx(np.median([float(m[key]) for m in lines]), abs=1.5e-3), key


@pytest.mark.slow
def test_repeat_times_each_run_and_prints_the_transcript_once(runner, exported_xnnpack, jfk_path, long_clips):
    """--repeat N (both runners): N timing lines and their medians on stderr, stdout the transcript of one run; a
    file past one window is repeated buffered, as a single run of it is."""
    once = cpp_cli(runner, exported_xnnpack, jfk_path, ["--format", "json"])
    assert once[0] == 0, once[2]
    code, out, err = cpp_cli(runner, exported_xnnpack, jfk_path, ["--format", "json", "--repeat", "3"])
    assert code == 0, err
    assert out == once[1]
    assert_repeat_report(err, str(jfk_path), 3)
    assert "gave another transcript" not in err
    transcriber = make_transcriber(exported_xnnpack)
    py = python_cli(transcriber, jfk_path, ["--format", "json", "--repeat", "3"])
    assert py[0] == 0, py[2]
    assert json.loads(py[1]) == json.loads(out)
    assert_repeat_report(py[2], str(jfk_path), 3)

    long = long_clips["16k"]
    code, out, err = cpp_cli(runner, exported_xnnpack, long, [*SMALL_CONTEXT, "--repeat", "2", "--quiet"])
    assert code == 0, err
    assert out == cpp_cli(runner, exported_xnnpack, long, [*SMALL_CONTEXT, "--quiet"])[1]
    assert "median of" not in err and "(run " not in err, "--quiet prints no timings"


@pytest.mark.parametrize("threads", [1, 3])
def test_threads_sets_the_pool_and_keeps_the_transcript(runner, exported_xnnpack, jfk_path, threads):
    default = run_runner(runner, exported_xnnpack, jfk_path, "--format", "json")
    assert default.returncode == 0, default.stderr
    proc = run_runner(runner, exported_xnnpack, jfk_path, "--format", "json", "--threads", str(threads))
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"load: [0-9.]+ s, {threads} CPU threads\n", proc.stderr), proc.stderr
    assert json.loads(proc.stdout) == json.loads(default.stdout)
    from parakeet_executorch.runtime.threads import oversubscription_warning

    warning = oversubscription_warning(threads)  # the Python runner's words: the same in both
    assert (f"parakeet_runner: warning: {warning}\n" in proc.stderr) if warning else ("warning" not in proc.stderr)


@pytest.mark.slow
def test_default_contexts_on_a_pte_with_a_smaller_bound(runner, tiny_nemo, export_root, long_clips):
    """With --max-audio-seconds 20 the default chunk is 14 s in both runners (5 windows over 68 s, the same JSON),
    and contexts that leave no room for a chunk are the same one-line error."""
    folder = export_tiny(tiny_nemo, export_root, "xnnpack", "--max-audio-seconds", "20")
    transcriber = make_transcriber(folder)
    code, cpp_out, cpp_err = cpp_cli(runner, folder, long_clips["16k"], ["--format", "json"])
    assert code == 0, cpp_err
    py_code, py_out, py_err = python_cli(transcriber, long_clips["16k"], ["--format", "json"])
    assert py_code == 0 and cpp_out == py_out
    assert "68.22 s of audio; 5 windows;" in cpp_err and "68.22 s of audio; 5 windows;" in py_err
    args = ["--left_context_seconds", "10", "--right_context_seconds", "10"]
    code, cpp_out, cpp_err = cpp_cli(runner, folder, long_clips["16k"], args)
    py_code, py_out, py_err = python_cli(transcriber, long_clips["16k"], args)
    assert code == py_code == 2 and cpp_out == py_out == ""
    assert "leaves no chunk beside 10 s of left and 10 s of right context" in cpp_err.splitlines()[-1]
    assert cpp_err.splitlines()[-1].split("error: ", 1)[1] == py_err.splitlines()[-1].split("error: ", 1)[1]
    args = ["--left_context_seconds", "nan"]  # not a context that "leaves no chunk"
    code, cpp_out, cpp_err = cpp_cli(runner, folder, long_clips["16k"], args)
    py_code, py_out, py_err = python_cli(transcriber, long_clips["16k"], args)
    assert code == py_code == 2 and cpp_out == py_out == ""
    assert cpp_err.splitlines()[-1].endswith("--left_context_seconds must be a non-negative number of seconds, got nan")
    assert py_err.splitlines()[-1].endswith("--left-context-seconds must be a non-negative number of seconds, got nan")


@pytest.mark.slow
def test_format_txt_and_text_are_one_format_in_both_runners(runner, exported_xnnpack, transcriber_xnnpack, jfk_path):
    """The Python runner's ``txt`` and the C++ runner's ``text`` are accepted by both, with the same output."""
    outs = set()
    for name in ("txt", "text"):
        code, out, err = cpp_cli(runner, exported_xnnpack, jfk_path, ["--format", name])
        assert code == 0, err
        outs.add(out)
        py_code, py_out, py_err = python_cli(transcriber_xnnpack, jfk_path, ["--format", name])
        assert py_code == 0, py_err
        outs.add(py_out)
    assert len(outs) == 1 and outs.pop().strip()
