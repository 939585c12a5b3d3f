"""The shipped demo model (issue 7): its sample is held out, it transcribes the sample exactly through a .pte,
and the training and evaluation commands run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import DEMO_DIR, SAMPLE_RATE, make_transcriber
from parakeet_executorch.training import corpus

SAMPLE_WAV = DEMO_DIR / "sample.wav"
SAMPLE_TXT = DEMO_DIR / "sample.txt"


def test_sample_is_not_in_training_data():
    train = corpus.training_set(12000, 0)
    sample = corpus.sample_utterance()
    assert SAMPLE_TXT.read_text().strip() == sample.text
    assert sample.text not in {u.text for u in train}
    variant = sample.voice.split("+")[1]
    assert variant in corpus.HELDOUT_VARIANTS and variant not in corpus.TRAIN_VARIANTS
    assert sample.speed not in corpus.TRAIN_SPEEDS and sample.pitch not in corpus.TRAIN_PITCHES
    assert all(w in corpus.vocabulary() for w in sample.text.split())


def test_shipped_sample_is_what_espeak_says():
    """The clip can be re-made from its settings (espeak-ng output is deterministic for a version)."""
    import soundfile as sf

    shipped, rate = sf.read(SAMPLE_WAV, dtype="float32")
    again = corpus.synthesize(corpus.sample_utterance(), rate)
    assert rate == SAMPLE_RATE and shipped.shape == again.shape
    assert np.abs(shipped - np.clip(again, -1, 1)).max() < 2e-4  # PCM16 rounding


def test_model_card_figures_match_the_training_log():
    log = json.loads((DEMO_DIR / "train_log.json").read_text())
    card = (DEMO_DIR / "MODEL_CARD.md").read_text()
    assert f"{log['steps']} steps" in card and f"{log['parameters']:,}" in card
    assert (DEMO_DIR / "parakeet-tdt-demo.nemo").stat().st_size == log["nemo_bytes"] <= 10_000_000


def test_demo_command_prints_the_sample_sentence(tmp_path, capsys, monkeypatch):
    from parakeet_executorch.demo import main
    from parakeet_executorch.runtime.transcribe import Transcriber

    calls = []
    original = Transcriber.transcribe
    monkeypatch.setattr(Transcriber, "transcribe", lambda self, audio: calls.append(1) or original(self, audio))
    assert main(["--out", str(tmp_path), "--check"]) == 0
    assert len(calls) == 1, "the demo must transcribe the sample once and reuse the transcript for its checks"
    monkeypatch.undo()
    stdout = capsys.readouterr().out
    expected = SAMPLE_TXT.read_text().strip()
    assert expected in stdout.splitlines()  # the transcript line (the export's stage lines come before it)
    assert "exact match" in stdout and "identical" in stdout
    transcriber = make_transcriber(tmp_path / "xnnpack")
    from parakeet_executorch.audio import load_audio

    result = transcriber.transcribe(load_audio(SAMPLE_WAV, SAMPLE_RATE))
    assert result.text == expected
    assert [w.text for w in result.words] == expected.split()
    assert 0 <= result.words[0].start < result.words[-1].end <= 3.7


def test_demo_refuses_a_missing_model(tmp_path, capsys):
    from parakeet_executorch.demo import main

    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--model", str(tmp_path / "nope.nemo")])
    assert e.value.code == 2 and "not found" in capsys.readouterr().err


def test_training_runs_on_cpu(tmp_path):
    """Three steps of the tiny size through the CPU TDT loss; the .nemo loads and its log is complete."""
    from nemo.collections.asr.models import ASRModel

    from parakeet_executorch.training.train import main

    out = tmp_path / "t.nemo"
    assert main(["--out", str(out), "--device", "cpu", "--size", "tiny", "--vocab-size", "128",
                 "--utterances", "24", "--dev-utterances", "3", "--steps", "3", "--batch-size", "8",
                 "--eval-every", "3"]) == 0
    log = json.loads(out.with_name("t.nemo.train.json").read_text())
    assert log["steps"] == 3 and log["device"] == "cpu" and np.isfinite(log["history"][-1]["loss"])
    model = ASRModel.restore_from(str(out), map_location="cpu")
    assert model.tokenizer.vocab_size == 128 and list(model.cfg.model_defaults.tdt_durations) == [0, 1, 2, 3, 4]


def test_training_rejects_bad_arguments(tmp_path):
    from parakeet_executorch.training.train import main

    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "x.pt")])
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "missing" / "x.nemo")])
    assert not list(tmp_path.iterdir())


def test_eval_wer_writes_a_table(tmp_path, demo_nemo):
    from parakeet_executorch.training.evaluate import main

    assert main(["--model", str(demo_nemo), "--out", str(tmp_path), "--clips", "4",
                 "--recipes", "none:portable"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    systems = [(r["system"], r["recipe"], r["backend"]) for r in results["results"]]
    assert systems == [("nemo-eager", "none", "pytorch"), ("pte", "none", "portable")]
    assert all(0 <= r["wer"] <= 0.5 for r in results["results"])
    assert "| pte | none | portable |" in (tmp_path / "results.md").read_text()


def test_eval_wer_refuses_training_seed_and_bad_pairs(tmp_path, demo_nemo):
    from parakeet_executorch.training.evaluate import main

    with pytest.raises(SystemExit):
        main(["--model", str(demo_nemo), "--out", str(tmp_path), "--seed", "1", "--recipes"])
    for bad in ("8w:xnnpack", "fpa4w:xnnpack:16", "8da4w:xnnpack:16", "8da4w:xnnpack:x", "8da4w"):
        with pytest.raises(SystemExit):
            main(["--model", str(demo_nemo), "--out", str(tmp_path), "--recipes", bad])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="NeMo's TDT loss on CUDA needs an NVIDIA GPU")
def test_training_step_on_cuda_with_nemo_loss(tmp_path):
    from parakeet_executorch.training.train import main

    assert main(["--out", str(tmp_path / "t.nemo"), "--device", "cuda", "--size", "tiny", "--vocab-size", "128",
                 "--utterances", "24", "--dev-utterances", "3", "--steps", "3", "--batch-size", "8",
                 "--eval-every", "3"]) == 0
