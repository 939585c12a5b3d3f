"""The package's top-level API: ``load_model(path).transcribe(audio_or_path)``, ``transcribe``, ``export_pte``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import parakeet_executorch as pe

from conftest import SAMPLE_RATE, make_transcriber


def test_import_is_light():
    code = (
        "import sys, parakeet_executorch as pe; pe.load_model; pe.transcribe; "
        "print(sorted(m for m in ('torch', 'executorch', 'nemo', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_load_model_transcribes_paths_and_waveforms(exported_xnnpack, jfk_path, jfk_audio):
    model = pe.load_model(exported_xnnpack / "model.pte")
    assert isinstance(model, pe.Transcriber)
    expected = make_transcriber(exported_xnnpack).transcribe(jfk_audio)
    from_path = model.transcribe(jfk_path)
    assert isinstance(from_path, pe.Transcript)
    assert from_path.as_dict() == expected.as_dict() and from_path.text
    assert model.transcribe(jfk_audio).as_dict() == expected.as_dict()
    assert pe.transcribe(exported_xnnpack / "model.pte", str(jfk_path)).text == expected.text
    assert pe.transcribe(model, jfk_audio).text == expected.text
    # A waveform at another rate is resampled as a file at that rate would be.
    from parakeet_executorch.audio import resample

    at_8k = resample(jfk_audio, SAMPLE_RATE, 8000)
    assert model.transcribe(at_8k, sample_rate=8000).audio_seconds == len(at_8k) / 8000


def test_long_waveform_with_long_form_options(exported_xnnpack, jfk_audio):
    from parakeet_executorch.runtime.buffered import transcribe_buffered
    from parakeet_executorch.runtime.longform import context_frames

    model = pe.load_model(exported_xnnpack / "model.pte")
    options = pe.LongFormOptions(1.0, 4.0, 1.0)
    audio = np.concatenate([jfk_audio, jfk_audio])
    ours = model.transcribe(audio, long_form=options)
    ref = transcribe_buffered(model, [audio], context_frames(model, options))
    assert ours.as_dict() == ref.as_dict() and ours.text
