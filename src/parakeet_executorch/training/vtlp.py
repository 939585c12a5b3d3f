"""Vocal tract length perturbation (VTLP) of log-mel features, for training on few synthetic speakers.

A held-out voice is mostly a new speaker: its formants sit at other frequencies than any training voice's. VTLP
(Jaitly and Hinton, "Vocal Tract Length Perturbation (VTLP) improves speech recognition", 2013) stretches the
frequency axis of each training utterance by a random factor ``alpha``, so the model hears many more vocal-tract
lengths than the synthesizers have voices. Unlike speed perturbation (``augment.py``), it leaves duration and pitch
period alone, so the two combine.

The warp is theirs, piecewise linear in Hz: ``f -> alpha * f`` up to the knee ``f_hi * min(alpha, 1) / alpha``
(``f_hi`` = 4.8 kHz at 8 kHz Nyquist), then a straight line to the Nyquist frequency, which maps to itself, so no
band leaves the spectrum. It is applied to the features NeMo's preprocessor returns (``[batch, mels, frames]``,
after log and per-feature normalisation): output band ``i`` takes the value of the input at the frequency the warp
sends to band ``i``'s centre, linearly interpolated between the two nearest input bands. Padded frames stay zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VTLP_KNEE_HZ = 4800.0


@dataclass(frozen=True)
class VtlpRecipe:
    """``p``: share of the utterances warped; ``alpha``: the factor's uniform range (1.0: no warp)."""

    p: float = 0.0
    alpha: tuple[float, float] = (0.9, 1.1)


def mel_band_centres_hz(n_mels: int, sample_rate: int, fmin: float = 0.0, fmax: float | None = None) -> np.ndarray:
    """Centre frequency (Hz) of each band of the Slaney mel filterbank NeMo's featurizer builds (librosa's).

    Returns:
        float64 [n_mels], increasing.
    """
    import librosa

    fmax = sample_rate / 2 if fmax is None else fmax
    return librosa.mel_frequencies(n_mels=n_mels + 2, fmin=fmin, fmax=fmax, htk=False)[1:-1]


def warp_hz(f: np.ndarray, alpha: float, nyquist: float, knee: float = VTLP_KNEE_HZ) -> np.ndarray:
    """The VTLP warp of frequencies ``f`` (Hz) by ``alpha``: ``alpha * f`` below the knee, then linear to Nyquist."""
    boundary = knee * min(alpha, 1.0) / alpha
    upper = nyquist - (nyquist - knee * min(alpha, 1.0)) / (nyquist - boundary) * (nyquist - f)
    return np.where(f <= boundary, alpha * f, upper)


def source_bands(alpha: float, centres_hz: np.ndarray, nyquist: float) -> np.ndarray:
    """Fractional input band index whose value lands on each output band after the warp by ``alpha``.

    Returns:
        float64 [n_mels] in [0, n_mels - 1].
    """
    grid = np.linspace(0.0, nyquist, 4097)
    source_hz = np.interp(centres_hz, warp_hz(grid, alpha, nyquist), grid)
    return np.interp(source_hz, centres_hz, np.arange(len(centres_hz), dtype=np.float64))


def warp_features(features, alphas, centres_hz: np.ndarray, nyquist: float):
    """Each utterance's features warped by its own ``alpha``.

    Args:
        features: torch float tensor [batch, n_mels, frames] (NeMo preprocessor output).
        alphas: one warp factor per utterance (1.0 leaves that row as it is).
        centres_hz: the bands' centre frequencies (``mel_band_centres_hz``).
        nyquist: half the sample rate, Hz.
    Returns:
        A tensor of the same shape, dtype and device.
    """
    import torch

    idx = np.stack([source_bands(a, centres_hz, nyquist) for a in alphas])  # [batch, n_mels]
    lo = np.floor(idx).astype(np.int64)
    hi = np.minimum(lo + 1, len(centres_hz) - 1)
    w = torch.as_tensor(idx - lo, dtype=features.dtype, device=features.device)[:, :, None]
    frames = features.shape[-1]
    lo_t = torch.as_tensor(lo, device=features.device)[:, :, None].expand(-1, -1, frames)
    hi_t = torch.as_tensor(hi, device=features.device)[:, :, None].expand(-1, -1, frames)
    return torch.gather(features, 1, lo_t) * (1 - w) + torch.gather(features, 1, hi_t) * w


def draw_alphas(rng, n: int, recipe: VtlpRecipe) -> list[float]:
    """``n`` warp factors: uniform in ``recipe.alpha`` with probability ``recipe.p``, else 1.0 (``random.Random``)."""
    return [rng.uniform(*recipe.alpha) if rng.random() < recipe.p else 1.0 for _ in range(n)]
