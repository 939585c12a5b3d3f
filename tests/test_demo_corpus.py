"""The v2 demo corpus: vocabulary and held-out splits (training/text.py), synthesizers (synth.py), augmentation
(augment.py), the training and test plans (corpus.py) and the long-recording scoring of evaluate.py."""

from __future__ import annotations

import dataclasses
import os
import random
import re

import numpy as np
import pytest

from parakeet_executorch.training import augment, corpus, synth, text

SHORT = "the small dog ran home"


def test_vocabulary_is_plain_words_with_a_documented_heldout_list():
    vocab = text.vocabulary()
    assert len(vocab) == len(set(vocab)) == 5000 and vocab[:3] == ["the", "to", "and"]
    assert all(re.fullmatch(r"[a-z]+", w) for w in vocab)
    held = text.heldout_words()
    assert len(held) == 250 and held <= set(vocab[text.HELDOUT_MIN_RANK :])
    assert held == text.heldout_words.__wrapped__()  # a fixed seed: the same list every time
    assert not held & {w for g in text.homophone_groups() for w in g}
    assert ("to", "two", "too") in text.homophone_groups()  # most frequent first


def test_training_text_never_has_heldout_words_or_second_homophones():
    rng = random.Random(0)
    held = text.heldout_words()
    seconds = {w for g in text.homophone_groups() for w in g[1:]}
    words = {w for _ in range(3000) for w in text.random_sequence(rng).split()}
    assert not words & held and not words & seconds and len(words) > 2500
    split = text.sentence_split()
    assert not {w for s in split["train"] + split["dev"] for w in s.split()} & held
    assert not set(split["train"]) & set(split["test"]) and not set(split["dev"]) & set(split["test"])
    assert len(split["train"]) > 5000 and len(split["test"]) > 1000 and len(split["dev"]) > 100
    test_words = [w for _ in range(500) for w in text.random_sequence(rng, False, 0.1).split()]
    assert 0.05 < sum(w in held for w in test_words) / len(test_words) < 0.15


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Don't panic!", "do not panic"),
        ("It's 1984, and we're late.", "it is one thousand nine hundred eighty four and we are late"),
        ("Well-known -- and \u201cquoted\u201d", "well known and quoted"),
        ("I can't; you won't.", "i can not you will not"),
        ("John's car", None),
        ("It costs $5", None),
        ("Pi is 3.14", None),
        ("the 2nd time", None),
    ],
)
def test_normalize(raw, expected):
    assert text.normalize(raw) == expected


def test_spell_number():
    assert text.spell_number(0) == "zero" and text.spell_number(40) == "forty"
    assert text.spell_number(2_000_017) == "two million seventeen"


def test_sentences_file_is_normalised_and_in_vocabulary():
    vocab = set(text.vocabulary())
    lines = [s for s in text.SENTENCES_FILE.read_text().splitlines() if not s.startswith("#")]
    assert lines == sorted(set(lines))
    assert all(3 <= len(s.split()) <= 24 and set(s.split()) <= vocab for s in lines)


@pytest.mark.parametrize(
    "voice",
    [
        synth.Voice("espeak", "en-gb+m3", 1.1, 40, 1),
        synth.Voice("flite", "slt", 0.9, 180),
        synth.Voice("flite", "kal"),
        synth.Voice("festival", "kal_diphone", 1.1),
        synth.Voice("festival", "cmu_us_slt_arctic_hts", 0.9, 1),
        synth.Voice("mbrola", "us2", 1.1, 40),
        synth.Voice("rhvoice", "bdl", 0.9, 110),
        synth.Voice("pico", "en-GB", 1.2, 90),
    ],
    ids=lambda v: f"{v.synth}-{v.name}",
)
def test_each_synthesizer_gives_16k_float_audio_deterministically(voice):
    try:
        synth.program(voice.synth)
    except synth.SynthError as e:
        pytest.skip(str(e))
    a = synth.synthesize(SHORT, voice)
    b = synth.synthesize(SHORT, voice)
    assert a.dtype == np.float32 and a.ndim == 1 and 0.8 < len(a) / 16000 < 4 and np.abs(a).max() > 0.05
    assert np.array_equal(a, b)


def test_speed_changes_the_length():
    slow = synth.synthesize(SHORT, synth.Voice("flite", "kal16", 0.8))
    fast = synth.synthesize(SHORT, synth.Voice("flite", "kal16", 1.25))
    assert len(fast) < 0.8 * len(slow)


@pytest.mark.parametrize(
    "slow, fast",
    [
        (synth.Voice("mbrola", "us3", 0.8), synth.Voice("mbrola", "us3", 1.25)),
        (synth.Voice("rhvoice", "alan", 0.8), synth.Voice("rhvoice", "alan", 1.25)),
        (synth.Voice("pico", "en-US", 0.8), synth.Voice("pico", "en-US", 1.25)),
    ],
    ids=lambda v: v.synth,
)
def test_extra_synthesizers_speed_and_pitch_take_effect(slow, fast):
    try:
        synth.program(slow.synth)
    except synth.SynthError as e:
        pytest.skip(str(e))
    a, b = synth.synthesize(SHORT, slow), synth.synthesize(SHORT, fast)
    assert len(b) < 0.85 * len(a)
    low = synth.synthesize(SHORT, dataclasses.replace(slow, pitch=30 if slow.synth == "mbrola" else 80))
    high = synth.synthesize(SHORT, dataclasses.replace(slow, pitch=70 if slow.synth == "mbrola" else 125))
    assert not np.array_equal(low[: min(len(low), len(high))], high[: min(len(low), len(high))])


def test_extra_synthesizers_refuse_unknown_voices_and_name_missing_packages(monkeypatch):
    for bad in (synth.Voice("mbrola", "xx9"), synth.Voice("rhvoice", "nobody"), synth.Voice("pico", "en-AU")):
        with pytest.raises(ValueError, match="supported"):
            synth.synthesize(SHORT, bad)
    import ctypes.util

    monkeypatch.delenv("PARAKEET_TTS_PREFIX", raising=False)
    monkeypatch.delenv("PICO2WAVE", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(synth.SynthError, match="rhvoice-english librhvoice5"):
        synth.program("rhvoice")
    with pytest.raises(synth.SynthError, match="mbrola-us1"):
        synth.program("mbrola")
    with pytest.raises(synth.SynthError, match="libttspico-utils"):
        synth.program("pico")


def test_rhvoice_program_fails_in_one_line_without_data(tmp_path):
    import subprocess
    import sys

    env = dict(os.environ, RHVOICE_DATA_PATH=str(tmp_path / "none"))
    out = tmp_path / "out.wav"
    with out.open("wb") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "parakeet_executorch.training.rhvoice_say", "--voice", "bdl", "hello"],
            stdout=f,
            stderr=subprocess.PIPE,
            env=env,
        )
    assert proc.returncode == 1 and out.stat().st_size == 0
    assert proc.stderr.decode().strip().count("\n") == 0 and proc.stderr.startswith(b"error: ")


def test_a_missing_synthesizer_names_its_package(monkeypatch):
    for var in ("FLITE", "FESTIVAL", "TEXT2WAVE", "PARAKEET_TTS_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(synth.SynthError, match="apt-get install flite"):
        synth.synthesize(SHORT, synth.Voice("flite", "kal"))
    with pytest.raises(synth.SynthError, match="festvox-us-slt-hts"):
        synth.program("festival")


def test_prefix_variable_points_at_unpacked_packages(monkeypatch, tmp_path):
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    fake = tmp_path / "usr" / "bin" / "flite"
    fake.write_text("#!/bin/sh\nexit 0\n")
    monkeypatch.delenv("FLITE", raising=False)
    monkeypatch.delenv("ESPEAK_DATA_PATH", raising=False)
    monkeypatch.setenv("PARAKEET_TTS_PREFIX", str(tmp_path))
    assert synth.program("flite") == [str(fake)]
    env = synth._env()
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(tmp_path / "usr/lib/x86_64-linux-gnu")
    assert env["ESPEAK_DATA_PATH"] == str(tmp_path / "usr/lib/x86_64-linux-gnu")


def test_augmentation_is_seeded_and_keeps_length():
    x = synth.synthesize(SHORT, synth.Voice("espeak", "en-us"))
    a, info_a = augment.augment(x, np.random.default_rng(3))
    b, info_b = augment.augment(x, np.random.default_rng(3))
    assert np.array_equal(a, b) and info_a == info_b and a.shape == x.shape and a.dtype == np.float32
    assert np.isclose(np.abs(a).max(), 10 ** (info_a["peak_dbfs"] / 20), rtol=0.02)  # info rounds to 0.1 dB
    rir = augment.room_impulse_response(np.random.default_rng(0), 16000, rt60=0.5, predelay=0.004, drr_db=6.0)
    tail = rir[64:]
    assert len(rir) == int(1.2 * 0.5 * 16000) and rir[0] == 1.0
    assert np.isclose(10 * np.log10(1.0 / np.sum(tail**2)), 6.0, atol=0.01)  # the direct-to-reverberant ratio
    first, last = np.sum(tail[:800] ** 2), np.sum(tail[-800:] ** 2)
    assert 10 * np.log10(first / last) > 45  # ~60 dB of decay over RT60


def test_noise_is_added_at_the_drawn_snr():
    x = np.sin(np.arange(32000) / 5.0).astype(np.float32)
    recipe = augment.AugmentRecipe(reverb_p=0.0, noise_p=1.0, hum_p=0.0, peak_dbfs=(0.0, 0.0))
    y, info = augment.augment(x, np.random.default_rng(1), recipe=recipe)
    clean = x * (np.dot(y, x) / np.dot(x, x))  # the output is rescaled to its peak level: project it back
    snr = 10 * np.log10(np.sum(clean**2) / np.sum((y - clean) ** 2))
    assert abs(snr - info["snr_db"]) < 0.5


def test_training_plan_mixes_synthesizers_lengths_and_held_out_nothing():
    clips = corpus.training_set(0, hours=2, long_fraction=0.3)
    assert clips == corpus.training_set(0, hours=2, long_fraction=0.3)
    est = [sum(corpus._estimate_s(t, k, c.voice) for t, k in zip(c.texts, c.kinds)) for c in clips]
    long = [e for c, e in zip(clips, est) if len(c.texts) > 1]
    assert 0.25 < sum(long) / sum(est) < 0.35 and all(18 < e < 50 for e in long)
    assert {c.voice.synth for c in clips} == {"espeak", "flite"} and all(c.augment for c in clips)
    variants = {c.voice.name.split("+")[1] for c in clips if "+" in c.voice.name}
    assert variants <= set(corpus.TRAIN_VARIANTS) and not variants & set(corpus.HELDOUT_VARIANTS)
    assert not {w for c in clips for w in c.text.split()} & text.heldout_words()
    assert len(corpus.training_set(0, clips=7)) == 7


def test_test_sets_are_disjoint_held_out_and_ten_minutes_long():
    sets = corpus.test_sets(seed=2026, n=200)
    assert {k: len(v) for k, v in sets.items() if k != "long"} == {"random": 200, "sentences": 200, "festival": 200}
    sentences = [c.text for k in ("sentences", "festival", "long") for c in sets[k] if c.kinds[0] == "sentence"]
    assert len(sentences) == len(set(sentences)) and set(sentences) <= set(text.sentence_split()["test"])
    assert {c.voice.synth for c in sets["festival"]} == {"festival"}
    assert {c.voice.synth for c in sets["random"] + sets["sentences"]} == {"espeak", "flite"}
    assert {c.voice.synth for c in sets["long"]} == {"espeak", "flite", "festival"}
    espeak = [c.voice.name for k in ("random", "sentences", "long") for c in sets[k] if c.voice.synth == "espeak"]
    assert all(n.split("+")[1] in corpus.HELDOUT_VARIANTS for n in espeak)
    est = sum(corpus._estimate_s(c.texts[0], c.kinds[0], c.voice) + 0.9 for c in sets["long"])
    assert est >= 1.1 * 600 and not any(c.augment for k in sets for c in sets[k])


def test_synthesis_is_the_same_in_one_process_or_a_pool():
    clips = corpus.training_set(5, clips=6, long_fraction=0.0)
    one = corpus.synthesize_many(clips, workers=1, as_int16=True)
    pool = corpus.synthesize_many(clips, workers=2, as_int16=True)
    assert all(a.dtype == np.int16 and np.array_equal(a, b) for a, b in zip(one, pool))


def test_long_recording_offsets():
    clips = corpus.test_sets(seed=3, n=1, long_seconds=8)["long"][:3]
    audio = [
        np.full(16000, 0.1, dtype=np.float32),
        np.full(8000, 0.2, dtype=np.float32),
        np.full(4000, 0.3, dtype=np.float32),
    ]
    recording, rows = corpus.long_recording(clips, audio, min_seconds=1.5)
    for row, a in zip(rows, audio):
        start, end = round(row["start"] * 16000), round(row["end"] * 16000)
        assert end - start == len(a) and np.all(recording[start:end] == a[0])
    assert rows[0]["start"] == 0 and all(0.3 <= b["start"] - a["end"] <= 1.5 for a, b in zip(rows, rows[1:]))
    with pytest.raises(ValueError, match="shorter"):
        corpus.long_recording(clips, audio, min_seconds=100)


def test_time_aligned_wer_counts_misplaced_words():
    from parakeet_executorch.training.evaluate import heldout_hits, time_aligned_wer

    rows = [{"text": "a b", "start": 0.0, "end": 1.0}, {"text": "c d", "start": 2.0, "end": 3.0}]
    assert time_aligned_wer(rows, [("a", 0.1), ("b", 0.6), ("c", 2.1), ("d", 2.5)]) == 0.0
    # "c" said at 2.1 s but stamped at 0.9 s lands in the first clip: one insertion and one deletion.
    assert time_aligned_wer(rows, [("a", 0.1), ("b", 0.6), ("c", 0.9), ("d", 2.5)]) == 0.5
    word = sorted(text.heldout_words())[0]
    assert heldout_hits([f"the {word}", word], [f"the {word}", "the"]) == (1, 2)


def test_sentences_file_is_what_the_fortunes_give(tmp_path):
    """data/sentences.txt is reproducible from Debian's fortunes packages (fortunes, fortunes-min)."""
    if not (text.FORTUNES_DIR / "fortunes.dat").is_file():
        pytest.skip("Debian's fortunes package is not installed")
    out = tmp_path / "sentences.txt"
    text.write_sentences(text.FORTUNES_DIR, out)
    assert out.read_text() == text.SENTENCES_FILE.read_text()


def test_mixed_voice_long_clips():
    """At fraction 0 no clip changes voice (test_demo_model checks the shipped model's clip counts against its
    log); above 0 some long clips change voice between segments, and they synthesize with each segment's voice."""
    from parakeet_executorch.training import corpus

    before = corpus.training_set(3, hours=0.5)
    assert corpus.training_set(3, hours=0.5, mixed_voice_fraction=0.0) == before
    assert not any(c.voices for c in before)
    mixed = [c for c in corpus.training_set(3, hours=0.5, mixed_voice_fraction=1.0) if c.voices]
    assert mixed and all(len(c.voices) == len(c.texts) > 1 for c in mixed)
    assert all(len({v for v in c.voices}) > 1 for c in mixed)
    clip = min(mixed, key=lambda c: len(c.text))
    two = corpus.Clip(clip.texts[:2], clip.voices[0], seed=5, kinds=clip.kinds[:2], voices=clip.voices[:2])
    one = corpus.Clip(clip.texts[:2], clip.voices[0], seed=5, kinds=clip.kinds[:2])
    a, b = corpus.synthesize_clip(two), corpus.synthesize_clip(one)
    assert a.dtype == np.float32
    assert a.shape != b.shape or not np.allclose(a, b)
    with pytest.raises(ValueError):
        corpus.training_set(3, hours=0.5, mixed_voice_fraction=1.5)


def test_speed_perturbation_moves_pitch_and_length_by_the_drawn_factor():
    """A tone sped up by f lasts 1/f as long at f x its frequency; at probability 0 the other draws (and so the
    audio) are those of the recipe without it, so earlier corpora are made again exactly."""
    rate, hz = 16000, 440.0
    x = np.sin(2 * np.pi * hz * np.arange(rate) / rate).astype(np.float32)
    recipe = augment.AugmentRecipe(speed_p=1.0, reverb_p=0.0, noise_p=0.0, peak_dbfs=(-1.0, -1.0))
    y, info = augment.augment(x, np.random.default_rng(4), recipe=recipe)
    f = info["speed"]
    assert 0.85 <= f <= 1.15 and abs(len(y) - len(x) / f) <= 2
    spectrum = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    peak_hz = np.argmax(spectrum) * rate / len(y)
    assert abs(peak_hz - hz * f) < 3.0
    plain = augment.augment(x, np.random.default_rng(4))
    off = augment.augment(x, np.random.default_rng(4), recipe=augment.AugmentRecipe(speed_p=0.0))
    assert np.array_equal(plain[0], off[0]) and "speed" not in off[1]
    with pytest.raises(ValueError, match="positive"):
        augment.perturb_speed(x, 0.0)


def test_speed_perturbed_training_clips_keep_their_draws():
    """The option only adds the perturbation: same texts, voices and seeds; synthesis then changes some lengths."""
    base = corpus.training_set(5, clips=12)
    sped = corpus.training_set(5, clips=12, speed_perturb=1.0)
    assert [(c.texts, c.voice, c.seed) for c in sped] == [(c.texts, c.voice, c.seed) for c in base]
    assert all(c.speed_perturb == 1.0 for c in sped) and sped[0].describe()["speed_perturb"] == 1.0
    a, b = corpus.synthesize_clip(base[0]), corpus.synthesize_clip(sped[0])
    assert a.dtype == b.dtype == np.float32 and len(a) != len(b)
    with pytest.raises(ValueError, match="speed_perturb"):
        corpus.training_set(5, clips=3, speed_perturb=2.0)


def test_extra_voices_replace_a_share_of_the_draws_and_keep_festival_held_out():
    """At 0 the clips are those of earlier versions; at F a share near F of the clip voices comes from MBROLA,
    RHVoice and Pico, every one of their voices is drawn, and festival never speaks in training."""
    base = corpus.training_set(6, clips=400)
    assert corpus.training_set(6, clips=400, extra_voice_fraction=0.0) == base
    clips = corpus.training_set(6, clips=400, long_fraction=0.3, mixed_voice_fraction=1.0, extra_voice_fraction=0.5)
    voices = [c.voice for c in clips] + [v for c in clips for v in c.voices]
    extra = [v for v in voices if v.synth in ("mbrola", "rhvoice", "pico")]
    assert 0.4 < len(extra) / len(voices) < 0.6
    assert {(v.synth, v.name) for v in extra} == set(corpus.EXTRA_VOICES)
    assert not any(v.synth == "festival" for v in voices)
    assert {v.synth for v in voices} == {"espeak", "flite", "mbrola", "rhvoice", "pico"}
    with pytest.raises(ValueError, match="extra_voice_fraction"):
        corpus.training_set(6, clips=3, extra_voice_fraction=-0.1)


def test_bundle_links_mbrola_voices_and_points_pico_at_the_prefix(tmp_path):
    """tts_bundle: MBROLA voices are linked where espeak-ng looks; pico2wave's fixed data path is replaced by a
    same-length link into the prefix, the rest of the binary untouched."""
    import secrets

    from parakeet_executorch.training import tts_bundle

    prefix = tmp_path / "prefix"
    (prefix / "usr/share/mbrola/us9").mkdir(parents=True)
    (prefix / "usr/share/mbrola/us9/us9").write_bytes(b"diphones")
    (prefix / "usr/share/pico/lang").mkdir(parents=True)
    (prefix / "usr/bin").mkdir(parents=True)
    binary = b"\x7fELF head " + tts_bundle.PICO_LANG + b"en-US_ta.bin\x00 tail"
    (prefix / "usr/bin/pico2wave").write_bytes(binary)
    link = f"/tmp/pk{secrets.token_hex(6)}/"[: len(tts_bundle.PICO_LANG)]
    link = (link.rstrip("/") + "x" * len(tts_bundle.PICO_LANG))[: len(tts_bundle.PICO_LANG) - 1] + "/"
    try:
        tts_bundle.link_data_paths(prefix, link.encode())
        tts_bundle.link_data_paths(prefix, link.encode())  # again: the same result
        voice = prefix / "usr/lib/x86_64-linux-gnu/espeak-ng-data/mbrola/us9"
        assert voice.read_bytes() == b"diphones"
        patched = (prefix / "usr/bin/pico2wave").read_bytes()
        assert len(patched) == len(binary) and tts_bundle.PICO_LANG not in patched and link.encode() in patched
        assert os.path.realpath(link.rstrip("/")) == str((prefix / "usr/share/pico/lang").resolve())
    finally:
        if os.path.islink(link.rstrip("/")):
            os.unlink(link.rstrip("/"))
    with pytest.raises(ValueError, match="bytes"):
        tts_bundle.link_data_paths(prefix, b"/tmp/short/")
