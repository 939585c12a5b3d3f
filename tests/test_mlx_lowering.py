"""The MLX path on Linux, as far as it goes without a Mac: ExecuTorch's MLX partitioner cannot be imported here
(the Linux wheel lacks its generated files), so these tests check the graph this package hands it. With
``--backend mlx``, fpa4w's weights become torchao ``dequantize_affine`` + ``aten.linear`` (the pattern the MLX
backend fuses into MLX's affine quantized matmul) with the same dequantized values, and the export refuses a
host that is not macOS arm64 before loading anything."""

from __future__ import annotations

import pytest
import torch
from fpa_lowbit import UIntxWeight
from fpa_lowbit.torchao_intx import MLX_BITWIDTHS, to_intx_unpacked

# What ExecuTorch's MLX pattern (executorch.backends.mlx.patterns.QuantizedLinearHandler) accepts: int8 data, one
# non-1 block dimension with a group of at least 32, and qmin/qmax spanning 2, 4, 5, 6 or 8 bits.
MLX_GROUPS = (32, 64, 128, 256)


@pytest.mark.parametrize("bits", MLX_BITWIDTHS)
@pytest.mark.parametrize("group_size", [32, 128])
def test_intx_form_dequantizes_to_the_lowbit_weight(bits, group_size):
    torch.manual_seed(bits)
    w = torch.randn(48, 256) * 0.05
    u = UIntxWeight.from_float(w, bits, group_size)
    t = to_intx_unpacked(u)
    assert t.qdata.dtype == torch.int8 and t.block_size == (1, group_size)
    assert int(t.qdata.min()) >= -(1 << (bits - 1)) and int(t.qdata.max()) <= (1 << (bits - 1)) - 1
    ref = u.dequantize()
    assert torch.allclose(t.dequantize(), ref, atol=1e-6 * float(ref.abs().max()) + 1e-7, rtol=0)


def test_bit_widths_without_an_mlx_kernel_are_refused():
    with pytest.raises(ValueError, match="no MLX kernel"):
        to_intx_unpacked(UIntxWeight.from_float(torch.randn(8, 32), 3, 32))


def _linear_weights(ep) -> list[torch.fx.Node]:
    return [n.args[1] for n in ep.graph.nodes if n.op == "call_function" and n.target == torch.ops.aten.linear.default]


def test_fpa4w_reaches_the_mlx_partitioner_as_dequantize_affine_plus_linear(tiny_nemo):
    from fpa_lowbit.torchao_intx import convert_linears_to_intx_unpacked

    from parakeet_executorch.export.api import DEFAULT_MIN_AUDIO_SECONDS
    from parakeet_executorch.export.backends import mlx_programs
    from parakeet_executorch.export.load import load_nemo_model, read_metadata
    from parakeet_executorch.export.program import export_methods
    from parakeet_executorch.export.recipes import quantize_parts

    model = load_nemo_model(str(tiny_nemo))
    meta = read_metadata(model, DEFAULT_MIN_AUDIO_SECONDS, 4.0)
    reports = quantize_parts(model, "fpa4w", "fpa4w", 32, "hqq", False, "none")
    quantized = sum(r.quantized for r in reports.values())
    assert quantized > 0
    lowbit = export_methods(model, meta)
    converted = convert_linears_to_intx_unpacked(model)
    assert len(converted) == quantized
    programs = mlx_programs(export_methods(model, meta))
    fused = 0
    for name in ("encoder", "decoder_step", "joint"):
        for weight in _linear_weights(programs[name]):
            assert weight.op == "call_function" and weight.target == torch.ops.torchao.dequantize_affine.default, (
                f"{name}: a linear whose weight is {weight.target}, not dequantize_affine: MLX would run it in float"
            )
            qdata, block, _scale, _zero, dtype, qmin, qmax = weight.args[:7]
            assert qdata.meta["val"].dtype == torch.int8 and dtype == torch.int8
            assert list(block)[0] == 1 and list(block)[1] in MLX_GROUPS and (qmin, qmax) == (-8, 7)
            fused += 1
        # Same numbers as the lowbit program (the lowbit op's reference kernel) on the export's own example.
        args = lowbit[name].example_inputs[0]
        for a, b in zip(lowbit[name].module()(*args), programs[name].module()(*args)):
            if a.is_floating_point():
                assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), name
            else:
                assert torch.equal(a, b), name
    assert fused == quantized


def test_mlx_export_needs_a_mac():
    import platform

    from parakeet_executorch.export.backends import BackendError, check_host

    if platform.system() == "Darwin" and platform.machine() == "arm64":
        check_host("mlx", "fp32")  # the host it needs: no refusal
        return
    with pytest.raises(BackendError, match="macOS arm64"):
        check_host("mlx", "fp32")
