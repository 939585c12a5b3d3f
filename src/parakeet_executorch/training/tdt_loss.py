"""TDT loss in plain PyTorch, vectorised over batch and label positions, for training without CUDA.

NeMo's TDT losses do not run on a CPU: the numba one is CUDA-only, and ``TDTLossPytorch`` moves its tensors to
CUDA and loops over batch, frame and label one scalar at a time. This module computes the same forward
probability (Eq. 7 of the TDT paper, https://arxiv.org/abs/2304.06795) with one Python step per encoder frame:

- alpha(t, u) sums blank arcs from (t - d, u) for durations d >= 1 and label arcs from (t - d, u - 1) for all d.
- Label arcs with d = 0 stay on frame t, so within a frame alpha is a first-order recurrence over u; it is solved
  in closed form with a log-cumulative-sum (``torch.logcumsumexp``) instead of a loop over u.
- A path ends with a blank of duration d >= 1 that lands exactly on the last frame.

``sigma`` (logit under-normalisation) is subtracted from the token log-probabilities as in NeMo. NeMo's
``omega`` (mixing in the plain RNN-T loss) is not implemented; use 0.
"""

from __future__ import annotations

import torch


def tdt_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int,
    durations: list[int],
    sigma: float = 0.0,
    reduction: str = "mean_batch",
) -> torch.Tensor:
    """Negative log-likelihood of the targets under a TDT joint's outputs.

    Mirrors ``nemo.collections.asr.losses.rnnt_pytorch.TDTLossPytorch`` (same inputs, same value).

    Args:
        logits: float [B, T, U + 1, V + 1 + D], the joint's raw outputs: V + 1 token logits (blank last, index
            ``blank``), then D duration logits.
        targets: int64 [B, U] token ids (values past ``target_lengths`` are ignored).
        logit_lengths: int [B], valid encoder frames per item (1..T).
        target_lengths: int [B], valid tokens per item (0..U).
        blank: blank id (= V for NeMo's BPE models).
        durations: the D durations in frames, e.g. [0, 1, 2, 3, 4]; must contain a duration >= 1.
        sigma: subtracted from the token log-probabilities (NeMo's logit under-normalisation).
        reduction: "mean_batch" (mean over items, NeMo's default), "sum", or "none" (per item, [B]).
    Returns:
        float scalar (or [B] for "none").
    Raises:
        ValueError: shapes or lengths that do not fit together, or no duration >= 1.
    """
    if logits.dim() != 4:
        raise ValueError(f"logits must be [B, T, U+1, V+1+D], got shape {tuple(logits.shape)}")
    B, T, U1, C = logits.shape
    D = len(durations)
    if tuple(targets.shape) != (B, U1 - 1):
        raise ValueError(
            f"targets {tuple(targets.shape)} do not fit logits {tuple(logits.shape)}: need [B, U] = [{B}, {U1 - 1}]"
        )
    if C <= D + blank:
        raise ValueError(f"last logits dimension {C} is too small for blank id {blank} and {D} durations")
    if not any(d >= 1 for d in durations):
        raise ValueError(f"durations {durations} need at least one value >= 1, or no path can end")
    if int(logit_lengths.min()) < 1 or int(logit_lengths.max()) > T or int(target_lengths.max()) > U1 - 1:
        raise ValueError("logit_lengths must be in 1..T and target_lengths in 0..U")

    token_lp = torch.log_softmax(logits[..., : C - D].float(), dim=-1) - sigma
    dur_lp = torch.log_softmax(logits[..., C - D :].float(), dim=-1)
    blank_lp = token_lp[..., blank]  # [B, T, U+1]
    U = U1 - 1
    if U > 0:
        idx = targets.long().clamp(0, C - D - 1)[:, None, :, None].expand(B, T, U, 1)
        label_lp = token_lp[:, :, :U, :].gather(-1, idx).squeeze(-1)  # [B, T, U]: emit y_{u+1} from (t, u)
    neg_inf = torch.tensor(float("-inf"), dtype=token_lp.dtype, device=logits.device)

    alphas: list[torch.Tensor] = []  # alpha[t]: [B, U+1]
    for t in range(T):
        terms = []
        for j, d in enumerate(durations):
            s = t - d
            if s < 0 or (d == 0):
                continue
            prev = alphas[s]
            terms.append(prev + blank_lp[:, s] + dur_lp[:, s, :, j])  # blank arcs
            if U > 0:
                lab = prev[:, :U] + label_lp[:, s] + dur_lp[:, s, :U, j]
                terms.append(torch.cat([neg_inf.expand(B, 1), lab], dim=1))  # label arcs u-1 -> u
        if t == 0:
            base = torch.cat(
                [torch.zeros(B, 1, device=logits.device, dtype=token_lp.dtype), neg_inf.expand(B, U)], dim=1
            )
        elif terms:
            base = torch.logsumexp(torch.stack(terms), dim=0)
        else:
            base = neg_inf.expand(B, U1)
        if 0 in durations and U > 0:
            # alpha[u] = logaddexp(base[u], alpha[u-1] + w[u-1]) with w the d = 0 label arc from (t, u-1):
            # alpha[u] = W[u] + logcumsumexp_k(base[k] - W[k]), W[u] = sum_{j<u} w[j].
            w = label_lp[:, t] + dur_lp[:, t, :U, durations.index(0)]
            W = torch.cat([torch.zeros(B, 1, device=logits.device, dtype=w.dtype), torch.cumsum(w, dim=1)], dim=1)
            base = torch.logcumsumexp(base - W, dim=1) + W
        alphas.append(base)

    alpha = torch.stack(alphas, dim=1)  # [B, T, U+1]
    b = torch.arange(B, device=logits.device)
    u_end = target_lengths.long()
    ends = []
    for j, d in enumerate(durations):
        if d < 1:
            continue
        t_end = logit_lengths.long() - d
        ok = t_end >= 0
        t_c = t_end.clamp(min=0)
        term = alpha[b, t_c, u_end] + blank_lp[b, t_c, u_end] + dur_lp[b, t_c, u_end, j]
        ends.append(torch.where(ok, term, neg_inf))
    nll = -torch.logsumexp(torch.stack(ends), dim=0)
    if reduction == "mean_batch":
        return nll.mean()
    if reduction == "sum":
        return nll.sum()
    if reduction == "none":
        return nll
    raise ValueError(f"unknown reduction {reduction!r}; use mean_batch, sum or none")
