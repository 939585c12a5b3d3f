"""fpa_lowbit's compiled CPU kernels (lowbit/csrc through fpa_lowbit._native): every instruction-set level this CPU
can run, forced one at a time, against the dequantize-then-matmul reference in float64; shapes at the edges of
every block size; thread counts; the eager op's routing; and the package's independence."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import fpa_lowbit
import pytest
import torch
from fpa_lowbit import _native, choose_qparams, dequantize_packed, linear_op, ops, pack_lowbit

REPO = Path(__file__).resolve().parents[1]
LEVELS = [isa for isa in ("portable", "avx2", "avx512", "neon") if _native.isa_available(isa)]

pytestmark = pytest.mark.skipif(not _native.available(), reason=f"{_native.unavailable_reason()}")


def _case(m: int, k: int, n: int, bits: int, group: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g)
    q, s, z = choose_qparams(w, bits, group, "min_max")
    b = pack_lowbit(q, bits)
    a = torch.randn(m, k, generator=g)
    ref = a.double() @ dequantize_packed(b, s, z, bits, group, torch.float32).double().t()
    return a, b, s, z, ref


def _close(y: torch.Tensor, ref: torch.Tensor, k: int) -> None:
    # fp32 accumulation over K terms in a different order than the float64 reference.
    tol = 1e-6 * k**0.5 * ref.abs().max().item() + 1e-6
    err = (y.double() - ref).abs().max().item()
    assert err <= tol, f"max error {err:.3g} > {tol:.3g}"


def test_this_cpu_has_a_vector_level():
    assert "portable" in LEVELS
    assert _native.best_isa() in LEVELS
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        assert "avx2" in LEVELS  # PyTorch sees AVX2: so must the dispatcher


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("bits", range(1, 9))
def test_every_level_and_bitwidth_equals_reference(isa, bits):
    for m, k, n, group in ((1, 256, 40, 32), (3, 512, 37, 64), (7, 288, 29, 32), (13, 1024, 70, 128)):
        a, b, s, z, ref = _case(m, k, n, bits, group, seed=bits)
        _close(_native.linear(a, b, group, s, z, bits, isa=isa), ref, k)


# M at the edges of the micro-kernel's rows (6, 8, 12: one packed micro-panel of A) and of the GEMV (4); N at the
# edges of the weight tile (8, 16, 32 rows) and of a task (N / 8 rounded up to the tile, at most 256 rows: 257 and
# 2100 end in a short task); K past one 256-wide block and not a multiple of it.
EDGE_M = (1, 2, 4, 5, 6, 7, 11, 12, 13, 95, 96, 97, 193)
EDGE_N = (1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 130, 257, 2100)
EDGE_K = (32, 256, 288, 544)


@pytest.mark.parametrize("isa", LEVELS)
def test_rows_do_not_depend_on_the_rows_around_them(isa):
    """A row's result has the same bits whether it ends M in a short last micro-panel of A or sits in a full one
    (the GEMM computes only the valid rows of the last panel: 1 to 11 of 12 at AVX-512, of 6 at AVX2)."""
    a, b, s, z, _ = _case(73, 544, 70, 4, 32, seed=7)
    whole = _native.linear(a, b, 32, s, z, 4, isa=isa)
    for m in (5, 13, 25, 30, 49, 61):  # 25 = 2 x 12 + 1 = 4 x 6 + 1, ...
        assert torch.equal(_native.linear(a[:m], b, 32, s, z, 4, isa=isa), whole[:m]), m


@pytest.mark.parametrize("isa", LEVELS)
def test_block_edges(isa):
    for i, m in enumerate(EDGE_M):
        n = EDGE_N[i % len(EDGE_N)]
        k = EDGE_K[i % len(EDGE_K)]
        a, b, s, z, ref = _case(m, k, n, 4, 32, seed=i)
        _close(_native.linear(a, b, 32, s, z, 4, isa=isa), ref, k)
    for i, n in enumerate(EDGE_N):  # every N against the GEMV (M = 1) and the GEMM (M = 7) paths
        for m in (1, 7):
            a, b, s, z, ref = _case(m, 288, n, 4, 32, seed=100 + i)
            _close(_native.linear(a, b, 32, s, z, 4, isa=isa), ref, 288)


@pytest.mark.parametrize("isa", LEVELS)
def test_8bit_gemv_edges(isa):
    # The 8-bit GEMV (M <= 4): every N past its 4-row blocks and 64-row tasks, K of one group and of several,
    # group counts below and past one vector of zero points (the tail of finish_rows).
    for i, n in enumerate(EDGE_N):
        for m in (1, 4):
            k = (32, 256, 544, 1312)[i % 4]
            a, b, s, z, ref = _case(m, k, n, 8, 32, seed=200 + i)
            _close(_native.linear(a, b, 32, s, z, 8, isa=isa), ref, k)


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("bits", (4, 8))
@pytest.mark.parametrize("group", (32, 64, 128, 256))
def test_every_group_size_on_the_gemv_path(isa, bits, group):
    a, b, s, z, ref = _case(2, 1024, 96, bits, group, seed=group)
    _close(_native.linear(a, b, group, s, z, bits, isa=isa), ref, 1024)


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("m, bits", [(1, 4), (1, 8), (200, 4), (200, 8)])
def test_one_and_two_threads_give_the_same_bits(isa, m, bits):
    # Large enough to be split across threads (the kernels run small products on one thread).
    a, b, s, z, _ = _case(m, 1024, 512, bits, 32)
    y1 = _native.linear(a, b, 32, s, z, bits, isa=isa, num_threads=1)
    y2 = _native.linear(a, b, 32, s, z, bits, isa=isa, num_threads=2)
    assert torch.equal(y1, y2)


@pytest.mark.parametrize("isa", LEVELS)
def test_bias_in_the_kernel_equals_adding_it_after(isa):
    # GEMV over words (K % 128 == 0) and over bytes, GEMM with one and several K blocks, partial tiles.
    for m, k, n in ((1, 256, 40), (1, 288, 33), (3, 1024, 17), (13, 1024, 70), (30, 544, 65)):
        a, b, s, z, _ = _case(m, k, n, 4, 32, seed=m)
        bias = torch.randn(n)
        y = _native.linear(a, b, 32, s, z, 4, isa=isa, bias=bias)
        assert torch.equal(y, _native.linear(a, b, 32, s, z, 4, isa=isa) + bias)
    with pytest.raises(RuntimeError, match=r"bias must be \[N\] = \[65\] on the CPU, got \(66,\) on cpu"):
        _native.linear(a, b, 32, s, z, 4, bias=torch.zeros(n + 1))
    with pytest.raises(RuntimeError, match=r"on the CPU, got \(65,\) on meta"):
        _native.linear(a, b, 32, s, z, 4, bias=torch.zeros(n, device="meta"))


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
def test_half_precision_operands(dtype):
    a, b, s, z, _ = _case(5, 256, 48, 4, 32)
    a, s, z = a.to(dtype), s.to(dtype), z.to(dtype)
    ref = a.double() @ dequantize_packed(b, s, z, 4, 32, torch.float32).double().t()
    y = _native.linear(a, b, 32, s, z, 4)
    assert y.dtype == dtype
    assert (y.double() - ref).abs().max().item() <= 1e-2 * ref.abs().max().item()


def test_out_argument_and_empty_shapes():
    a, b, s, z, ref = _case(3, 256, 24, 4, 32)
    out = torch.full((3, 24), float("nan"))
    assert _native.linear(a, b, 32, s, z, 4, out=out) is out
    _close(out, ref, 256)
    a0 = torch.empty(0, 256)
    assert _native.linear(a0, b, 32, s, z, 4).shape == (0, 24)


def test_unavailable_level_and_bad_arguments_raise():
    a, b, s, z, _ = _case(1, 256, 8, 4, 32)
    missing = [isa for isa in ("avx2", "avx512", "neon") if isa not in LEVELS]
    for isa in missing:
        with pytest.raises(RuntimeError, match="not available"):
            _native.linear(a, b, 32, s, z, 4, isa=isa)
    with pytest.raises(RuntimeError, match="unknown instruction-set level"):
        _native.linear(a, b, 32, s, z, 4, isa="sse9")
    with pytest.raises(RuntimeError, match="group_size"):
        _native.linear(a, b, 48, s, z, 4)


def _product_in_forked_child(args) -> torch.Tensor:
    a, b, s, z = args
    return _native.linear(a, b, 32, s, z, 4, num_threads=2)


def test_eager_threads_come_from_torchs_openmp_pool_with_the_same_bits():
    # Where torch's intra-op pool is OpenMP the kernels' tasks run on its threads (a second pool beside it lost to
    # its spinning workers); the own pool stays for other builds and for a child of fork(), with the same bits.
    import multiprocessing

    lib = _native._load()
    if "parallel backend: OpenMP" in torch.__config__.parallel_info():
        assert _native.eager_thread_pool() == "openmp"
    cases = [_case(1, 1024, 300, 4, 32), _case(1, 512, 200, 8, 64), _case(37, 512, 260, 4, 32)]
    with_omp = [
        _native.linear(a, b, g, s, z, bits, num_threads=2)
        for (a, b, s, z, _), bits, g in zip(cases, (4, 8, 4), (32, 64, 32))
    ]
    lib.fpa_lowbit_set_openmp(None)
    try:
        assert _native.eager_thread_pool() == "own"
        with_own = [
            _native.linear(a, b, g, s, z, bits, num_threads=2)
            for (a, b, s, z, _), bits, g in zip(cases, (4, 8, 4), (32, 64, 32))
        ]
    finally:
        _native._share_torch_openmp(lib)
    for y_omp, y_own, (a, *_, ref) in zip(with_omp, with_own, cases):
        assert torch.equal(y_omp, y_own)
        _close(y_omp, ref, a.shape[1])
    a, b, s, z, _ = cases[0]
    with multiprocessing.get_context("fork").Pool(1) as pool:
        y_child = pool.apply_async(_product_in_forked_child, ((a, b, s, z),)).get(timeout=60)
    assert torch.equal(y_child, with_omp[0])


def test_isa_environment_variable_caps_the_choice(monkeypatch):
    monkeypatch.setenv("FPA_LOWBIT_ISA", "portable")
    assert _native.best_isa() == "portable"
    monkeypatch.delenv("FPA_LOWBIT_ISA")
    assert _native.best_isa() == LEVELS[-1]  # the widest level this CPU runs


def test_eager_op_runs_the_native_kernel(monkeypatch):
    assert fpa_lowbit.cpu_backend() == "native"
    a, b, s, z, _ = _case(3, 512, 40, 4, 32)
    y = linear_op(4)(a, b, 32, s, z)
    assert torch.equal(y, _native.linear(a, b, 32, s, z, 4))
    monkeypatch.setenv("FPA_LOWBIT_CPU_BACKEND", "torch")
    assert fpa_lowbit.cpu_backend() == "torch"
    assert torch.equal(linear_op(4)(a, b, 32, s, z), ops.linear_reference_kernel(a, b, 32, s, z, 4))


def _quantized_linear(k: int = 256, n: int = 48) -> torch.nn.Linear:
    from torchao.quantization import quantize_

    torch.manual_seed(0)
    m = torch.nn.Linear(k, n, bias=True)
    quantize_(m, fpa_lowbit.UIntxWeightOnlyConfig(bitwidth=4, group_size=32))
    return m


def _op_spy(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = ops.linear_op

    def spy(bitwidth):
        calls.append(bitwidth)
        return real(bitwidth)

    monkeypatch.setattr(ops, "linear_op", spy)
    return calls


@pytest.mark.parametrize("m", (1, 3))
def test_plain_eager_linear_calls_the_kernel_directly_with_the_ops_result(monkeypatch, m):
    # In plain CPU eager a quantized layer skips the op's Python round trip; the result is the op's, bias included.
    lin = _quantized_linear()
    w = lin.weight
    x = torch.randn(2, m, 256)
    expected = linear_op(4)(x.reshape(-1, 256), w.packed, 32, w.scale, w.zero) + lin.bias
    calls = _op_spy(monkeypatch)
    with torch.inference_mode():
        y = lin(x)
    assert calls == []
    assert torch.equal(y, expected.reshape(2, m, 48))


def test_the_weights_call_plan_follows_copies_loads_and_in_place_changes(monkeypatch, tmp_path):
    # The first eager call prepares the weight's operands (raw pointers); copies, saved-and-loaded weights, weights
    # given other values or other storage in place must still compute their own product, never another's.
    import copy

    lin = _quantized_linear()
    x = torch.randn(1, 256)
    w = lin.weight

    def expected(layer):
        lw = layer.weight
        return linear_op(4)(x, lw.packed, 32, lw.scale, lw.zero) + layer.bias

    with torch.inference_mode():
        y0 = lin(x)
    assert "_cpu_plan" in w.__dict__  # the plan exists from here on
    assert torch.equal(y0, expected(lin))

    torch.save(lin.state_dict(), tmp_path / "sd.pt")  # the plan is not pickled: weights_only loading still works
    other = _quantized_linear()
    with torch.no_grad():
        other.weight.scale.mul_(2.0)
    other.load_state_dict(torch.load(tmp_path / "sd.pt", weights_only=True))
    twin = copy.deepcopy(lin)
    with torch.inference_mode():
        assert torch.equal(other(x), y0)
        assert torch.equal(twin(x), y0)

    calls = _op_spy(monkeypatch)
    with torch.no_grad():
        w.scale.mul_(0.5)  # new values, same storage: the plan reads them
        assert torch.equal(lin(x), expected(lin))
        w.packed.set_(torch.flip(w.packed, dims=[0]).contiguous())  # new storage: the plan is made again
        y1 = lin(x)
    assert torch.equal(y1, expected(lin))
    assert not torch.equal(y1, y0)
    assert calls == []  # all of it on the direct path
    monkeypatch.setenv("FPA_LOWBIT_CPU_BACKEND", "torch")  # asked for after the plan exists: the op's path
    with torch.no_grad():
        lin(x)
    assert calls == [4]


def test_tracing_modes_and_autograd_still_see_the_op(monkeypatch):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    lin = _quantized_linear()
    x = torch.randn(1, 256)
    with torch.no_grad(), Record() as rec:
        lin(x)
    assert any("_linear_fp_act_4bit_weight" in n for n in rec.names), rec.names
    calls = _op_spy(monkeypatch)
    lin(x.requires_grad_())  # an autograd graph is being recorded: the op's path
    assert calls == [4]
    monkeypatch.setenv("FPA_LOWBIT_CPU_BACKEND", "torch")  # the PyTorch-level kernel was asked for: the op's path
    lin(x.detach())
    assert calls == [4, 4]


def test_missing_library_warns_and_says_how_to_fix(monkeypatch):
    monkeypatch.setattr(_native, "_lib", None)
    monkeypatch.setattr(_native, "_error", "libfpa_lowbit_cpu.so is missing")
    monkeypatch.setattr(ops, "_CPU_FALLBACK_WARNED", False)
    a, b, s, z, ref = _case(2, 256, 16, 4, 32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = linear_op(4)(a, b, 32, s, z)
    assert fpa_lowbit.cpu_backend() == "torch"
    _close(y, ref, 256)
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("is missing" in m and "pip install" in m for m in msgs), msgs


def test_the_library_does_not_link_libtorch():
    # One binary for every torch version: the eager kernels are reached through a C ABI, never libtorch's.
    data = _native.library_path().read_bytes()
    assert b"libtorch" not in data and b"libc10" not in data


def test_fpa_lowbit_imports_nothing_of_parakeet_executorch():
    for path in (REPO / "lowbit" / "src" / "fpa_lowbit").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "parakeet_executorch" for n in names), (path, names)
