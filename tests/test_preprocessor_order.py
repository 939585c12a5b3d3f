"""The preprocessor's normalisation sums in PyTorch's float32 order (export/preprocessor_rewrites.py), in eager mode:
the same bits as ``torch.sum`` and as NeMo's ``normalize_batch``, on every CPU capability this host runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from parakeet_executorch.export import preprocessor_rewrites as pr

# Lengths around every boundary of the kernel: scalar rows (< 8), whole vectors, groups of 4 vectors (32 values),
# first-level blocks (512), 16 and 256 blocks (8192, 131072 values: the second and third cascade levels).
LENGTHS = list(range(0, 70)) + [
    95,
    96,
    97,
    127,
    128,
    129,
    361,
    362,
    511,
    512,
    513,
    1100,
    1101,
    3001,
    6001,
    8191,
    8192,
    8193,
    20000,
    131071,
    131072,
    131073,
    140001,
]


def _rows(length: int, seed: int) -> torch.Tensor:
    """Four rows of ``length`` values: log-mel-like noise, a constant (digital silence's log-mel), mixed signs,
    and a constant with a different tail."""
    rs = np.random.RandomState(seed)
    rows = np.stack(
        [rs.randn(length) * 3 - 10, np.full(length, -16.635532), rs.randn(length) * 100, np.full(length, 0.37)]
    ).astype(np.float32)
    rows[3, length // 2 :] = -4.25
    return torch.from_numpy(rows)[None]


def test_ordered_sum_is_torch_sum_bit_for_bit():
    for length in LENGTHS:
        x = _rows(length, length)
        padded = torch.cat([x, torch.full((1, 4, 9), 7.5)], dim=-1)  # values past the length must not count
        got = pr.ordered_sum(padded, torch.tensor([length]), max_length=length + 20)
        assert torch.equal(got, x.sum(-1)), f"length {length}: {got} != {x.sum(-1)}"


def test_ordered_sum_per_batch_lengths():
    x = torch.cat([_rows(700, 1), _rows(700, 2)])[:, :3]
    lengths = torch.tensor([700, 37])
    got = pr.ordered_sum(x, lengths)
    assert torch.equal(got[0], x[0].sum(-1)) and torch.equal(got[1], x[1, :, :37].sum(-1))


_CHILD = """
import json, sys, numpy as np, torch
rows = np.load(sys.argv[1])
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "sums": {k: torch.from_numpy(rows[k]).sum(-1).numpy().tobytes().hex() for k in rows.files}}))
"""


def _capabilities():
    """The x86 capabilities up to the host's (ATEN_CPU_CAPABILITY can only lower it); elsewhere the host's own."""
    host = torch.backends.cpu.get_cpu_capability().lower()
    x86 = ["default", "avx2", "avx512"]
    return x86[: x86.index(host) + 1] if host in x86 else [None]


@pytest.mark.parametrize("capability", _capabilities())
def test_torch_sum_order_is_the_same_on_every_cpu_capability(tmp_path, capability):
    """PyTorch picks kernels by ATEN_CPU_CAPABILITY; its sum must still be the order ``ordered_sum`` models (the
    kernel's vector width is 8 floats on each: its sum kernel is not built for AVX-512)."""
    rows = {f"n{n}": _rows(n, n)[0].numpy() for n in (5, 8, 63, 64, 511, 513, 6001, 8193)}
    path = tmp_path / "rows.npz"
    np.savez(path, **rows)
    env = dict(os.environ)
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if capability is not None:
        assert result["capability"].lower() == capability
    for key, row in rows.items():
        ours = pr.ordered_sum(torch.from_numpy(row)[None], torch.tensor([row.shape[-1]]))[0]
        assert ours.numpy().tobytes().hex() == result["sums"][key], f"{key} on {result['capability']}"


def _log_mel(frames: int, seed: int, constant_bands: int = 3) -> torch.Tensor:
    rs = np.random.RandomState(seed)
    x = (rs.randn(1, 16, frames) * 2 - 8).astype(np.float32)
    x[0, :constant_bands] = np.float32(np.log(np.float32(2.0**-24)))  # bands of digital silence
    return torch.from_numpy(x)


@pytest.mark.parametrize("frames", [1, 2, 7, 9, 51, 301, 362, 1101, 3001, 6001])
def test_normalization_is_nemos_bit_for_bit(frames):
    """On NeMo's unpadded input (frames = seq_len + 1) the result equals NeMo's to the bit, also on a constant band,
    where the output is the sums' rounding residue divided by about 1e-5; on the runner's input, zero-padded by a
    few frames, it still equals NeMo's unpadded result."""
    from nemo.collections.asr.parts.preprocessing.features import normalize_batch

    x = _log_mel(frames, frames)
    seq_len = torch.tensor([frames - 1])
    ref = normalize_batch(x, seq_len, "per_feature")
    ours = pr.normalize_per_feature(x, seq_len)
    padded = pr.normalize_per_feature(torch.cat([x, torch.zeros(1, 16, 5)], -1), seq_len, max_frames=frames + 100)
    for r, o, p in zip(ref, ours, padded):
        if frames > 2:
            assert torch.equal(r, o) and torch.equal(r, p[..., : r.shape[-1]] if r.dim() == 3 else p)
        else:  # one valid frame or none: NeMo's std is 0/0; compare with NaNs equal
            assert torch.allclose(r, o, equal_nan=True, rtol=0, atol=0)
    if frames > 2:
        residue = ours[0][0, 0, 0]
        assert residue == ref[0][0, 0, 0]


def test_patch_is_scoped_and_keeps_other_normalisations():
    from nemo.collections.asr.parts.preprocessing import features

    original = features.normalize_batch
    x, seq_len = _log_mel(40, 0), torch.tensor([39])
    with pr.torch_order_normalization(max_frames=100):
        assert features.normalize_batch is not original
        assert torch.equal(
            features.normalize_batch(x, seq_len, "per_feature")[0], pr.normalize_per_feature(x, seq_len)[0]
        )
        for kind in ("all_features", "none"):
            got, want = features.normalize_batch(x, seq_len, kind), original(x, seq_len, kind)
            assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(got, want))
    assert features.normalize_batch is original


def test_square_as_product():
    class Squares(torch.nn.Module):
        def forward(self, x):
            return x**2, x.pow(2.0), x**3

    ep = torch.export.export(Squares(), (torch.randn(10000),), strict=False)
    assert pr.square_as_product(ep) == 2
    targets = [n.target for n in ep.graph_module.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten.mul.Tensor) == 2 and targets.count(torch.ops.aten.pow.Tensor_Scalar) == 1
    x = torch.randn(10000) * 7  # PyTorch's own pow(x, 2) is x * x: the rewritten graph keeps eager's bits
    for got, want in zip(ep.module()(x), Squares()(x)):
        assert torch.equal(got, want)
