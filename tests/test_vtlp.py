"""VTLP of mel features (training/vtlp.py): the warp's shape, identity at alpha 1, and spectral peaks moving by
alpha in Hz."""

import random

import numpy as np
import pytest
import torch

from parakeet_executorch.training.vtlp import (
    VTLP_KNEE_HZ,
    VtlpRecipe,
    draw_alphas,
    mel_band_centres_hz,
    source_bands,
    warp_features,
    warp_hz,
)

NYQ = 8000.0


@pytest.mark.parametrize("alpha", [0.9, 0.95, 1.05, 1.1])
def test_warp_is_continuous_monotonic_and_keeps_nyquist(alpha):
    f = np.linspace(0, NYQ, 8001)
    w = warp_hz(f, alpha, NYQ)
    assert w[0] == 0 and w[-1] == pytest.approx(NYQ)
    assert np.all(np.diff(w) > 0)
    assert np.max(np.abs(np.diff(w))) < 2.0 * max(alpha, 1.0)  # no jump at the knee
    low = f < VTLP_KNEE_HZ * min(alpha, 1) / alpha
    np.testing.assert_allclose(w[low], alpha * f[low])


def test_centres_are_slaney_mel_bands_of_nemo_featurizer():
    c = mel_band_centres_hz(128, 16000)
    assert c.shape == (128,) and np.all(np.diff(c) > 0) and 0 < c[0] < 60 and 7700 < c[-1] < 8000


def test_alpha_one_is_the_identity():
    c = mel_band_centres_hz(128, 16000)
    np.testing.assert_allclose(source_bands(1.0, c, NYQ), np.arange(128), atol=1e-9)
    x = torch.randn(2, 128, 7)
    assert torch.equal(warp_features(x, [1.0, 1.0], c, NYQ), x)


@pytest.mark.parametrize("alpha", [0.9, 1.1])
def test_a_formant_moves_by_alpha(alpha):
    """A peak at 1 kHz (below the knee) lands at alpha kHz after the warp; padded (zero) frames stay zero."""
    c = mel_band_centres_hz(128, 16000)
    x = torch.zeros(2, 128, 5)
    band = int(np.argmin(np.abs(c - 1000.0)))
    x[:, band, :3] = 1.0
    y = warp_features(x, [alpha, 1.0], c, NYQ)
    peak_hz = c[int(torch.argmax(y[0, :, 0]))]
    assert abs(peak_hz - alpha * c[band]) < 0.6 * (c[band + 1] - c[band - 1]) * alpha
    assert torch.equal(y[1], x[1])
    assert torch.count_nonzero(y[:, :, 3:]) == 0
    assert y.dtype == x.dtype and y.shape == x.shape


def test_draw_alphas_follows_the_recipe():
    rng = random.Random(0)
    assert draw_alphas(rng, 50, VtlpRecipe(p=0.0)) == [1.0] * 50
    a = draw_alphas(rng, 400, VtlpRecipe(p=0.5))
    warped = [x for x in a if x != 1.0]
    assert 150 < len(warped) < 250 and all(0.9 <= x <= 1.1 for x in warped)
