"""Shared fixtures: the tiny random-weight model, its exports per backend, and speech clips.

Everything expensive is session-scoped and built once under pytest's temporary folder.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_AUDIO = Path(os.environ.get("PARAKEET_SHARED_AUDIO", REPO.parent / "shared" / "audio"))
JFK = SHARED_AUDIO / "jfk.wav"
SAMPLE_RATE = 16000

warnings.filterwarnings("ignore")


@pytest.fixture(scope="session")
def jfk_path() -> Path:
    if not JFK.is_file():
        pytest.fail(f"{JFK} is missing: the tests need the shared speech clip (set PARAKEET_SHARED_AUDIO)")
    return JFK


@pytest.fixture(scope="session")
def jfk_audio(jfk_path) -> np.ndarray:
    from parakeet_executorch.audio import load_audio

    return load_audio(jfk_path, SAMPLE_RATE)


@pytest.fixture(scope="session")
def clips_dir(tmp_path_factory, jfk_path) -> Path:
    """jfk.wav re-encoded: 48 kHz stereo PCM16 and 24-bit 16 kHz mono, written with libsndfile."""
    import soundfile as sf
    import soxr

    d = tmp_path_factory.mktemp("clips")
    mono, rate = sf.read(str(jfk_path), dtype="float32")
    up = soxr.resample(mono, rate, 48000)
    # Two different channels, so that averaging to mono is actually exercised.
    stereo = np.stack([up * 0.9, up * 0.7], axis=1)
    sf.write(str(d / "jfk_48k_stereo.wav"), stereo, 48000, subtype="PCM_16")
    sf.write(str(d / "jfk_24bit.wav"), mono, rate, subtype="PCM_24")
    return d


@pytest.fixture(scope="session")
def bad_clips(tmp_path_factory, jfk_path) -> Path:
    """Damaged versions of jfk.wav: ``nan.wav`` (float WAV, samples 16000-16099 NaN), ``inf_stereo.wav`` (float
    stereo, +Inf in the right channel at frame 24000 = 1.5 s), ``truncated.wav`` (the first half of jfk.wav's bytes:
    its header still promises 11 s)."""
    import soundfile as sf

    d = tmp_path_factory.mktemp("bad_clips")
    mono, rate = sf.read(str(jfk_path), dtype="float32")
    nan = mono.copy()
    nan[16000:16100] = np.nan
    sf.write(str(d / "nan.wav"), nan, rate, subtype="FLOAT")
    stereo = np.stack([mono, mono * 0.5], axis=1)
    stereo[24000, 1] = np.inf
    sf.write(str(d / "inf_stereo.wav"), stereo, rate, subtype="FLOAT")
    data = jfk_path.read_bytes()
    (d / "truncated.wav").write_bytes(data[: len(data) // 2])
    return d


@pytest.fixture(scope="session")
def manifest_corpus(tmp_path_factory, jfk_path, clips_dir, bad_clips) -> Path:
    """A manifest of 13 entries: short cuts of jfk.wav in several formats, rates and channel counts (relative paths),
    the session's re-encoded and damaged clips (absolute), a zero-frame WAV, and four files that fail: NaN samples,
    text named .wav, a zero-byte file, a missing file. Manifest mode's tests and the Ray mode's share it."""
    import soundfile as sf

    d = tmp_path_factory.mktemp("corpus")
    (d / "audio").mkdir()
    mono, rate = sf.read(str(jfk_path), dtype="float32")

    def cut(name: str, start: float, end: float, out_rate: int, channels: int = 1, **kw) -> str:
        import soxr

        part = soxr.resample(mono[int(start * rate) : int(end * rate)], rate, out_rate)
        data = np.stack([part * (0.9 - 0.2 * c) for c in range(channels)], axis=1) if channels > 1 else part
        sf.write(str(d / "audio" / name), data, out_rate, **kw)
        return f"audio/{name}"

    relative = [
        cut("a_8k.flac", 0.0, 2.2, 8000),
        cut("b_22k.ogg", 2.0, 4.5, 22050, format="OGG", subtype="VORBIS"),
        cut("c_16k.mp3", 4.0, 6.0, 16000, format="MP3"),
        cut("d_44k_stereo.wav", 6.0, 8.5, 44100, channels=2, subtype="PCM_16"),
        cut("e_float.wav", 8.0, 11.0, 16000, subtype="FLOAT"),
    ]
    sf.write(str(d / "audio" / "zero_frames.wav"), np.zeros(0, np.float32), 16000)
    (d / "audio" / "not_audio.wav").write_text("this is not audio")
    (d / "audio" / "zero_bytes.wav").write_bytes(b"")
    records = [{"audio_filepath": p, "duration": 2.5, "text": f"reference {i}"} for i, p in enumerate(relative)]
    records += [
        {"audio_filepath": str(jfk_path), "speaker": "jfk"},
        {"audio_filepath": str(clips_dir / "jfk_48k_stereo.wav")},
        {"audio_filepath": str(bad_clips / "truncated.wav")},
        {"audio_filepath": "audio/zero_frames.wav"},
        {"audio_filepath": str(bad_clips / "nan.wav")},
        {"audio_filepath": "audio/not_audio.wav"},
        {"audio_filepath": "audio/zero_bytes.wav"},
        {"audio_filepath": "audio/missing.wav", "duration": 1.0},
    ]
    manifest = d / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records))
    return manifest


@pytest.fixture(scope="session")
def same_size_tokenizer(tmp_path_factory, exported_xnnpack) -> Path:
    """Another SentencePiece model with exactly the tiny model's vocabulary size (trained here on another corpus
    seed): the size check passes, only the fingerprint tells it from the exported one."""
    from parakeet_executorch.testing.tokenizer_corpus import train_tokenizer
    from parakeet_executorch.tokenizer import Tokenizer

    size = Tokenizer(exported_xnnpack / "tokenizer.model").vocab_size
    return train_tokenizer(tmp_path_factory.mktemp("same_size_tokenizer"), size, seed=1)


def pte_without(src: Path, dst: Path, *methods: str) -> Path:
    """Copy a .pte without some of its methods (as an older export lacked them), delegates kept as they are."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary(src.read_bytes())
    pte.program.execution_plan = [p for p in pte.program.execution_plan if p.name not in methods]
    dst.write_bytes(bytes(serialize_pte_binary(pte, extract_delegate_segments=True)))
    return dst


@pytest.fixture(scope="session")
def exported_without_fingerprint(tmp_path_factory, exported_xnnpack) -> Path:
    """The xnnpack export as an export from before the tokenizer fingerprint: no tokenizer_sha256 method."""
    import shutil

    d = tmp_path_factory.mktemp("no_fingerprint")
    shutil.copy(exported_xnnpack / "tokenizer.model", d / "tokenizer.model")
    pte_without(exported_xnnpack / "model.pte", d / "model.pte", "tokenizer_sha256")
    return d


@pytest.fixture(scope="session")
def tiny_nemo(tmp_path_factory) -> Path:
    from parakeet_executorch.testing.make_model import main as make_model

    path = tmp_path_factory.mktemp("model") / "tiny.nemo"
    assert make_model(["--size", "tiny", "--out", str(path), "--seed", "0"]) == 0
    return path


@pytest.fixture(scope="session")
def nemo_model(tiny_nemo):
    from parakeet_executorch.export.load import load_nemo_model

    return load_nemo_model(str(tiny_nemo))


_EXPORTS: dict = {}


def export_tiny(tiny_nemo: Path, root: Path, backend: str, *extra: str) -> Path:
    """Export a model (the tiny one, or another .nemo) once per (model, backend, options); return the folder."""
    from parakeet_executorch.export.cli import main as export_main

    key = (Path(tiny_nemo).stem, backend) + extra  # the model is part of the key: tests export several models
    if key not in _EXPORTS:
        out = root / "-".join(key).replace("/", "_")
        assert export_main(["--model", str(tiny_nemo), "--backend", backend, "--output-dir", str(out), *extra]) == 0
        _EXPORTS[key] = out
    return _EXPORTS[key]


@pytest.fixture(scope="session")
def export_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exports")


@pytest.fixture(scope="session", params=["portable", "xnnpack"])
def exported(request, tiny_nemo, export_root) -> Path:
    """Folder with model.pte and tokenizer.model of the tiny model, for each CPU backend."""
    return export_tiny(tiny_nemo, export_root, request.param)


@pytest.fixture(scope="session")
def exported_xnnpack(tiny_nemo, export_root) -> Path:
    return export_tiny(tiny_nemo, export_root, "xnnpack")


def make_transcriber(folder: Path):
    from parakeet_executorch.runtime.pte_model import PteModel
    from parakeet_executorch.runtime.transcribe import Transcriber
    from parakeet_executorch.tokenizer import Tokenizer

    return Transcriber(PteModel(folder / "model.pte"), Tokenizer(folder / "tokenizer.model"))


@pytest.fixture(scope="session")
def transcriber(exported):
    return make_transcriber(exported)


@pytest.fixture(scope="session")
def transcriber_xnnpack(exported_xnnpack):
    return make_transcriber(exported_xnnpack)


DEMO_DIR = REPO / "src" / "parakeet_executorch" / "demo_model"


@pytest.fixture(scope="session")
def demo_nemo() -> Path:
    """The shipped trained demo model."""
    path = DEMO_DIR / "parakeet-tdt-demo.nemo"
    if not path.is_file():
        pytest.fail(f"{path} is missing from the checkout")
    return path


@pytest.fixture(scope="session")
def heldout_speech() -> tuple[np.ndarray, str]:
    """About 40 s of held-out speech of the shipped model's corpus (voices and text training never used) and its
    text: test-pool sentences by held-out espeak-ng variants and flite."""
    from parakeet_executorch.training import corpus

    chosen = corpus.test_sets(seed=77, n=14, long_seconds=1)["sentences"]
    clips = corpus.synthesize_many(chosen, SAMPLE_RATE)
    return np.concatenate(clips).astype(np.float32), " ".join(c.text for c in chosen)
