"""Shared fixtures: the tiny random-weight model, its exports per backend, and speech clips.

Everything expensive is session-scoped and built once under pytest's temporary folder.
"""

from __future__ import annotations

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


def shipped_corpus() -> str:
    """The corpus the shipped demo model was trained on: "grammar" (training/grammar.py, the first model, whose
    train_log.json has no "corpus" entry) or "v2" (training/corpus.py). Tests whose material depends on it ask here,
    so swapping in the v2 model and its log switches them over."""
    import json

    return json.loads((DEMO_DIR / "train_log.json").read_text()).get("corpus", "grammar")


# The v2 sample: staged in demo_model/next/ until the v2 model is shipped, then moved into demo_model/.
V2_SAMPLE_DIR = DEMO_DIR if shipped_corpus() == "v2" else DEMO_DIR / "next"


@pytest.fixture(scope="session")
def demo_nemo() -> Path:
    """The shipped trained demo model (issue 7)."""
    path = DEMO_DIR / "parakeet-tdt-demo.nemo"
    if not path.is_file():
        pytest.fail(f"{path} is missing from the checkout")
    return path


@pytest.fixture(scope="session")
def heldout_speech() -> tuple[np.ndarray, str]:
    """About 40 s of held-out speech of the shipped model's corpus (voices and text training never used), and its
    text: grammar sentences by held-out espeak-ng variants for the first model; test-pool sentences by held-out
    espeak-ng variants and flite for the v2 model."""
    if shipped_corpus() == "grammar":
        from parakeet_executorch.training import grammar

        utts = grammar.heldout_set(14, seed=77, exclude={u.text for u in grammar.training_set(12000, 0)})
        clips = grammar.synthesize_many(utts, SAMPLE_RATE)
        return np.concatenate(clips).astype(np.float32), " ".join(u.text for u in utts)
    from parakeet_executorch.training import corpus

    chosen = corpus.test_sets(seed=77, n=14, long_seconds=1)["sentences"]
    clips = corpus.synthesize_many(chosen, SAMPLE_RATE)
    return np.concatenate(clips).astype(np.float32), " ".join(c.text for c in chosen)
