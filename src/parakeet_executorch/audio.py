"""Audio loading for transcription: decode with libsndfile, mix to mono, resample with libsoxr.

Decoding and resampling are delegated to well-kept libraries (soundfile wraps libsndfile, soxr wraps libsoxr),
so WAV (PCM 16/24/32, float, WAVE_FORMAT_EXTENSIBLE, extra chunks), FLAC, OGG/Vorbis/Opus and MP3 all work
as far as the bundled libsndfile supports them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class AudioError(ValueError):
    """An audio file could not be read or converted; the message names the file and the cause."""


def to_mono(samples: np.ndarray) -> np.ndarray:
    """Average all channels into one.

    Args:
        samples: float array, shape [frames] or [frames, channels] (soundfile's layout).
    Returns:
        float32 array of shape [frames].
    """
    if samples.ndim == 1:
        return samples.astype(np.float32, copy=False)
    if samples.ndim != 2:
        raise AudioError(f"expected audio of shape [frames] or [frames, channels], got {samples.shape}")
    return samples.mean(axis=1, dtype=np.float64).astype(np.float32)


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Resample mono float audio with libsoxr's high-quality (HQ) filter.

    Args:
        samples: float32 [frames] at ``from_rate`` Hz.
        from_rate, to_rate: sample rates in Hz (positive integers).
    Returns:
        float32 [round(frames * to_rate / from_rate)] at ``to_rate`` Hz; the input itself when the rates match.
    """
    if from_rate <= 0 or to_rate <= 0:
        raise AudioError(f"sample rates must be positive, got {from_rate} Hz -> {to_rate} Hz")
    if from_rate == to_rate or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    import soxr

    return soxr.resample(samples, from_rate, to_rate, quality="HQ").astype(np.float32, copy=False)


def load_audio(path: str | Path, sample_rate: int) -> np.ndarray:
    """Read an audio file as the mono waveform the model expects.

    Channels are averaged to mono *before* resampling (one resampler pass instead of one per channel).

    Args:
        path: any file libsndfile can decode.
        sample_rate: target rate in Hz (the model's preprocessor rate, 16000 for Parakeet).
    Returns:
        float32 array [samples] in [-1, 1] at ``sample_rate``.
    Raises:
        AudioError: the file is missing, unreadable, or not audio libsndfile can decode.
    """
    import soundfile as sf

    path = Path(path)
    if not path.is_file():
        raise AudioError(f"audio file not found: {path}")
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile raises LibsndfileError, RuntimeError or TypeError by format
        raise AudioError(f"cannot decode audio file {path}: {exc}. Pass a WAV, FLAC, OGG or MP3 file.") from exc
    return resample(to_mono(data), int(rate), int(sample_rate))
