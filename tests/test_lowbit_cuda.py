"""fpa_lowbit on CUDA: the Triton 4-bit kernel and the PyTorch-level path vs float64.

Skipped without an NVIDIA GPU (CI has none); run on the H200 with
``python3 -m pytest tests/test_lowbit_cuda.py -q``.
"""

from __future__ import annotations

import fpa_lowbit as lowbit
import pytest
import torch
from fpa_lowbit import dequantize, ops, pack_lowbit

from test_lowbit import _random_operands

TOL = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 2e-2}

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


_operands = _random_operands  # the same seeded operands as the CPU tests


def _check(y, A, q, S, Z, gs, dtype):
    assert y.dtype == dtype and y.device.type == "cuda"
    ref = A.double() @ dequantize(q, S, Z, gs).t()
    y = y.cpu()
    assert torch.isfinite(y).all()
    err = (y.double() - ref).abs().max().item()
    scale = max(1.0, ref.abs().max().item())
    assert err <= TOL[dtype] * scale, (err, scale)


def test_cuda_backend_value():
    assert ops.cuda_backend() in ("triton", "torch")


@needs_cuda
def test_triton_selected_when_importable():
    pytest.importorskip("triton")
    assert ops.cuda_backend() == "triton"


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("gs", [32, 64, 128, 256])
@pytest.mark.parametrize("M", [1, 3, 16])
@pytest.mark.parametrize("K,N", [(256, 6), (1024, 640), (4096, 1024), (640, 8198), (768, 40)])
def test_cuda_4bit_small_m(M, K, N, gs, dtype):
    if K % gs:
        pytest.skip("K % group_size != 0")
    A, q, S, Z = _operands(M, K, N, 4, gs, dtype, seed=M + K + N + gs)
    y = lowbit.linear_op(4)(A.cuda(), pack_lowbit(q, 4).cuda(), gs, S.cuda(), Z.cuda())
    _check(y, A, q, S, Z, gs, dtype)


@needs_cuda
@pytest.mark.parametrize("split_k", [1, 2, 3, 16])
def test_triton_split_k(split_k):
    tk = pytest.importorskip("fpa_lowbit.triton_kernels")
    A, q, S, Z = _operands(2, 4096, 300, 4, 32, torch.float32, seed=split_k)
    y = tk.linear_4bit(A.cuda(), pack_lowbit(q, 4).cuda(), 32, S.cuda(), Z.cuda(), split_k=split_k)
    _check(y, A, q, S, Z, 32, torch.float32)


@needs_cuda
@pytest.mark.parametrize("M", [1, 5, 40])
def test_cuda_out_variant_and_strided_a(M):
    A, q, S, Z = _operands(M, 1024, 640, 4, 32, torch.bfloat16, seed=3)
    Ac = A.cuda()
    wide = torch.zeros(M, 2048, dtype=torch.bfloat16, device="cuda")
    wide[:, ::2] = Ac  # A with stride(1) == 2
    op = lowbit.linear_op(4)
    B, Sc, Zc = pack_lowbit(q, 4).cuda(), S.cuda(), Z.cuda()
    _check(op(wide[:, ::2], B, 32, Sc, Zc), A, q, S, Z, 32, torch.bfloat16)
    out = torch.empty(M, 640, dtype=torch.bfloat16, device="cuda")
    r = op.out(Ac, B, 32, Sc, Zc, out=out)
    assert r.data_ptr() == out.data_ptr()
    _check(out, A, q, S, Z, 32, torch.bfloat16)
    # a non-contiguous out (column slice of a wider buffer)
    big = torch.zeros(M, 1280, dtype=torch.bfloat16, device="cuda")
    op.out(Ac, B, 32, Sc, Zc, out=big[:, 640:])
    _check(big[:, 640:], A, q, S, Z, 32, torch.bfloat16)
    assert torch.equal(big[:, :640].cpu(), torch.zeros(M, 640, dtype=torch.bfloat16))


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("M", [1, 7, 17, 625])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8])
def test_cuda_every_bitwidth(n, M, dtype):
    A, q, S, Z = _operands(M, 512, 200, n, 64, dtype, seed=n + M)
    y = lowbit.linear_op(n)(A.cuda(), pack_lowbit(q, n).cuda(), 64, S.cuda(), Z.cuda())
    _check(y, A, q, S, Z, 64, dtype)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M", [17, 625])
def test_cuda_4bit_large_m(M, dtype):
    A, q, S, Z = _operands(M, 1024, 8198, 4, 64, dtype, seed=M)
    y = lowbit.linear_op(4)(A.cuda(), pack_lowbit(q, 4).cuda(), 64, S.cuda(), Z.cuda())
    _check(y, A, q, S, Z, 64, dtype)


@needs_cuda
@pytest.mark.parametrize("gs", [32, 256])
def test_triton_dequantize_exact(gs):
    tk = pytest.importorskip("fpa_lowbit.triton_kernels")
    _, q, S, Z = _operands(1, 512, 70, 4, gs, torch.float32, seed=gs)
    W = tk.dequantize_4bit(pack_lowbit(q, 4).cuda(), S.cuda(), Z.cuda(), gs, torch.float32)
    torch.testing.assert_close(W.cpu().double(), dequantize(q, S, Z, gs), atol=1e-6, rtol=1e-6)


@needs_cuda
@pytest.mark.parametrize("M", [1, 7, 100])
def test_cuda_torch_path_matches_triton(M):
    """The PyTorch-level kernel (fallback without triton) is also right on CUDA."""
    A, q, S, Z = _operands(M, 1024, 640, 4, 32, torch.float32, seed=11)
    y = ops.linear_reference_kernel(A.cuda(), pack_lowbit(q, 4).cuda(), 32, S.cuda(), Z.cuda(), 4)
    _check(y, A, q, S, Z, 32, torch.float32)


@needs_cuda
def test_cuda_errors_and_empty():
    op = lowbit.linear_op(4)
    A, q, S, Z = _operands(2, 64, 8, 4, 32, torch.float32)
    A, B, S, Z = A.cuda(), pack_lowbit(q, 4).cuda(), S.cuda(), Z.cuda()
    with pytest.raises(ValueError, match="S must have A's dtype"):
        op(A, B, 32, S.half(), Z)
    with pytest.raises(ValueError, match="B is on cpu"):
        op(A, B.cpu(), 32, S, Z)
    with pytest.raises(ValueError, match="out must be"):
        op.out(A, B, 32, S, Z, out=torch.empty(2, 9, device="cuda"))
    assert op(A[:0], B, 32, S, Z).shape == (0, 8)


@needs_cuda
def test_cuda_quantized_module():
    from fpa_lowbit import UIntxWeightOnlyConfig
    from torchao.quantization import quantize_

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 128)).cuda()
    ref = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 128)).cuda()
    ref.load_state_dict(m.state_dict())
    quantize_(m, UIntxWeightOnlyConfig(bitwidth=4, group_size=32))
    for M in (1, 9, 300):
        x = torch.randn(M, 256, device="cuda")
        y, r = m(x), ref(x)
        assert y.device.type == "cuda"
        assert ((y - r).norm() / r.norm()).item() < 0.2
        # the quantized module on CUDA matches the same module's CPU result
        torch.testing.assert_close(y.cpu(), m.cpu()(x.cpu()), atol=1e-4, rtol=1e-4)
        m.cuda()
