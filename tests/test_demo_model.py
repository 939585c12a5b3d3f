"""The shipped demo model: its sample is held out and re-made from its recipe, it transcribes the sample exactly
through a .pte, its card agrees with its training log, and the training and evaluation commands run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import DEMO_DIR, SAMPLE_RATE, make_transcriber

SAMPLE_WAV = DEMO_DIR / "sample.wav"
SAMPLE_TXT = DEMO_DIR / "sample.txt"


def test_sample_is_held_out():
    """A test-pool sentence (never in training or dev text) without held-out words, by a held-out voice; the
    training sets of both training runs (base and fine-tune), rebuilt from their logs' arguments, have the logged
    clip counts and never use the sample's text or a held-out voice."""
    from parakeet_executorch.training import corpus, text

    clip = corpus.sample_clip()
    assert (DEMO_DIR / "sample.txt").read_text().strip() == clip.text == corpus.SAMPLE_TEXT
    split = text.sentence_split()
    assert clip.text in split["test"] and clip.text not in split["train"] + split["dev"]
    assert not set(clip.text.split()) & text.heldout_words()
    assert clip.voice.synth == "espeak" and clip.voice.name.split("+")[1] in corpus.HELDOUT_VARIANTS
    for log_name in ("base_train_log.json", "train_log.json"):
        log = json.loads((DEMO_DIR / log_name).read_text())
        args = log["args"]
        train = corpus.training_set(
            args["seed"],
            hours=args["hours"],
            long_fraction=args["long_fraction"],
            mixed_voice_fraction=args.get("mixed_voice_fraction", 0.0),
        )
        assert len(train) == log["data"]["clips"], log_name
        assert sum(len(c.texts) for c in train) == log["data"]["segments"], log_name
        assert all(clip.text not in c.texts for c in train)
        voices = [c.segment_voice(i) for c in train for i in range(len(c.texts))]
        assert all("+" not in v.name or v.name.split("+")[1] in corpus.TRAIN_VARIANTS for v in voices)
        assert {v.synth for v in voices} == {"espeak", "flite"}


def test_sample_is_what_espeak_says():
    """The clip can be re-made from its recipe (espeak-ng output is deterministic for a version)."""
    import soundfile as sf

    from parakeet_executorch.training import corpus

    shipped, rate = sf.read(DEMO_DIR / "sample.wav", dtype="float32")
    again = corpus.synthesize_clip(corpus.sample_clip(), rate)
    assert rate == SAMPLE_RATE and shipped.shape == again.shape
    assert np.abs(shipped - np.clip(again, -1, 1)).max() < 2e-4  # PCM16 rounding


def test_model_card_figures_match_the_training_log():
    card = (DEMO_DIR / "MODEL_CARD.md").read_text()
    for log_name in ("base_train_log.json", "train_log.json"):
        log = json.loads((DEMO_DIR / log_name).read_text())
        assert f"{log['steps']} steps" in card and f"{log['parameters']:,}" in card
    log = json.loads((DEMO_DIR / "train_log.json").read_text())
    assert (DEMO_DIR / "parakeet-tdt-demo.nemo").stat().st_size == log["nemo_bytes"] <= 25_000_000


def test_demo_command_prints_the_sample_sentence(tmp_path, capsys, monkeypatch):
    from parakeet_executorch.demo import main
    from parakeet_executorch.runtime.single_pass import SinglePassTranscriber

    monkeypatch.setenv("PARAKEET_CACHE_DIR", str(tmp_path / "cache"))  # the export cache, kept out of ~/.cache
    calls, warm_ups = [], []
    # Every mode (a file, a waveform, one window or buffered) ends in the engine's encoder call; the runner's
    # warm-up at load makes one more, on silence, which is not a transcription of the sample.
    original_encode, original_warm_up = SinglePassTranscriber.encode, SinglePassTranscriber.warm_up

    def encode(self, audio):
        if not warm_ups or warm_ups[-1] == "done":
            calls.append(1)
        return original_encode(self, audio)

    def warm_up(self, *args, **kwargs):
        warm_ups.append("running")
        original_warm_up(self, *args, **kwargs)
        warm_ups[-1] = "done"

    monkeypatch.setattr(SinglePassTranscriber, "encode", encode)
    monkeypatch.setattr(SinglePassTranscriber, "warm_up", warm_up)
    assert main(["--out", str(tmp_path), "--check"]) == 0
    assert warm_ups == ["done"], "the demo's runner warms up once, at load"
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
    assert 0 <= result.words[0].start < result.words[-1].end <= len(load_audio(SAMPLE_WAV, SAMPLE_RATE)) / SAMPLE_RATE


def test_demo_refuses_a_missing_model(tmp_path, capsys):
    from parakeet_executorch.demo import main

    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--model", str(tmp_path / "nope.nemo")])
    assert e.value.code == 2 and "not found" in capsys.readouterr().err


def test_training_runs_on_cpu(tmp_path):
    """Three steps of the tiny size on the v3 corpus (half the voices from MBROLA, RHVoice and Pico) through the
    CPU TDT loss, half the utterances VTLP-warped; the .nemo loads and its log is complete. No long clips: one 30 s
    clip makes the CPU loss take a minute (the long-clip plan is tested in test_demo_corpus.py)."""
    from nemo.collections.asr.models import ASRModel

    from parakeet_executorch.training.train import main

    out = tmp_path / "t.nemo"
    assert (
        main(
            [
                "--out",
                str(out),
                "--device",
                "cpu",
                "--size",
                "tiny",
                "--vocab-size",
                "128",
                "--utterances",
                "24",
                "--long-fraction",
                "0",
                "--dev-utterances",
                "3",
                "--steps",
                "3",
                "--batch-size",
                "8",
                "--batch-seconds",
                "60",
                "--eval-every",
                "3",
                "--workers",
                "2",
                "--vtlp",
                "0.5",
                "--extra-voice-fraction",
                "0.5",
                "--save-dtype",
                "float16",
            ]
        )
        == 0
    )
    log = json.loads(out.with_name("t.nemo.train.json").read_text())
    assert log["steps"] == 3 and log["device"] == "cpu" and np.isfinite(log["history"][-1]["loss"])
    # Throughput: the clips' own seconds, at most --batch-seconds (padded) a step.
    assert 0 < log["audio_hours_trained"] <= 3 * 60 / 3600 and log["history"][-1]["audio_h"] > 0
    assert log["args"]["vtlp"] == 0.5
    assert log["corpus"] == "v3" and log["data"]["clips"] == 24 and log["data"]["long_clips"] == 0
    assert set(log["data"]["hours_by_synth"]) - {"espeak", "flite"} and "festival" not in log["data"]["hours_by_synth"]
    assert set(log["synthesizers"]) == {"espeak", "flite", "mbrola", "rhvoice", "pico"}
    assert log["sample"]["text"] == (DEMO_DIR / "sample.txt").read_text().strip()
    assert log["synthesizers"]["espeak"].startswith("eSpeak NG") and "flite" in log["synthesizers"]["flite"]
    model = ASRModel.restore_from(str(out), map_location="cpu")
    assert model.tokenizer.vocab_size == 128 and list(model.cfg.model_defaults.tdt_durations) == [0, 1, 2, 3, 4]
    params = list(model.parameters())
    assert all(p.dtype == torch.float32 and torch.equal(p, p.half().float()) for p in params)


def test_save_in_float16_stores_half_the_bytes_and_restores_float32(tmp_path, nemo_model):
    """``--save-dtype float16``: every parameter stored in two bytes (the file shrinks by two bytes a parameter),
    restored as float32 equal to the float16 rounding; buffers (mel filterbank, batch-norm statistics) exact; the
    saved model itself left as it was."""
    from nemo.collections.asr.models import ASRModel

    from parakeet_executorch.training.train import _save

    before = {k: v.clone() for k, v in nemo_model.state_dict().items()}
    _save(nemo_model, tmp_path / "f32.nemo", "float32")
    _save(nemo_model, tmp_path / "f16.nemo", "float16")
    n_params = sum(p.numel() for p in nemo_model.parameters())
    saved = (tmp_path / "f32.nemo").stat().st_size - (tmp_path / "f16.nemo").stat().st_size
    assert abs(saved - 2 * n_params) < 16_384, (saved, n_params)
    after = nemo_model.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())

    restored = ASRModel.restore_from(str(tmp_path / "f16.nemo"), map_location="cpu").state_dict()
    names = {n for n, _ in nemo_model.named_parameters()}
    assert set(restored) == set(before)
    for k, v in before.items():
        want = v.half().float() if k in names else v
        assert restored[k].dtype == v.dtype and torch.equal(restored[k], want), k
    assert any(not torch.equal(before[k], restored[k]) for k in names)  # the rounding did happen
    with pytest.raises(ValueError, match="bfloat16"):
        _save(nemo_model, tmp_path / "bf16.nemo", "bfloat16")
    assert not (tmp_path / "bf16.nemo").exists()


def test_training_rejects_bad_arguments(tmp_path):
    from parakeet_executorch.training.train import main

    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "x.pt")])
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "missing" / "x.nemo")])
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "x.nemo"), "--extra-voice-fraction", "1.5"])
    assert not list(tmp_path.iterdir())


def test_training_names_a_missing_extra_synthesizer_before_synthesizing(tmp_path, monkeypatch, capsys):
    """With --extra-voice-fraction and Pico missing, training stops at once with Pico's Debian package named,
    exit 2, no model or log written."""
    from parakeet_executorch.training import synth
    from parakeet_executorch.training.train import main

    real = synth.program

    def without_pico(name):
        if name == "pico":
            raise synth.SynthError(f"pico2wave not found: install it (apt-get install {synth.APT_PACKAGE['pico']})")
        return real(name)

    monkeypatch.setattr(synth, "program", without_pico)
    out = tmp_path / "t.nemo"
    args = ["--out", str(out), "--device", "cpu", "--size", "tiny", "--utterances", "4", "--steps", "1"]
    assert main([*args, "--extra-voice-fraction", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: pico2wave not found") and "libttspico-utils" in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())
    assert not list(tmp_path.iterdir())


# Four test sets synthesized, the demo model exported and run beside NeMo: minutes; -m extended.
@pytest.mark.extended
def test_eval_wer_writes_a_table(tmp_path, demo_nemo):
    """Four clips per set and a 70 s long recording (past one 56 s window, so it is decoded buffered)."""
    from parakeet_executorch.training.evaluate import main

    assert (
        main(
            [
                "--model",
                str(demo_nemo),
                "--out",
                str(tmp_path),
                "--clips",
                "4",
                "--long-seconds",
                "70",
                "--recipes",
                "none:portable",
            ]
        )
        == 0
    )
    results = json.loads((tmp_path / "results.json").read_text())
    systems = [(r["system"], r["recipe"], r["backend"]) for r in results["results"]]
    assert systems == [("nemo-eager", "none", "pytorch"), ("pte", "none", "portable")]
    assert results["test_sets"]["long_seconds"] >= 70
    keys = ("wer_random", "wer_sentences", "wer_festival", "wer_long_file", "wer_long_clips", "wer_long_aligned")
    pte = results["results"][1]
    assert all(k in r for r in results["results"] for k in keys)
    assert pte["same_as_nemo"] == pte["clips"]  # the fp32 .pte transcribes every clip as NeMo eager does
    # and the long recording as NeMo's own buffered decoding does (which needs the model back in eval mode after
    # transcribe(): NeMo leaves encoder, decoder and joint training, dropout on)
    assert pte["long_file_same_as_nemo"]
    assert all(r[k] <= 0.5 for r in results["results"] for k in keys)
    assert "| pte | none | portable |" in (tmp_path / "results.md").read_text()


def test_test_sets_are_found_after_a_move_and_from_another_working_directory(tmp_path, monkeypatch, capsys):
    """The manifest names each file under its set's folder, so test sets made with a relative --out are reused
    from wherever the folder is reached (they once held paths relative to the first run's working directory)."""
    from pathlib import Path

    from parakeet_executorch.training.evaluate import make_test_sets

    monkeypatch.chdir(tmp_path)
    first = make_test_sets(Path("eval") / "testsets", n=1, seed=2026, long_seconds=4.0, workers=1)
    manifest = json.loads((tmp_path / "eval" / "testsets" / "testsets.json").read_text())
    assert manifest["sets"]["random"][0]["path"] == "random/0000.wav"
    assert manifest["sets"]["long_path"] == "long/long.wav"
    (tmp_path / "moved").mkdir()
    (tmp_path / "eval").rename(tmp_path / "moved" / "eval")
    monkeypatch.chdir(tmp_path / "moved" / "eval")
    capsys.readouterr()
    again = make_test_sets(Path("testsets"), n=1, seed=2026, long_seconds=4.0, workers=1)
    assert "reusing the test sets" in capsys.readouterr().out
    names = ("random", "sentences", "festival", "long")
    assert [len(again[n]) for n in names] == [len(first[n]) for n in names]
    assert all(Path(r["path"]).is_file() for n in names for r in again[n]) and Path(again["long_path"]).is_file()


def test_eval_wer_refuses_training_seed_and_bad_pairs(tmp_path, demo_nemo):
    from parakeet_executorch.training.evaluate import main

    with pytest.raises(SystemExit):
        main(["--model", str(demo_nemo), "--out", str(tmp_path), "--seed", "1", "--recipes"])
    bad_pairs = ("8w:xnnpack", "fpa4w:xnnpack:16", "8da4w:xnnpack:16", "8da4w:xnnpack:x", "8da4w")
    for bad in (*bad_pairs, "8da8w+8w:xnnpack", "8da8w+8da4w+none:xnnpack", "8da8w+x:xnnpack"):
        with pytest.raises(SystemExit):
            main(["--model", str(demo_nemo), "--out", str(tmp_path), "--recipes", bad])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="NeMo's TDT loss on CUDA needs an NVIDIA GPU")
def test_training_step_on_cuda_with_nemo_loss(tmp_path):
    from parakeet_executorch.training.train import main

    assert (
        main(
            [
                "--out",
                str(tmp_path / "t.nemo"),
                "--device",
                "cuda",
                "--size",
                "tiny",
                "--vocab-size",
                "128",
                "--utterances",
                "24",
                "--dev-utterances",
                "3",
                "--steps",
                "3",
                "--batch-size",
                "8",
                "--eval-every",
                "3",
            ]
        )
        == 0
    )
