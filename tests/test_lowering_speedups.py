"""Issue 8: the lowering shortcuts (export/lowering_speedups.py) skip work without changing the program.

Each recipe is exported to XNNPACK twice, with ``parakeet-export``'s shortcuts and with executorch's lowering as
shipped, and the two .pte files must be byte-identical.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from conftest import export_tiny


@pytest.mark.parametrize("recipe", ["none", "8da4w"])
def test_shortcuts_give_a_byte_identical_pte(recipe, tiny_nemo, export_root, tmp_path, monkeypatch):
    from parakeet_executorch.export import lowering_speedups
    from parakeet_executorch.export.cli import main as export_main

    extra = () if recipe == "none" else ("--quantize", recipe)
    fast = export_tiny(tiny_nemo, export_root, "xnnpack", *extra)  # with the shortcuts, as parakeet-export runs

    monkeypatch.setattr(lowering_speedups, "faster_lowering", nullcontext)
    assert export_main(["--model", str(tiny_nemo), "--backend", "xnnpack", "--output-dir", str(tmp_path),
                        *extra]) == 0
    assert (fast / "model.pte").read_bytes() == (tmp_path / "model.pte").read_bytes()


def test_shortcuts_are_taken_and_undone(nemo_model):
    """Lower the tiny encoder under faster_lowering: replays and decompositions are skipped, and executorch's
    classes are restored afterwards."""
    from executorch.backends.xnnpack.xnnpack_preprocess import XNNPACKPassManager
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.exir.pass_base import ExportPass
    from torch.export import ExportedProgram

    from parakeet_executorch.export.backends import partitioners
    from parakeet_executorch.export.load import read_metadata
    from parakeet_executorch.export.lowering_speedups import (faster_lowering, skip_empty_decompositions,
                                                              skip_unchanged_retraces)
    from parakeet_executorch.export.program import export_methods

    saved = (ExportPass.call, XNNPACKPassManager.transform, ExportedProgram.run_decompositions)
    encoder = export_methods(nemo_model, read_metadata(nemo_model, 0.1, 20.0), xnnpack_encoder=True)["encoder"]
    parts, programs = partitioners("xnnpack", {"encoder": encoder})
    with faster_lowering():
        to_edge_transform_and_lower(programs, partitioner=parts,
                                    compile_config=EdgeCompileConfig(_check_ir_validity=False))
    assert (ExportPass.call, XNNPACKPassManager.transform, ExportedProgram.run_decompositions) == saved
    assert skip_unchanged_retraces.stats["skipped"] > 0, skip_unchanged_retraces.stats
    assert skip_unchanged_retraces.stats["replayed"] > 0, skip_unchanged_retraces.stats  # some passes do edit
    assert skip_empty_decompositions.stats["skipped"] > 0, skip_empty_decompositions.stats
    assert skip_empty_decompositions.stats["run"] >= 2, skip_empty_decompositions.stats  # functionalize + decompose


def test_passes_that_work_during_the_replay_are_never_skipped():
    from executorch.backends.xnnpack._passes.convert_to_sdpa import ConvertToSDPAPass
    from executorch.exir.pass_base import ExportPass
    from executorch.exir.passes.const_prop_pass import ConstPropPass
    from executorch.exir.passes.memory_format_ops_pass import DimOrderOpsRevertPass

    from parakeet_executorch.export.lowering_speedups import _replay_transforms

    assert _replay_transforms(DimOrderOpsRevertPass, ExportPass)
    assert _replay_transforms(ConstPropPass, ExportPass)
    assert not _replay_transforms(ConvertToSDPAPass, ExportPass)


def test_fingerprint_sees_edits_and_swapped_constants():
    from parakeet_executorch.export.lowering_speedups import graph_fingerprint

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.ones(3))

        def forward(self, x):
            return x + self.w

    gm = torch.fx.symbolic_trace(Net())
    before = graph_fingerprint(gm)
    assert graph_fingerprint(gm) == before
    gm.w = torch.zeros(3)  # same graph, new constant
    assert graph_fingerprint(gm) != before
    swapped = graph_fingerprint(gm)
    for node in gm.graph.nodes:
        if node.op == "call_function":
            node.target = torch.sub
    assert graph_fingerprint(gm) != swapped


def _die(index):
    import os

    os._exit(3)  # as a worker killed for memory would vanish


def test_a_dead_preprocess_worker_fails_the_export(monkeypatch):
    """A worker that dies must fail the lowering at once (BrokenProcessPool), not leave it waiting."""
    import sys
    from concurrent.futures.process import BrokenProcessPool

    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    from parakeet_executorch.export import lowering_speedups

    if not sys.platform.startswith("linux"):
        pytest.skip("parallel preprocess is Linux-only; elsewhere partitions run one after the other")
    monkeypatch.setattr(lowering_speedups, "_preprocess_job", _die)
    with lowering_speedups.parallel_preprocess(workers=2):
        with pytest.raises(BrokenProcessPool):
            XnnpackBackend.preprocess_multimethod({"encoder": [None, None]}, {"encoder": [[], []]})
