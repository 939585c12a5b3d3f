"""fpa_lowbit: format spec (one test per clause), packing, qparams, op, API."""

from __future__ import annotations

import io

import fpa_lowbit as lowbit
import numpy as np
import pytest
import torch
from fpa_lowbit import (
    UIntxWeight,
    UIntxWeightOnlyConfig,
    check_linear_shape,
    choose_qparams,
    dequantize,
    lowbit_filter_fn,
    lowbit_linear,
    pack_lowbit,
    unpack_lowbit,
)

BITS = list(range(1, 9))
TOL = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def _spec_pack(q: torch.Tensor, n: int) -> torch.Tensor:
    """Spec clause 3 written out literally: a per-row LSB-first bit stream."""
    rows = []
    for row in q.tolist():
        stream = 0
        for i, v in enumerate(row):
            stream |= int(v) << (i * n)
        nbytes = len(row) * n // 8
        rows.append([(stream >> (8 * b)) & 0xFF for b in range(nbytes)])
    return torch.tensor(rows, dtype=torch.uint8)


def _random_operands(M, K, N, n, gs, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 1 << n, (N, K), generator=g, dtype=torch.uint8)
    S = (torch.rand(N, K // gs, generator=g) * 0.02 + 0.001).to(dtype)
    Z = (torch.randn(N, K // gs, generator=g) * 0.05).to(dtype)
    A = torch.randn(M, K, generator=g).to(dtype)
    return A, q, S, Z


def _check_close(y, ref, dtype):
    assert y.dtype == dtype
    assert torch.isfinite(y).all()
    err = (y.double() - ref).abs().max().item()
    scale = max(1.0, ref.abs().max().item())
    assert err <= TOL[dtype] * scale, (err, scale)


# ---------------------------------------------------------------- spec clauses -------------------


def test_spec_quant():
    """Clause 1: q is unsigned n-bit per group of group_size along K."""
    w = torch.randn(8, 256)
    for n in BITS:
        for gs in (32, 64, 128, 256):
            q, S, Z = choose_qparams(w, n, gs, "min_max")
            assert q.dtype == torch.uint8 and q.shape == w.shape
            assert int(q.min()) >= 0 and int(q.max()) <= (1 << n) - 1
            assert S.shape == Z.shape == (8, 256 // gs)
    with pytest.raises(ValueError, match="group_size"):
        choose_qparams(w, 4, 48)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_spec_dequant(dtype):
    """Clause 2: ŵ = q·S + Z with S, Z [N, K/g] in the activation dtype."""
    w = torch.randn(16, 128)
    qw = UIntxWeight.from_float(w, 4, 32, "min_max", dtype=dtype)
    assert qw.scale.dtype == qw.zero.dtype == dtype and qw.scale.shape == (16, 4)
    q = unpack_lowbit(qw.packed, 4)
    manual = q.double() * qw.scale.double().repeat_interleave(32, 1) + qw.zero.double().repeat_interleave(32, 1)
    torch.testing.assert_close(qw.dequantize(torch.float64), manual)
    # min-max error bound: half a step per element (plus dtype rounding of S, Z)
    step = qw.scale.double().repeat_interleave(32, 1)
    assert ((manual - w.double()).abs() <= 0.5 * step + 0.02 * w.abs().max()).all()


@pytest.mark.parametrize("n", BITS)
def test_spec_packing(n):
    """Clause 3: LSB-first stream along K, bit-exact against the literal spec, for every n."""
    g = torch.Generator().manual_seed(n)
    q = torch.randint(0, 1 << n, (5, 64), generator=g, dtype=torch.uint8)
    packed = pack_lowbit(q, n)
    assert packed.dtype == torch.uint8 and packed.shape == (5, 64 * n // 8)
    assert torch.equal(packed, _spec_pack(q, n))
    assert torch.equal(unpack_lowbit(packed, n, 64), q)
    # the op namespace's pack op (torchao's name) gives the same bytes
    assert torch.equal(getattr(torch.ops.torchao, f"_pack_weight_{n}bit")(q), packed)


def test_spec_packing_4bit_formula():
    q = torch.randint(0, 16, (3, 32), dtype=torch.uint8)
    packed = pack_lowbit(q, 4)
    assert torch.equal(packed, (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8))


def test_spec_packing_cross_byte_examples():
    # 3-bit: values 0..7 -> stream bits 000 001 010 011 100 101 110 111 (LSB first)
    q = torch.arange(8, dtype=torch.uint8).reshape(1, 8)
    assert pack_lowbit(q, 3).tolist() == [[0b10001000, 0b11000110, 0b11111010]]
    # 6-bit: 4 values in 3 bytes: v0 | v1 << 6 | v2 << 12 | v3 << 18
    q6 = torch.tensor([[63, 1, 2, 3, 0, 0, 0, 0]], dtype=torch.uint8)
    stream = 63 | (1 << 6) | (2 << 12) | (3 << 18)
    assert pack_lowbit(q6, 6)[0, :3].tolist() == [stream & 255, (stream >> 8) & 255, (stream >> 16) & 255]


@pytest.mark.parametrize("n", [1, 3, 4, 5, 6, 7, 8])
def test_spec_op(n):
    """Clause 4: torchao::_linear_fp_act_{n}bit_weight(A, B, group_size, S, Z) = A @ ŵᵀ, and .out."""
    A, q, S, Z = _random_operands(7, 256, 40, n, 64, torch.float32)
    B = pack_lowbit(q, n)
    ref = A.double() @ dequantize(q, S, Z, 64).t()
    op = getattr(torch.ops.torchao, f"_linear_fp_act_{n}bit_weight")
    _check_close(op(A, B, 64, S, Z), ref, torch.float32)
    out = torch.empty(7, 40)
    r = op.out(A, B, 64, S, Z, out=out)
    assert r.data_ptr() == out.data_ptr()
    _check_close(out, ref, torch.float32)
    # schema is torchao's
    assert str(op.default._schema) == (
        f"torchao::_linear_fp_act_{n}bit_weight(Tensor A, Tensor B, int group_size, Tensor S, Tensor Z) -> Tensor"
    )


def test_spec_shape_rules():
    """Clause 5: K % 8, K % group_size always; N % 4 when M > 1 on Metal; messages name layer and rule."""
    assert check_linear_shape("enc.l0", (1024, 1024), 32, 4) is None
    msg = check_linear_shape("enc.l1", (64, 1004), 32, 4)
    assert "enc.l1" in msg and "K % 8 == 0" in msg
    msg = check_linear_shape("enc.l2", (64, 1000), 32, 4)
    assert "enc.l2" in msg and "K % group_size == 0" in msg
    msg = check_linear_shape("joint.out", (8198, 640), 32, 4)
    assert "joint.out" in msg and "N % 4 == 0" in msg
    assert check_linear_shape("joint.out", (8198, 640), 32, 4, multi_row=False) is None
    assert "bit width 9" in check_linear_shape("x", (8, 64), 32, 9)
    assert "group_size 48" in check_linear_shape("x", (8, 64), 48, 4)


@pytest.mark.parametrize("algo", ["min_max", "hqq"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_spec_qparams_constant_group(algo, dtype):
    """Clause 6: constant groups get a finite scale and are exact; no NaN reaches the output."""
    w = torch.randn(8, 128)
    w[0] = 0.0  # whole row constant
    w[3, 32:64] = 0.731  # one constant group
    w[5, :32] = -2.5
    qw = UIntxWeight.from_float(w, 4, 32, algo, dtype=dtype)
    assert torch.isfinite(qw.scale.float()).all() and torch.isfinite(qw.zero.float()).all()
    deq = qw.dequantize(torch.float32)
    assert torch.equal(deq[0], torch.zeros(128))
    assert torch.allclose(deq[3, 32:64], torch.full((32,), 0.731).to(dtype).float())
    x = torch.randn(3, 128).to(dtype)
    y = lowbit_linear(x, qw)
    assert torch.isfinite(y).all()


def test_spec_qparams_hqq_default_and_better():
    """Clause 6: HQQ is the default and does not do worse than min-max (mean abs error)."""
    assert UIntxWeightOnlyConfig().uintx_choose_qparams_algorithm == "hqq"
    w = torch.randn(128, 512)
    for n in (2, 3, 4):
        errs = {}
        for algo in ("min_max", "hqq"):
            q, S, Z = choose_qparams(w, n, 64, algo)
            errs[algo] = (dequantize(q, S, Z, 64) - w.double()).abs().mean().item()
        assert errs["hqq"] <= errs["min_max"] * 1.001, errs


def _hqq_textbook(weight, bitwidth, group_size, dtype, iters=20, p=0.7, beta=10.0, kappa=1.01):
    """HQQ's zero-point solver written plainly, one new tensor per step (Badri & Shaji, 2023; the lp proximal
    step of its reference implementation), to check the buffered solver against."""
    from fpa_lowbit.qparams import _finish, _grouped

    wg = _grouped(weight, group_size, bitwidth, dtype)
    qmax = float((1 << bitwidth) - 1)
    gmin, gmax = wg.amin(dim=-1, keepdim=True), wg.amax(dim=-1, keepdim=True)
    inv_s = (qmax / (gmax - gmin)).clamp(max=2e4)
    zero = -gmin * inv_s
    best_zero, best_err = zero.clone(), torch.full_like(zero, float("inf"))
    for _ in range(iters):
        wq = torch.round(wg * inv_s + zero).clamp_(0, qmax)
        wr = (wq - zero) / inv_s
        err = (wg - wr).abs().mean(dim=-1, keepdim=True)
        better = err < best_err
        best_err, best_zero = torch.where(better, err, best_err), torch.where(better, zero, best_zero)
        x = wg - wr
        we = torch.sign(x) * torch.relu(x.abs() - (1.0 / beta) * x.abs().clamp_min(1e-8).pow(p - 1))
        zero = torch.mean(wq - (wg - we) * inv_s, dim=-1, keepdim=True)
        beta *= kappa
    return _finish(wg, (1.0 / inv_s).squeeze(-1), (-best_zero / inv_s).squeeze(-1), bitwidth, dtype)


@pytest.mark.parametrize(
    "bits,group,dtype",
    [(4, 32, torch.float32), (4, 32, torch.bfloat16), (2, 64, torch.float16), (8, 256, torch.float32)],
)
def test_hqq_matches_the_textbook_solver_bit_for_bit(bits, group, dtype):
    """The buffered, blocked HQQ solver (no per-step allocations, rows in cache-sized blocks) gives exactly the
    plain formulation's q, S and Z."""
    from fpa_lowbit.qparams import HQQ_BLOCK_ELEMENTS, choose_qparams_hqq

    torch.manual_seed(bits)
    w = torch.randn(600, 512) * 0.02
    assert 2 * HQQ_BLOCK_ELEMENTS < w.numel() and w.shape[0] % (HQQ_BLOCK_ELEMENTS // 512)  # last block short
    w[::7, ::13] *= 30  # outliers, where the lp step matters
    w[3, :group] = 0.25  # a constant group
    for got, want in zip(choose_qparams_hqq(w, bits, group, dtype), _hqq_textbook(w, bits, group, dtype)):
        assert got.dtype == want.dtype and torch.equal(got, want)


# ---------------------------------------------------------------- the op vs float64 reference ----

OP_SHAPES = [(1, 6), (1, 640), (1, 8198), (7, 640), (7, 8198), (64, 640), (64, 8198), (625, 640), (625, 8198)]


@pytest.mark.parametrize("K", [32, 1024, 4096])
@pytest.mark.parametrize("M,N", OP_SHAPES)
def test_op_shapes_vs_float64(M, N, K):
    A, q, S, Z = _random_operands(M, K, N, 4, 32, torch.float32, seed=M + N + K)
    y = lowbit.linear_op(4)(A, pack_lowbit(q, 4), 32, S, Z)
    assert y.shape == (M, N)
    _check_close(y, A.double() @ dequantize(q, S, Z, 32).t(), torch.float32)


def test_op_k1000_error():
    A = torch.randn(3, 1000)
    B = torch.zeros(8, 500, dtype=torch.uint8)
    S = torch.ones(8, 31)
    with pytest.raises(ValueError, match=r"K = 1000 must be a multiple of group_size = 32"):
        lowbit.linear_op(4)(A, B, 32, S, S)
    with pytest.raises(ValueError, match="K % group_size == 0"):
        UIntxWeight.from_float(torch.randn(8, 1000), 4, 32)


def test_quantize_names_the_fix_for_a_layer_it_cannot_take():
    """quantize_ with the default filter stops at a layer that breaks a shape rule, and the error says how to skip
    such layers and learn their names; doing so quantizes the rest and names the one left in float."""
    from fpa_lowbit import lowbit_filter_fn
    from torchao.quantization import quantize_

    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(1000, 8))
    config = UIntxWeightOnlyConfig(bitwidth=4, group_size=64)
    with pytest.raises(ValueError, match=r"K = 1000 breaks rule K % group_size == 0.*lowbit_filter_fn"):
        quantize_(model, config)
    skipped: dict = {}
    quantize_(model, config, filter_fn=lowbit_filter_fn(config, skipped=skipped))
    assert isinstance(model[0].weight, UIntxWeight) and not isinstance(model[1].weight, UIntxWeight)
    assert list(skipped) == ["1"] and "K = 1000" in skipped["1"]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("gs", [32, 64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M", [1, 7, 64])
def test_op_dtypes_groupsizes_bias(M, dtype, gs, bias):
    K, N = 1024, 640
    A, q, S, Z = _random_operands(M, K, N, 4, gs, dtype, seed=gs)
    qw = UIntxWeight(pack_lowbit(q, 4), S, Z, 4, gs, (N, K))
    b = (torch.randn(N) * 0.1).to(dtype) if bias else None
    y = torch.nn.functional.linear(A, qw, b)
    ref = A.double() @ dequantize(q, S, Z, gs).t()
    if bias:
        ref = ref + b.double()
    _check_close(y, ref, dtype)


@pytest.mark.parametrize("n", BITS)
@pytest.mark.parametrize("M", [1, 33])
def test_op_every_bitwidth(n, M):
    A, q, S, Z = _random_operands(M, 512, 96, n, 128, torch.float32, seed=n)
    y = lowbit.linear_op(n)(A, pack_lowbit(q, n), 128, S, Z)
    _check_close(y, A.double() @ dequantize(q, S, Z, 128).t(), torch.float32)


def test_op_bad_inputs():
    A, q, S, Z = _random_operands(2, 64, 8, 4, 32, torch.float32)
    B = pack_lowbit(q, 4)
    op = lowbit.linear_op(4)
    with pytest.raises(ValueError, match="A must be 2-D"):
        op(A[None], B, 32, S, Z)
    with pytest.raises(ValueError, match="S must have A's dtype"):
        op(A, B, 32, S.half(), Z)
    with pytest.raises(ValueError, match="group_size must be one of"):
        op(A, B, 48, S, Z)
    with pytest.raises(ValueError, match=r"B must be \[N, K\*4/8\]"):
        op(A, B[:, :16], 32, S, Z)
    with pytest.raises(ValueError, match="out of range"):
        pack_lowbit(torch.full((1, 8), 16), 4)


def test_meta_symbolic_m():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        A = mode.from_tensor(torch.randn(5, 64), symbolic_context=None)
        y = lowbit.linear_op(4)(A, torch.zeros(12, 32, dtype=torch.uint8), 32, torch.ones(12, 2), torch.ones(12, 2))
        assert tuple(y.shape) == (5, 12)
    y = lowbit.linear_op(4)(
        torch.randn(9, 64, device="meta"),
        torch.zeros(12, 32, dtype=torch.uint8, device="meta"),
        32,
        torch.ones(12, 2, device="meta"),
        torch.ones(12, 2, device="meta"),
    )
    assert y.shape == (9, 12) and y.device.type == "meta"


# ---------------------------------------------------------------- API: config, quantize_, export --


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 128)
        self.b = torch.nn.Linear(128, 96, bias=False)
        self.c = torch.nn.Linear(96, 32)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def _quantized(seed=0, **cfg):
    from torchao.quantization import quantize_

    torch.manual_seed(seed)
    m = _Tiny().eval()
    quantize_(m, UIntxWeightOnlyConfig(**cfg))
    return m


def test_config_bitwidth_errors():
    for bad in (0, 9, 16, -1, True, 4.0, "4"):
        with pytest.raises(ValueError, match=f"unsupported bitwidth {bad!r}"):
            UIntxWeightOnlyConfig(bitwidth=bad)
    for bad in (16, 32.0, "32", False):
        with pytest.raises(ValueError, match=f"unsupported group_size {bad!r}"):
            UIntxWeightOnlyConfig(group_size=bad)
    config = UIntxWeightOnlyConfig(bitwidth=np.int64(4), group_size=np.int32(64))  # NumPy integers become ints
    assert (type(config.bitwidth), type(config.group_size)) == (int, int) and (config.bitwidth, config.group_size) == (
        4,
        64,
    )
    with pytest.raises(ValueError, match="unknown uintx_choose_qparams_algorithm 'gptq'"):
        UIntxWeightOnlyConfig(uintx_choose_qparams_algorithm="gptq")
    assert UIntxWeightOnlyConfig(uintx_choose_qparams_algorithm="minmax").uintx_choose_qparams_algorithm == "min_max"


@pytest.mark.parametrize("n", BITS)
def test_quantize_every_bitwidth(n):
    m = _quantized(bitwidth=n, group_size=32)
    assert isinstance(m.a.weight, UIntxWeight) and m.a.weight.bitwidth == n
    torch.manual_seed(0)
    ref = _Tiny().eval()
    x = torch.randn(4, 64)
    y, r = m(x), ref(x)
    assert torch.isfinite(y).all()
    rel = ((y - r).norm() / r.norm()).item()
    assert rel < {1: 3.0, 2: 0.8, 3: 0.4}.get(n, 0.2), rel


def test_quantize_keeps_bias_and_batched_input():
    m = _quantized()
    assert m.a.bias is not None and not isinstance(m.a.bias, UIntxWeight) and m.b.bias is None
    x = torch.randn(2, 3, 64)
    y = m(x)
    assert y.shape == (2, 3, 32)
    torch.testing.assert_close(y, m(x.reshape(6, 64)).reshape(2, 3, 32))
    # the bias is really added
    h = torch.nn.functional.linear(x, m.a.weight.dequantize(torch.float32), m.a.bias)
    torch.testing.assert_close(m.a(x), h, atol=1e-4, rtol=1e-4)


def test_quantize_shape_rule_error_names_layer_and_filter_fn():
    from torchao.quantization import quantize_

    m = torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.Linear(8, 6))  # K = 8 breaks K % 32
    with pytest.raises(ValueError, match=r"Linear\(in_features=8, out_features=6\).*K % group_size == 0"):
        quantize_(m, UIntxWeightOnlyConfig())
    m = torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.Linear(8, 6))
    skipped = {}
    cfg = UIntxWeightOnlyConfig()
    quantize_(m, cfg, filter_fn=lowbit_filter_fn(cfg, skipped))
    assert isinstance(m[0].weight, UIntxWeight) and not isinstance(m[1].weight, UIntxWeight)
    assert list(skipped) == ["1"] and "K % group_size == 0" in skipped["1"]


def test_dtype_mismatch_is_an_error():
    m = _quantized()
    with pytest.raises(ValueError, match="differs from the quantized weight's activation dtype"):
        m(torch.randn(2, 64, dtype=torch.float16))
    mb = _quantized().to(torch.bfloat16)
    assert mb.a.weight.dtype == torch.bfloat16 and mb.a.weight.scale.dtype == torch.bfloat16
    assert torch.isfinite(mb(torch.randn(2, 64, dtype=torch.bfloat16))).all()


def test_state_dict_roundtrip_torch_save():
    m = _quantized(seed=1)
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    fresh = _quantized(seed=2)  # different weights, same quantization
    x = torch.randn(5, 64)
    assert not torch.equal(fresh(x), m(x))
    fresh.load_state_dict(sd)
    assert torch.equal(fresh(x), m(x))


def test_state_dict_roundtrip_safetensors(tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    from safetensors import safe_open

    m = _quantized(seed=1, bitwidth=3, group_size=32)
    tensors, meta = lowbit.flatten_state_dict(m.state_dict())
    path = tmp_path / "m.safetensors"
    safetensors.save_file(tensors, str(path), metadata=meta)
    with safe_open(str(path), "pt") as f:
        loaded = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (a safe_open handle is not iterable)
        meta2 = f.metadata()
    fresh = _quantized(seed=2, bitwidth=3, group_size=32)
    fresh.load_state_dict(lowbit.unflatten_state_dict(loaded, meta2))
    x = torch.randn(5, 64)
    assert torch.equal(fresh(x), m(x))


def test_state_dict_mismatch_error():
    m4 = _quantized(bitwidth=4)
    m3 = _quantized(bitwidth=3)
    with pytest.raises(RuntimeError, match="UIntxWeight mismatch: destination has bitwidth=3"):
        m3.load_state_dict(m4.state_dict())


def test_export_one_op_per_linear_symbolic_m():
    from torch.export import Dim, export

    m = _quantized()
    ep = export(m, (torch.randn(4, 64),), dynamic_shapes=({0: Dim("M", min=1, max=2048)},))
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert sum("_linear_fp_act_4bit_weight" in t for t in targets) == 3
    assert sum(t == "aten.add.Tensor" for t in targets) == 2  # a and c have bias, b does not
    assert not any("linear.default" in t or "mm" in t for t in targets)
    for M in (1, 17, 625):
        x = torch.randn(M, 64)
        torch.testing.assert_close(ep.module()(x), m(x))


def test_unsupported_tensor_op_is_clear():
    qw = UIntxWeight.from_float(torch.randn(8, 64), 4, 32)
    with pytest.raises(NotImplementedError, match="UIntxWeight does not support"):
        qw + 1


# ---------------------------------------------------------------- devices ------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA kernel not run on CPU CI)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M", [1, 7, 625])
def test_cuda_op(M, dtype):
    A, q, S, Z = _random_operands(M, 1024, 640, 4, 32, dtype)
    y = lowbit.linear_op(4)(A.cuda(), pack_lowbit(q, 4).cuda(), 32, S.cuda(), Z.cuda())
    _check_close(y.cpu(), A.double() @ dequantize(q, S, Z, 32).t(), dtype)


@pytest.mark.skipif(
    not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()),
    reason="needs Apple MPS (not runnable on Linux CI)",
)
@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("M", [1, 7])
def test_mps_op(M, n):
    A, q, S, Z = _random_operands(M, 1024, 640, n, 32, torch.float32)
    y = lowbit.linear_op(n)(A.to("mps"), pack_lowbit(q, n).to("mps"), 32, S.to("mps"), Z.to("mps"))
    torch.testing.assert_close(y.cpu().double(), A.double() @ dequantize(q, S, Z, 32).t(), atol=2e-3, rtol=2e-3)
