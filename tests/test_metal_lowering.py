"""The Metal path on Linux, as far as it goes without a Mac: for every recipe that targets metal, the graph handed
to ExecuTorch's Metal partitioner is taken whole, and MetalBackend's AOTInductor options (the step before the
Metal compile) can be built. The compile itself needs macOS arm64 and is not run here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from parakeet_executorch.export.recipe_registry import recipes_on

PROBE = r"""
import sys
import torch
from torch.export import export
from executorch.backends.apple.metal.metal_backend import MetalBackend

recipe = sys.argv[1]
if recipe == "stock":
    # Without this package: ExecuTorch 1.5.1's Metal backend builds its options by importing torchao's MPS shims,
    # which fail where torchao's MPS library is absent (every wheel).
    try:
        MetalBackend.get_aoti_compile_options([])
    except RuntimeError as e:
        print("STOCK FAILS:", e)
    sys.exit(0)

from parakeet_executorch.export.backends import partitioners
from parakeet_executorch.export.recipes import quantize_part

torch.manual_seed(0)
model = torch.nn.Module()
model.encoder = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)).eval()
report = quantize_part(model, ["encoder"], recipe, 32, "hqq", True, True)
ep = export(model.encoder, (torch.randn(4, 128),))
parts, rewritten = partitioners("metal", {"encoder": ep})
options = MetalBackend.get_aoti_compile_options([])
shims = {str(k) for k in options["aot_inductor.custom_ops_to_c_shims"]}
result = parts["encoder"][0].partition(rewritten["encoder"])
graph = result.tagged_exported_program.graph
calls = [n for n in graph.nodes if n.op == "call_function"]
untagged = [str(n.target) for n in calls if "delegation_tag" not in n.meta]
print("QUANTIZED", report.quantized)
print("SHIM", "torchao._linear_fp_act_4bit_weight.default" in shims)
print("UNTAGGED", untagged)
print("TAGS", len(result.partition_tags))
"""


def _probe(arg: str) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, arg], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_stock_metal_backend_needs_the_torchao_mps_ops():
    """The trap this package closes: a fresh interpreter without it cannot build the Metal compile options."""
    assert "STOCK FAILS" in _probe("stock")


@pytest.mark.parametrize("recipe", [r.name for r in recipes_on("metal")])
def test_every_metal_recipe_partitions_whole_and_gets_compile_options(recipe):
    out = _probe(recipe)
    assert f"QUANTIZED {0 if recipe == 'none' else 2}" in out, out
    assert "SHIM True" in out, out
    assert "UNTAGGED []" in out, out
    assert "TAGS 1" in out, out


def test_metal_lowers_with_the_settings_of_executorchs_parakeet_metal_export():
    """Metal takes the two settings of ExecuTorch's own Parakeet export (read from the installed example, so a
    new release that drops them shows here); the CPU backends keep ExecuTorch's defaults."""
    from pathlib import Path

    import executorch
    from executorch.exir import EdgeCompileConfig
    from executorch.exir.passes import MemoryPlanningPass

    from parakeet_executorch.export.backends import lowering_configs

    upstream = Path(list(executorch.__path__)[0]) / "examples/models/parakeet/export_parakeet_tdt.py"
    text = upstream.read_text()
    assert "_skip_dim_order=True" in text and "MemoryPlanningPass(alloc_graph_input=False)" in text
    edge, backend = lowering_configs("metal")
    assert edge._skip_dim_order is True and backend.memory_planning_pass.alloc_graph_input is False
    assert backend.extract_delegate_segments
    default_planning = MemoryPlanningPass()
    for name in ("portable", "xnnpack", "cuda"):
        edge, backend = lowering_configs(name)
        assert edge._skip_dim_order == EdgeCompileConfig()._skip_dim_order
        assert backend.memory_planning_pass.alloc_graph_input == default_planning.alloc_graph_input
