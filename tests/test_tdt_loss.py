"""training/tdt_loss.py against NeMo's TDT losses: the pure-PyTorch reference on CPU, the numba one on CUDA."""

from __future__ import annotations

import itertools
import math
from unittest import mock

import pytest
import torch

from parakeet_executorch.training.tdt_loss import tdt_loss

DURATIONS = [0, 1, 2, 3, 4]


def _case(seed: int, B=3, T=7, U=4, V=6, D=len(DURATIONS)):  # noqa: B008 (a constant)
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, U + 1, V + 1 + D, generator=g, dtype=torch.float64) * 2
    targets = torch.randint(0, V, (B, U), generator=g)
    logit_lengths = torch.tensor([T] + [int(x) for x in torch.randint(1, T + 1, (B - 1,), generator=g)])
    target_lengths = torch.tensor([U] + [int(x) for x in torch.randint(0, U + 1, (B - 1,), generator=g)])
    return logits, targets, logit_lengths, target_lengths, V


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("sigma", [0.0, 0.05])
def test_matches_nemo_pytorch_reference(seed, sigma):
    from nemo.collections.asr.losses.rnnt_pytorch import TDTLossPytorch

    logits, targets, tl, ul, blank = _case(seed)
    ref = TDTLossPytorch(blank=blank, durations=DURATIONS, reduction="none", sigma=sigma)
    # The reference moves its buffers to CUDA unconditionally; on CPU keep them where they are.
    with mock.patch.object(torch.Tensor, "cuda", lambda self, *a, **k: self):
        expected = ref(acts=logits, labels=targets, act_lens=tl, label_lens=ul)
    got = tdt_loss(logits, targets, tl, ul, blank=blank, durations=DURATIONS, sigma=sigma, reduction="none")
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-4)


def test_matches_enumeration_of_all_paths():
    """Sum over every (token, duration) path of a 4-frame, 2-token lattice, written out independently."""
    logits, targets, _, _, blank = _case(7, B=1, T=4, U=2, V=3)
    lp = torch.log_softmax(logits[0, ..., : blank + 1], -1)
    dp = torch.log_softmax(logits[0, ..., blank + 1 :], -1)
    y = targets[0].tolist()
    T, U = 4, 2
    total = []

    def walk(t, u, acc):  # at frame t < T having emitted u labels
        for j, d in enumerate(DURATIONS):
            if u < U and t + d < T:  # next label; a path may not end on a label
                walk(t + d, u + 1, acc + float(lp[t, u, y[u]] + dp[t, u, j]))
            if d >= 1:
                a = acc + float(lp[t, u, blank] + dp[t, u, j])
                if t + d == T and u == U:
                    total.append(a)
                elif t + d < T:
                    walk(t + d, u, a)

    walk(0, 0, 0.0)
    expected = -math.log(sum(math.exp(a) for a in total))
    got = tdt_loss(logits, targets, torch.tensor([T]), torch.tensor([U]), blank=blank, durations=DURATIONS)
    assert len(total) > 10
    assert abs(float(got) - expected) < 1e-4


def test_gradient_is_finite_and_nonzero():
    logits, targets, tl, ul, blank = _case(3)
    logits = logits.float().requires_grad_()
    tdt_loss(logits, targets, tl, ul, blank=blank, durations=DURATIONS).backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0


@pytest.mark.parametrize("bad", ["targets", "lengths", "durations"])
def test_bad_inputs_are_named(bad):
    logits, targets, tl, ul, blank = _case(0)
    kwargs = dict(blank=blank, durations=DURATIONS)
    if bad == "targets":
        targets = targets[:, :2]
    elif bad == "lengths":
        tl = tl + 100
    else:
        kwargs["durations"] = [0, 0, 0, 0, 0]
    with pytest.raises(ValueError):
        tdt_loss(logits, targets, tl, ul, **kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="NeMo's numba TDT loss needs an NVIDIA GPU")
@pytest.mark.parametrize("seed", range(3))
def test_matches_nemo_numba_loss_on_cuda(seed):
    from nemo.collections.asr.losses.rnnt import RNNTLoss

    logits, targets, tl, ul, blank = _case(seed, B=4, T=20, U=6, V=10)
    logits = logits.float().cuda()
    loss = RNNTLoss(
        num_classes=blank,
        reduction="mean_batch",
        loss_name="tdt",
        loss_kwargs={"durations": DURATIONS, "sigma": 0.02, "omega": 0.0, "fastemit_lambda": 0.0, "clamp": -1.0},
    )
    expected = loss(log_probs=logits, targets=targets.cuda(), input_lengths=tl.cuda(), target_lengths=ul.cuda())
    got = tdt_loss(logits, targets.cuda(), tl.cuda(), ul.cuda(), blank=blank, durations=DURATIONS, sigma=0.02)
    torch.testing.assert_close(got, expected.float(), rtol=1e-4, atol=1e-3)


def test_all_lengths_combinations_run():
    logits, targets, _, _, blank = _case(5, B=1, T=5, U=3, V=4)
    for t, u in itertools.product(range(1, 6), range(0, 4)):
        v = tdt_loss(logits, targets, torch.tensor([t]), torch.tensor([u]), blank=blank, durations=DURATIONS)
        assert torch.isfinite(v), (t, u)
