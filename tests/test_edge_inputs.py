"""Edge inputs: very short, silent and constant audio run without NaN and match NeMo where NeMo runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import SAMPLE_RATE
from nemo_reference import assert_same_transcript, nemo_transcribe, runner_result


def test_empty_audio_gives_empty_transcript(transcriber_xnnpack):
    # NeMo's own preprocessor raises IndexError on zero samples; an empty transcript is the sensible answer.
    t = transcriber_xnnpack.transcribe(np.zeros(0, np.float32))
    assert t.text == "" and t.tokens == [] and t.words == [] and t.segments == []


@pytest.mark.parametrize("n", [1, 159, 160, 161, 400])
def test_few_samples_match_nemo(transcriber_xnnpack, nemo_model, n):
    audio = (np.random.RandomState(n).randn(n) * 0.1).astype(np.float32)
    ours = runner_result(transcriber_xnnpack.transcribe(audio))
    assert_same_transcript(ours, nemo_transcribe(nemo_model, audio))


@pytest.mark.parametrize("value", [0.0, 0.3])
@pytest.mark.parametrize("seconds", [0.5, 5.0])
def test_silent_and_constant_audio(transcriber_xnnpack, nemo_model, value, seconds):
    audio = np.full(int(seconds * SAMPLE_RATE), value, np.float32)
    n = len(audio)
    hop = transcriber_xnnpack.model.metadata.hop_length
    wave = torch.zeros(max(-(-n // hop) * hop, transcriber_xnnpack.model.metadata.min_audio_samples))
    wave[:n] = torch.from_numpy(audio)
    features, _ = transcriber_xnnpack.model.preprocessor(wave, n)
    encoded, _ = transcriber_xnnpack.model.encoder(features, _)
    assert torch.isfinite(features).all() and torch.isfinite(encoded).all()
    transcript = transcriber_xnnpack.transcribe(audio)
    frame = 0.08  # seconds per encoder frame; a token starts on a frame of the clip and lasts up to 4 frames
    assert all(0 <= s.start <= seconds + frame and s.start <= s.end <= s.start + 4 * frame + 1e-9
               for s in transcript.tokens)
    if value == 0.0:
        # All-zero audio has a constant log-mel; NeMo's per-feature normalisation then divides rounding noise of the
        # mean by (std + 1e-5), so its features are float noise in any implementation: nothing to compare.
        return
    assert_same_transcript(runner_result(transcript), nemo_transcribe(nemo_model, audio))


def test_longer_than_supported_range_is_a_clear_error(transcriber_xnnpack):
    from parakeet_executorch.runtime.transcribe import AudioRangeError

    meta = transcriber_xnnpack.model.metadata
    with pytest.raises(AudioRangeError, match="supports up to 60.00 s"):
        transcriber_xnnpack.transcribe(np.zeros(meta.max_audio_samples + 1, np.float32))
