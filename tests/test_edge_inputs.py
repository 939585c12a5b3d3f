"""Edge inputs: very short, silent and constant audio run without NaN and match NeMo where NeMo runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nemo_reference import assert_same_transcript, nemo_transcribe, runner_result
from parakeet_executorch.export.api import DEFAULT_MAX_AUDIO_SECONDS

from conftest import SAMPLE_RATE


def test_empty_audio_gives_empty_transcript(transcriber_xnnpack):
    # NeMo's own preprocessor raises IndexError on zero samples; an empty transcript is the sensible answer.
    t = transcriber_xnnpack.transcribe(np.zeros(0, np.float32))
    assert t.text == "" and t.tokens == [] and t.words == [] and t.segments == []


@pytest.mark.parametrize("n", [1, 159, 160, 161, 400])
def test_few_samples_match_nemo(transcriber_xnnpack, nemo_model, n):
    audio = (np.random.RandomState(n).randn(n) * 0.1).astype(np.float32)
    ours = runner_result(transcriber_xnnpack.transcribe(audio))
    assert_same_transcript(ours, nemo_transcribe(nemo_model, audio))


def _constant_signal(kind: str, seconds: float) -> np.ndarray:
    n = int(round(seconds * SAMPLE_RATE))
    if kind == "zeros":
        return np.zeros(n, np.float32)
    if kind == "dc":
        return np.full(n, 0.3, np.float32)
    if kind == "low dc":  # a constant low-level signal: most mel bands sit at the log guard
        return np.full(n, 1e-4, np.float32)
    if kind == "low noise":  # constant low-level noise (about -80 dBFS)
        return (np.random.RandomState(n).randn(n) * 1e-4).astype(np.float32)
    raise ValueError(kind)


# Digital silence and DC at lengths from 0.5 s to 30 s (the default .pte takes 40 s), low-level signals at two.
CONSTANT_CASES = [(kind, s) for kind in ("zeros", "dc") for s in (0.5, 1.0, 3.61, 11.0, 30.0)] + [
    (kind, s) for kind in ("low dc", "low noise") for s in (3.61, 11.0)
]


@pytest.mark.parametrize("kind, seconds", CONSTANT_CASES)
def test_silent_and_constant_audio(transcriber_xnnpack, nemo_model, kind, seconds):
    """Same tokens and times as NeMo. Constant audio has constant mel bands, which NeMo's per-feature normalisation
    turns into the rounding residue of their mean divided by ~1e-5: the .pte matches only because it sums in
    PyTorch's order (export/preprocessor_rewrites.py); before, zeros gave other tokens from 1 s on."""
    audio = _constant_signal(kind, seconds)
    n = len(audio)
    hop = transcriber_xnnpack.model.metadata.hop_length
    wave = torch.zeros(max(-(-n // hop) * hop, transcriber_xnnpack.model.metadata.min_audio_samples))
    wave[:n] = torch.from_numpy(audio)
    features, _ = transcriber_xnnpack.model.preprocessor(wave, n)
    encoded, _ = transcriber_xnnpack.model.encoder(features, _)
    assert torch.isfinite(features).all() and torch.isfinite(encoded).all()
    transcript = transcriber_xnnpack.transcribe(audio)
    frame = 0.08  # seconds per encoder frame; a token starts on a frame of the clip and lasts up to 4 frames
    assert all(
        0 <= s.start <= seconds + frame and s.start <= s.end <= s.start + 4 * frame + 1e-9 for s in transcript.tokens
    )
    assert_same_transcript(runner_result(transcript), nemo_transcribe(nemo_model, audio))


@pytest.mark.parametrize("seconds", [0.1, 0.5, 1.0, 3.61, 7.77013, 11.0, 30.0])
def test_silence_features_are_nemos(transcriber_xnnpack, nemo_model, seconds):
    """Zeros: every feature is NeMo's (unpadded call) to 2 ulps. The log-mel is one constant, the sums and
    divisions are NeMo's bit for bit, and only the standard deviation's sqrt may differ by an ulp (PyTorch's comes
    from MKL's vector math, within 1 ulp; ExecuTorch's is correctly rounded). Before the sums were reordered, the
    error was up to 0.64."""
    n = int(round(seconds * SAMPLE_RATE))
    meta = transcriber_xnnpack.model.metadata
    wave = torch.zeros(max(-(-n // meta.hop_length) * meta.hop_length, meta.min_audio_samples))
    ours, length = transcriber_xnnpack.model.preprocessor(wave, n)
    with torch.no_grad():
        ref, ref_length = nemo_model.preprocessor(input_signal=torch.zeros(1, n), length=torch.tensor([n]))
    assert length == int(ref_length)
    ours, ref = ours[..., :length], ref[..., :length]
    assert ((ours - ref).abs() <= 2.0**-22 * ref.abs()).all(), f"max error {(ours - ref).abs().max():.3g}"


def test_demo_model_on_digital_silence_equals_nemo(demo_nemo, export_root):
    """3.61 s of zeros: the .pte gives NeMo's transcript of the trained demo model token for token (before the
    preprocessor's normalisation was traced in PyTorch's float order, the first demo model's .pte printed "our
    horse" where NeMo heard nothing; the shipped model hears one token there, in NeMo as in the .pte)."""
    from parakeet_executorch.export.load import load_nemo_model

    from conftest import export_tiny, make_transcriber

    audio = _constant_signal("zeros", 3.61)
    ref = nemo_transcribe(load_nemo_model(str(demo_nemo)), audio)
    ours = make_transcriber(export_tiny(demo_nemo, export_root, "xnnpack")).transcribe(audio)
    assert_same_transcript(runner_result(ours), ref)


def test_longer_than_supported_range_is_a_clear_error(transcriber_xnnpack):
    from parakeet_executorch.runtime.transcribe import AudioRangeError

    meta = transcriber_xnnpack.model.metadata
    with pytest.raises(AudioRangeError, match=f"supports up to {DEFAULT_MAX_AUDIO_SECONDS:.2f} s"):
        transcriber_xnnpack.transcribe(np.zeros(meta.max_audio_samples + 1, np.float32))
