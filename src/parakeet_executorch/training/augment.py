"""Seeded acoustic augmentation for the synthetic corpus: a synthetic room, background noise and level (numpy only).

The recipe (``AugmentRecipe``'s defaults), applied to each training clip with its own ``numpy`` generator, so a
clip's result depends only on its seed:

0. Speed, with probability ``speed_p`` (0 by default; the corpus sets it from ``--speed-perturb``): the clip is
   resampled as if recorded at ``factor`` x the sample rate, factor uniform in 0.85-1.15 (soxr), so it plays
   ``factor`` x faster with pitch and formants ``factor`` x higher, as Kaldi's and NeMo's speed perturbation do.
   Shifted formants stand in for speakers with other vocal-tract lengths: the synthesizers have few voices, and
   a held-out voice is mostly a new speaker. At probability 0 no random number is drawn, so the other steps'
   draws are those of a recipe without it.
1. Room, with probability 0.4: the clip is convolved with a synthetic impulse response: a unit direct path,
   then after 2-8 ms a tail of Gaussian noise whose amplitude decays by 60 dB over RT60 seconds (RT60 uniform in
   0.15-0.9 s) below 500 Hz, and over 0.9, 0.7 and 0.5 x RT60 in the bands 0.5-2, 2-4 and 4-8 kHz (walls absorb
   high frequencies first), scaled to a direct-to-reverberant energy ratio uniform in 0-15 dB.
   The result is rescaled to the clip's RMS.
2. Noise, with probability 0.6: stationary noise with a power spectrum ~ f ** -beta, beta uniform in 0-2 (white
   to brown), plus with probability 0.3 mains hum (50 or 60 Hz and 3 harmonics), added at an SNR uniform in
   5-35 dB over the whole clip, pauses included.
3. Level: the clip is scaled so that its peak is uniform in -24 to -1 dBFS.

Test material is not augmented: its figures measure text, voice and length, not noise robustness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RIR_BANDS_HZ = ((0, 500), (500, 2000), (2000, 4000), (4000, 1e9))
RIR_BAND_RT60_FACTOR = (1.0, 0.9, 0.7, 0.5)


@dataclass(frozen=True)
class AugmentRecipe:
    speed_p: float = 0.0
    speed_factor: tuple[float, float] = (0.85, 1.15)
    reverb_p: float = 0.4
    rt60_s: tuple[float, float] = (0.15, 0.9)
    predelay_s: tuple[float, float] = (0.002, 0.008)
    drr_db: tuple[float, float] = (0.0, 15.0)
    noise_p: float = 0.6
    snr_db: tuple[float, float] = (5.0, 35.0)
    noise_beta: tuple[float, float] = (0.0, 2.0)
    hum_p: float = 0.3
    peak_dbfs: tuple[float, float] = (-24.0, -1.0)


def room_impulse_response(
    rng: np.random.Generator, sample_rate: int, rt60: float, predelay: float, drr_db: float
) -> np.ndarray:
    """Direct path + a tail of exponentially decaying noise (length 1.2 x RT60), faster in higher bands."""
    n = int(1.2 * rt60 * sample_rate)
    start = int(predelay * sample_rate)
    t = np.arange(n - start) / sample_rate
    # Four frequency bands of one noise, each decaying at its own rate: the highest band's RT60 is half the
    # lowest's, since walls and air absorb high frequencies first.
    spectrum = np.fft.rfft(rng.standard_normal(n - start))
    freqs = np.fft.rfftfreq(n - start, 1.0 / sample_rate)
    tail = np.zeros(n - start)
    for (lo, hi), factor in zip(RIR_BANDS_HZ, RIR_BAND_RT60_FACTOR):
        band = np.fft.irfft(np.where((freqs >= lo) & (freqs < hi), spectrum, 0), n - start)
        tail += band * 10.0 ** (-3.0 * t / (rt60 * factor))
    rir = np.zeros(n, dtype=np.float64)
    rir[0] = 1.0
    energy = float(np.sum(tail**2)) or 1.0
    rir[start:] = tail * np.sqrt(10.0 ** (-drr_db / 10.0) / energy)
    return rir


def reverberate(audio: np.ndarray, rir: np.ndarray) -> np.ndarray:
    """``audio`` convolved with ``rir`` (FFT), cut to the input length and rescaled to the input RMS."""
    n = len(audio) + len(rir) - 1
    size = 1 << (n - 1).bit_length()
    wet = np.fft.irfft(np.fft.rfft(audio, size) * np.fft.rfft(rir, size), size)[: len(audio)]
    rms_in, rms_out = np.sqrt(np.mean(audio**2)), np.sqrt(np.mean(wet**2))
    return wet * (rms_in / rms_out if rms_out > 0 else 1.0)


def colored_noise(rng: np.random.Generator, n: int, beta: float) -> np.ndarray:
    """Unit-RMS Gaussian noise with power spectrum ~ f ** -beta (0 white, 1 pink, 2 brown)."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spectrum), dtype=np.float64)
    f[0] = 1.0
    noise = np.fft.irfft(spectrum * f ** (-beta / 2.0), n)
    return noise / (np.sqrt(np.mean(noise**2)) or 1.0)


def hum(rng: np.random.Generator, n: int, sample_rate: int) -> np.ndarray:
    """Unit-RMS mains hum: 50 or 60 Hz with 3 harmonics of random level and phase."""
    base = rng.choice([50.0, 60.0])
    t = np.arange(n) / sample_rate
    wave = sum(
        rng.uniform(0.1, 1.0) / k * np.sin(2 * np.pi * base * k * t + rng.uniform(0, 2 * np.pi)) for k in range(1, 5)
    )
    return wave / (np.sqrt(np.mean(wave**2)) or 1.0)


def perturb_speed(audio: np.ndarray, factor: float, sample_rate: int = 16000) -> np.ndarray:
    """``audio`` played ``factor`` x faster, pitch and formants included (soxr's high-quality resampler).

    Args:
        audio: 1-D float samples at ``sample_rate``.
        factor: > 0; the result has about ``len(audio) / factor`` samples.
    Raises:
        ValueError: ``factor`` is not positive.
    Mirrors the speed perturbation of NeMo's ``SpeedPerturbation`` (a resample read back at the original rate).
    """
    if factor <= 0:
        raise ValueError(f"speed factor must be positive, got {factor}")
    import soxr

    return soxr.resample(audio, sample_rate * factor, sample_rate, quality="HQ")


def augment(
    audio: np.ndarray, rng: np.random.Generator, sample_rate: int = 16000, recipe: AugmentRecipe = AugmentRecipe()
) -> tuple[np.ndarray, dict]:
    """Apply the recipe to one clip.

    Returns:
        float32 audio (of the same length unless the speed was perturbed), and what was applied
        (``{"speed": ..., "rt60": ..., "snr_db": ..., ...}``).
    """
    x = audio.astype(np.float64)
    info: dict = {}
    if len(x) == 0 or not np.any(x):
        return audio.astype(np.float32), info
    if recipe.speed_p > 0 and rng.random() < recipe.speed_p:
        factor = rng.uniform(*recipe.speed_factor)
        x = perturb_speed(x, factor, sample_rate)
        info["speed"] = round(factor, 4)
    if rng.random() < recipe.reverb_p:
        rt60 = rng.uniform(*recipe.rt60_s)
        predelay, drr = rng.uniform(*recipe.predelay_s), rng.uniform(*recipe.drr_db)
        x = reverberate(x, room_impulse_response(rng, sample_rate, rt60, predelay, drr))
        info.update(rt60=round(rt60, 3), drr_db=round(drr, 1))
    if rng.random() < recipe.noise_p:
        beta, snr = rng.uniform(*recipe.noise_beta), rng.uniform(*recipe.snr_db)
        noise = colored_noise(rng, len(x), beta)
        if rng.random() < recipe.hum_p:
            noise = noise + hum(rng, len(x), sample_rate)
            noise /= np.sqrt(np.mean(noise**2))
            info["hum"] = True
        signal_rms = np.sqrt(np.mean(x**2))
        x = x + noise * signal_rms * 10.0 ** (-snr / 20.0)
        info.update(noise_beta=round(beta, 2), snr_db=round(snr, 1))
    peak = rng.uniform(*recipe.peak_dbfs)
    x = x * (10.0 ** (peak / 20.0) / (np.max(np.abs(x)) or 1.0))
    info["peak_dbfs"] = round(peak, 1)
    return x.astype(np.float32), info
