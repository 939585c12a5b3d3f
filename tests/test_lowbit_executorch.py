"""fpa_lowbit on ExecuTorch: quantize_ -> torch.export -> .pte -> run == eager.

The .pte calls torchao::_linear_fp_act_{n}bit_weight.out; on CPU it runs through fpa_lowbit's
ExecuTorch kernel library (prebuilt in its wheel against the executorch wheel's SDK, loaded into the
Python runtime with executorch_kernels.load()).
"""

from __future__ import annotations

import os

import pytest
import torch
from fpa_lowbit import UIntxWeight, UIntxWeightOnlyConfig
from fpa_lowbit import executorch_kernels as ek

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kernels():
    return ek.load()  # the installed wheel's library: nothing is built


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 256)
        self.b = torch.nn.Linear(256, 128, bias=False)
        self.c = torch.nn.Linear(128, 6)  # N = 6: exercises the kernel's row-tile remainder

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def _export_pte(bitwidth, group_size, xnnpack, tmp_path):
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torch.export import Dim, export
    from torchao.quantization import quantize_

    torch.manual_seed(0)
    m = _Model().eval()
    quantize_(m, UIntxWeightOnlyConfig(bitwidth=bitwidth, group_size=group_size))
    ep = export(m, (torch.randn(5, 64),), dynamic_shapes=({0: Dim("M", min=1, max=512)},))
    partitioner = []
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = [XnnpackPartitioner()]
    edge = to_edge_transform_and_lower(
        ep, partitioner=partitioner, compile_config=EdgeCompileConfig(_check_ir_validity=False)
    )
    et = edge.to_executorch()
    path = tmp_path / f"lowbit_{bitwidth}_{'xnnpack' if xnnpack else 'portable'}.pte"
    path.write_bytes(et.buffer)
    return m, et, path


def _run(path, x):
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(str(path)).load_method("forward")
    return method.execute([x])[0]


@pytest.mark.parametrize("xnnpack", [False, True], ids=["portable", "xnnpack"])
def test_pte_fpa4w_runs_and_equals_eager(kernels, xnnpack, tmp_path):
    m, et, path = _export_pte(4, 32, xnnpack, tmp_path)
    for M in (1, 5, 37):
        x = torch.randn(M, 64)
        y = _run(path, x)
        assert y.shape == (M, 6)
        torch.testing.assert_close(y, m(x), atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="lists the process's threads from Linux's /proc")
def test_pte_runs_on_executorch_thread_pool(kernels, tmp_path):
    """The kernels run on ExecuTorch's own thread pool (the one XNNPACK's delegate uses) and start no thread of
    their own; the pool's size changes nothing in the result's bits.

    In a process of its own: resizing the pool (``_unsafe_reset_threadpool``) replaces it, and an XNNPACK program
    loaded earlier in this process keeps the old one (a crash at its next call)."""
    import subprocess
    import sys

    m, _, path = _export_pte(4, 32, False, tmp_path)  # portable: the only threads it could start are the kernels'
    x = torch.randn(512, 64)  # 512 x 64 x 256 multiply-adds: above the kernels' one-thread cut-off (0.5 M)
    torch.save(x, tmp_path / "x.pt")
    script = f"""
import os, torch
from executorch.extension.pybindings import portable_lib
from executorch.runtime import Runtime
from fpa_lowbit import executorch_kernels
executorch_kernels.load()
x = torch.load({str(tmp_path / "x.pt")!r})
program = Runtime.get().load_program({str(path)!r})
portable_lib._unsafe_reset_threadpool(2)  # before the first call: no method holds the pool yet
threads = set(os.listdir("/proc/self/task"))
y2 = program.load_method("forward").execute([x])[0]
assert set(os.listdir("/proc/self/task")) <= threads, "the kernels started threads of their own"
portable_lib._unsafe_reset_threadpool(1)
y1 = Runtime.get().load_program({str(path)!r}).load_method("forward").execute([x])[0]
torch.save((y1, y2), {str(tmp_path / "y.pt")!r})
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    y1, y2 = torch.load(tmp_path / "y.pt")
    assert torch.equal(y1, y2)
    torch.testing.assert_close(y2, m(x), atol=1e-4, rtol=1e-4)


def test_pte_keeps_weights_4bit(kernels, tmp_path):
    m, et, path = _export_pte(4, 32, False, tmp_path)
    gm = et.exported_program().graph_module
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and "_linear_fp_act_4bit_weight" in str(n.target)]
    assert len(calls) == 3 and all(str(n.target).endswith(".out") for n in calls)
    consts = {**et.exported_program().state_dict, **et.exported_program().constants}
    packed = [t for t in consts.values() if isinstance(t, torch.Tensor) and t.dtype == torch.uint8]
    assert sorted(tuple(t.shape) for t in packed) == [(6, 64), (128, 128), (256, 32)]
    float_2d = {tuple(t.shape) for t in consts.values() if isinstance(t, torch.Tensor) and t.is_floating_point()}
    assert not float_2d & {(256, 64), (128, 256), (6, 128)}  # no float copy of any weight
    fp32_weight_bytes = 4 * (64 * 256 + 256 * 128 + 128 * 6)
    assert path.stat().st_size < fp32_weight_bytes / 2


@pytest.mark.parametrize("bitwidth", [3, 8])
def test_pte_other_bitwidths(kernels, bitwidth, tmp_path):
    m, et, path = _export_pte(bitwidth, 64, False, tmp_path)
    x = torch.randn(3, 64)
    torch.testing.assert_close(_run(path, x), m(x), atol=1e-4, rtol=1e-4)


def test_kernels_registered(kernels):
    assert [f"torchao::_linear_fp_act_{n}bit_weight.out" for n in range(1, 9)] == ek.registered_ops()


def test_weight_is_subclass_until_export():
    torch.manual_seed(0)
    from torchao.quantization import quantize_

    m = _Model()
    quantize_(m, UIntxWeightOnlyConfig())
    assert all(isinstance(lin.weight, UIntxWeight) for lin in (m.a, m.b, m.c))


def test_every_bitwidth_registers_with_the_python_runtime(kernels):
    """Loading the wheel's library registers the out variant of every bit width with ExecuTorch's runtime."""
    assert {f"torchao::_linear_fp_act_{n}bit_weight.out" for n in range(1, 9)} <= set(ek.registered_ops())
    assert ek.built_for() is not None
