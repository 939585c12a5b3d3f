"""The runners' warm-up at load: it runs every method once, and changes nothing a later transcription returns."""

from __future__ import annotations

import pytest

from conftest import make_transcriber


@pytest.mark.slow
def test_warm_up_runs_every_method_and_leaves_transcripts_unchanged(exported_xnnpack, jfk_audio):
    cold = make_transcriber(exported_xnnpack).transcribe(jfk_audio)
    warm = make_transcriber(exported_xnnpack)
    calls: dict[str, int] = {}
    for name in ("preprocessor", "encoder", "decoder_step", "joint"):
        method = getattr(warm.model, name)

        def counted(*args, _name=name, _method=method, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _method(*args, **kwargs)

        setattr(warm.model, name, counted)
    warm.warm_up()
    assert set(calls) == {"preprocessor", "encoder", "decoder_step", "joint"}, calls
    assert calls["preprocessor"] == calls["encoder"] == 1, "one window of silence"
    after = warm.transcribe(jfk_audio)
    assert [(t.id, t.start, t.end) for t in after.tokens] == [(t.id, t.start, t.end) for t in cold.tokens]
    assert after.text == cold.text and after.text


@pytest.mark.slow
def test_warm_up_clip_stays_inside_the_pte_range(exported_xnnpack):
    transcriber = make_transcriber(exported_xnnpack)
    meta = transcriber.model.metadata
    seen = []
    preprocessor = transcriber.model.preprocessor
    transcriber.model.preprocessor = lambda wave, n: seen.append(n) or preprocessor(wave, n)
    transcriber.warm_up(seconds=1e6)  # past the bound: clamped, not refused
    transcriber.warm_up(seconds=0.0)  # nothing: at least the traced minimum
    assert seen == [meta.max_audio_samples, max(meta.min_audio_samples, 1)]
