"""The lowering shortcuts (export/xnnpack/shortcuts/) skip work without changing the program.

Each recipe is exported to XNNPACK twice, with ``parakeet-export``'s shortcuts and with ``--no-lowering-shortcuts``
(executorch's lowering as shipped), and the two .pte files must be byte-identical.
"""

from __future__ import annotations

import pytest
import torch

from conftest import export_tiny

_SHORTCUT_CONTEXTS = (
    "decompose_in_one_retrace",
    "skip_inert_passes",
    "skip_unchanged_retraces",
    "skip_empty_decompositions",
    "fast_affine_metadata",
    "parallel_preprocess",
    "defer_partition_recompiles",
    "fast_merge_checks",
)


def _forbid_shortcuts(monkeypatch):
    """Make entering any shortcut fail the test: what runs afterwards is executorch's stock lowering."""
    from parakeet_executorch.export.xnnpack import shortcuts

    def forbidden(*args, **kwargs):
        raise AssertionError("a lowering shortcut was entered")

    for name in _SHORTCUT_CONTEXTS:
        monkeypatch.setattr(shortcuts, name, forbidden)


# The default run keeps fpa4w, the product's recipe; the other recipes (each export a minute or more) run
# with -m extended.
@pytest.mark.parametrize(
    "recipe", [pytest.param(r, marks=pytest.mark.extended) for r in ("none", "8da4w", "8da8w")] + ["fpa4w"]
)
def test_shortcuts_give_a_byte_identical_pte(recipe, tiny_nemo, export_root, tmp_path, monkeypatch):
    """``parakeet-export`` with its shortcuts and with ``--no-lowering-shortcuts`` (stock lowering): same bytes."""
    from parakeet_executorch.export.cli import main as export_main

    extra = () if recipe == "none" else ("--quantize", recipe)
    fast = export_tiny(tiny_nemo, export_root, "xnnpack", *extra)  # with the shortcuts, as parakeet-export runs

    _forbid_shortcuts(monkeypatch)
    assert (
        export_main(
            [
                "--model",
                str(tiny_nemo),
                "--backend",
                "xnnpack",
                "--output-dir",
                str(tmp_path),
                "--no-lowering-shortcuts",
                *extra,
            ]
        )
        == 0
    )
    assert (fast / "model.pte").read_bytes() == (tmp_path / "model.pte").read_bytes()


def test_another_executorch_version_turns_the_shortcuts_off(monkeypatch, capsys):
    """On an executorch other than the one they mirror, the shortcuts patch nothing and say so in one line."""
    from executorch.exir.pass_base import ExportPass
    from torch.export import ExportedProgram

    from parakeet_executorch.export.xnnpack import shortcuts

    assert shortcuts._executorch_version() == shortcuts.EXPECTED_EXECUTORCH  # the pinned stack
    monkeypatch.setattr(shortcuts, "_executorch_version", lambda: "9.9.9")
    monkeypatch.setattr(shortcuts, "_announced", set())
    _forbid_shortcuts(monkeypatch)
    saved = (ExportPass.call, ExportedProgram.run_decompositions)
    for _ in range(2):  # one export enters the contexts three times: still one line
        with shortcuts.faster_tracing() as on:
            assert on is False
        with shortcuts.faster_lowering({}, {}) as on:
            assert on is False
            assert (ExportPass.call, ExportedProgram.run_decompositions) == saved
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert "9.9.9" in err[0] and shortcuts.EXPECTED_EXECUTORCH in err[0] and "stock" in err[0]
    with shortcuts.faster_lowering(shortcuts=False) as on:  # --no-lowering-shortcuts: off, and silent
        assert on is False
    monkeypatch.setattr(shortcuts, "_executorch_version", lambda: shortcuts.EXPECTED_EXECUTORCH)
    assert shortcuts.shortcuts_apply()
    assert capsys.readouterr().err == ""


def test_shortcuts_are_taken_and_undone(nemo_model, monkeypatch):
    """Lower the tiny encoder under faster_lowering: replays and decompositions are skipped, the encoder is
    retraced for decomposition once, and executorch's classes are restored afterwards."""
    from executorch.backends.xnnpack.xnnpack_preprocess import XNNPACKPassManager
    from executorch.exir import EdgeCompileConfig, lowered_backend_module, to_edge_transform_and_lower
    from executorch.exir.backend import backend_api
    from executorch.exir.pass_base import ExportPass
    from executorch.exir.passes import SymToTensorPass
    from torch.export import ExportedProgram

    from parakeet_executorch.export.backends import partitioners
    from parakeet_executorch.export.load import read_metadata
    from parakeet_executorch.export.program import export_methods
    from parakeet_executorch.export.xnnpack.shortcuts import (
        decompose_in_one_retrace,
        defer_partition_recompiles,
        faster_lowering,
        skip_empty_decompositions,
        skip_inert_passes,
        skip_unchanged_retraces,
    )

    saved = (
        ExportPass.call,
        XNNPACKPassManager.transform,
        ExportedProgram.run_decompositions,
        SymToTensorPass.call,
        backend_api._create_partitions_in_graph_module,
        lowered_backend_module.legalize_graph,
    )
    encoder = export_methods(nemo_model, read_metadata(nemo_model, 0.1, 20.0), xnnpack_encoder=True)["encoder"]
    parts, programs = partitioners("xnnpack", {"encoder": encoder})
    cut = []  # each graph module right after its partitions were cut, with the source it would have then
    original_create = backend_api._create_partitions

    def create_partitions(graph_module, *args, **kwargs):
        result = original_create(graph_module, *args, **kwargs)
        cut.append(
            (
                graph_module.code,
                graph_module.graph.python_code("self").src,
                [
                    (m.code, m.graph.python_code("self").src)
                    for m in graph_module.children()
                    if isinstance(m, torch.fx.GraphModule)
                ],
            )
        )
        return result

    with monkeypatch.context() as patch, faster_lowering(programs, parts):
        patch.setattr(backend_api, "_create_partitions", create_partitions)
        to_edge_transform_and_lower(
            programs, partitioner=parts, compile_config=EdgeCompileConfig(_check_ir_validity=False)
        )
    assert (
        ExportPass.call,
        XNNPACKPassManager.transform,
        ExportedProgram.run_decompositions,
        SymToTensorPass.call,
        backend_api._create_partitions_in_graph_module,
        lowered_backend_module.legalize_graph,
    ) == saved
    # Recompiles were held back while the partitions were cut, and none is missing afterwards: the generated
    # source of the graph and of every cut submodule matches its graph.
    assert defer_partition_recompiles.stats["deferred"] >= 2, defer_partition_recompiles.stats
    assert defer_partition_recompiles.stats["recompiled"] == 1, defer_partition_recompiles.stats
    assert len(cut) == 1 and len(cut[0][2]) == defer_partition_recompiles.stats["deferred"]
    code, fresh, submodules = cut[0]
    assert code == fresh
    assert all(sub_code == sub_fresh for sub_code, sub_fresh in submodules)
    assert skip_inert_passes.stats["skipped"] >= 3, skip_inert_passes.stats
    assert skip_unchanged_retraces.stats["skipped"] > 0, skip_unchanged_retraces.stats
    assert skip_unchanged_retraces.stats["replayed"] > 0, skip_unchanged_retraces.stats  # some passes do edit
    assert skip_empty_decompositions.stats["skipped"] > 0, skip_empty_decompositions.stats
    # Functionalizing also decomposed, so the decomposition that follows found nothing to do and was skipped.
    assert decompose_in_one_retrace.stats["merged"] == 1, decompose_in_one_retrace.stats
    assert skip_empty_decompositions.stats["run"] == 1, skip_empty_decompositions.stats


def test_passes_that_work_during_the_replay_are_never_skipped():
    from executorch.backends.xnnpack._passes.convert_to_sdpa import ConvertToSDPAPass
    from executorch.exir.pass_base import ExportPass
    from executorch.exir.passes.const_prop_pass import ConstPropPass
    from executorch.exir.passes.memory_format_ops_pass import DimOrderOpsRevertPass

    from parakeet_executorch.export.xnnpack.shortcuts import _replay_transforms

    assert _replay_transforms(DimOrderOpsRevertPass, ExportPass)
    assert _replay_transforms(ConstPropPass, ExportPass)
    assert not _replay_transforms(ConvertToSDPAPass, ExportPass)


def test_fingerprint_sees_edits_and_swapped_constants():
    from parakeet_executorch.export.xnnpack.shortcuts import graph_fingerprint

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

    from parakeet_executorch.export.xnnpack import shortcuts

    if not sys.platform.startswith("linux"):
        pytest.skip("parallel preprocess is Linux-only; elsewhere partitions run one after the other")
    monkeypatch.setattr(shortcuts.parallel, "_preprocess_job", _die)
    with shortcuts.parallel_preprocess(workers=2), pytest.raises(BrokenProcessPool):
        XnnpackBackend.preprocess_multimethod({"encoder": [None, None]}, {"encoder": [[], []]})


# torchao's affine ops as the 8da4w / 8da8w / weight-only recipes put them in a graph: (op, args builder)
def _affine_calls(x, w):
    """``x``: activations [rows, 64] float32 (fake, maybe symbolic rows); ``w``: int8 weight [16, 64]."""
    q = torch.ops.torchao
    calls = []
    for mapping, dtype, lo, hi, block, keep in (
        ("ASYMMETRIC", torch.int8, -128, 127, [1, 64], False),
        ("SYMMETRIC", torch.int8, -8, 7, [1, 32], False),
        ("SYMMETRIC", torch.int8, -127, 127, [1, 64], True),
        ("ASYMMETRIC", torch.uint8, 0, 15, [1, 32], True),
    ):
        for scale_dtype, zp_dtype in ((torch.float32, torch.int8), (torch.bfloat16, None), (None, None)):
            calls.append(
                (q.choose_qparams_affine.default, (x, mapping, block, dtype, lo, hi, 1e-7, scale_dtype, zp_dtype, keep))
            )
    rows_scale, rows_zp = q.choose_qparams_affine.default(
        x, "ASYMMETRIC", [1, 64], torch.int8, -128, 127, 1e-7, torch.float32, torch.int8
    )
    calls.append((q.quantize_affine.default, (x, [1, 64], rows_scale, rows_zp, torch.int8, -128, 127)))
    calls.append((q.quantize_affine.default, (x, [1, 64], rows_scale, rows_zp, torch.uint4, 0, 15)))
    xq = q.quantize_affine.default(x, [1, 64], rows_scale, rows_zp, torch.int8, -128, 127)
    calls.append((q.dequantize_affine.default, (xq, [1, 64], rows_scale, rows_zp, torch.int8, -128, 127)))
    group_scale = torch.ones(16, 2, dtype=torch.bfloat16)
    for out in (torch.float32, torch.bfloat16):
        calls.append(
            (
                q.dequantize_affine.default,
                (w, [1, 32], group_scale, torch.zeros(16, 2, dtype=torch.int8), torch.int8, -8, 7, out),
            )
        )
        calls.append((q.dequantize_affine.default, (w, [1, 32], group_scale, None, torch.int8, -8, 7, out)))
    return calls


def _metadata(out):
    outs = out if isinstance(out, tuple) else (out,)
    return [(tuple(str(d) for d in t.shape), tuple(str(d) for d in t.stride()), t.dtype, t.device) for t in outs]


@pytest.mark.parametrize("symbolic", [True, False])
def test_affine_metadata_matches_torchao(symbolic):
    """Every argument pattern the recipes use: the shortcut's output shapes (also symbolic ones), strides and
    dtypes equal those of torchao's own arithmetic on the same fake tensors."""
    import torchao.quantization  # noqa: F401  (registers the torchao ops)
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from parakeet_executorch.export.xnnpack.shortcuts import fast_affine_metadata

    shape_env = ShapeEnv()
    rows = shape_env.create_symintnode(shape_env.create_symbol(40, ConstantSource("rows")), hint=40) if symbolic else 40
    with FakeTensorMode(shape_env=shape_env):
        x = torch.empty(rows, 64)
        w = torch.empty(16, 64, dtype=torch.int8)
        calls = _affine_calls(x, w)
        expected = [_metadata(op(*args)) for op, args in calls]
        with fast_affine_metadata() as stats:
            got = [_metadata(op(*args)) for op, args in calls]
    assert got == expected
    assert stats == {"metadata": len(calls), "computed": 0}


def test_affine_ops_keep_their_arithmetic_outside_metadata_replays():
    """Real tensors get torchao's numbers, a trace records torchao's decomposition (not an empty tensor), and
    after the context fake tensors get torchao's arithmetic again (the kernel stays installed, delegating)."""
    import torchao.quantization  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from parakeet_executorch.export.xnnpack.shortcuts import fast_affine_metadata

    x = torch.randn(5, 64)
    w = torch.randint(-8, 8, (16, 64), dtype=torch.int8)

    def compute(x, w):
        return [op(*args) for op, args in _affine_calls(x, w)]

    def flat(outs):
        return [t for out in outs for t in (out if isinstance(out, tuple) else (out,))]

    reference = flat(compute(x, w))
    traced = make_fx(compute, tracing_mode="fake")(x, w).graph
    with fast_affine_metadata() as stats:
        assert all(torch.equal(a, b) for a, b in zip(flat(compute(x, w)), reference))
        traced_inside = make_fx(compute, tracing_mode="fake")(x, w).graph
    assert stats["metadata"] == 0 and stats["computed"] > 0
    targets = [str(n.target) for n in traced_inside.nodes]
    assert targets == [str(n.target) for n in traced.nodes]
    assert not any("empty" in t for t in targets)
    with FakeTensorMode():
        fake_x = torch.empty(5, 64)
        torch.ops.torchao.dequantize_affine.default(
            fake_x.to(torch.int8), [1, 64], torch.ones(5), None, torch.int8, -128, 127
        )
    assert stats["metadata"] == 0  # torchao's arithmetic again


class _Transposes(torch.nn.Module):
    def forward(self, x):
        return x.t() + 1


class _Views(torch.nn.Module):
    def forward(self, x):
        return x.unsqueeze(0).expand(3, -1, -1) + torch.ops.aten.alias(x)


class _SizeAsTensor(torch.nn.Module):
    def forward(self, x):
        return x + x.shape[0]


class _Constants(torch.nn.Module):
    def forward(self, x):
        return x + torch.ones(5) * 2


class _Casts(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.float64).sum()


def _structure(graph_module):
    """Every node's op, target and arguments, with nodes as positions (replays rename nodes)."""
    position = {node: i for i, node in enumerate(graph_module.graph.nodes)}
    return [
        (node.op, str(node.target), repr(torch.fx.node.map_arg((node.args, node.kwargs), position.get)))
        for node in graph_module.graph.nodes
    ]


def test_passes_are_skipped_only_when_they_have_nothing_to_rewrite():
    """Each pass that skip_inert_passes may skip runs on small graphs, ATen and Edge, with and without the ops it
    rewrites (aten.t, view ops, a size used as a tensor, dim-order ops, an op on constants only): its predicate
    is true exactly when the pass changes the graph, each predicate is true somewhere, and the graph out of the
    pass is the same with and without the shortcut."""
    import copy

    from executorch.exir import EdgeCompileConfig, to_edge
    from torch.export import Dim, export

    from parakeet_executorch.export.xnnpack.shortcuts import _inert_pass_predicates, skip_inert_passes

    fired = set()
    for module in (_Transposes, _Views, _SizeAsTensor, _Constants, _Casts):
        program = export(module(), (torch.randn(4, 5),), dynamic_shapes=({0: Dim("n", min=2, max=64)},), strict=False)
        aten = program.run_decompositions({}).graph_module
        edge = to_edge(program, compile_config=EdgeCompileConfig(_check_ir_validity=False))
        for graph_module in (aten, edge.exported_program().graph_module):
            for pass_class, needs_replay in _inert_pass_predicates().items():
                case = f"{module.__name__}, {pass_class.__name__}"
                shipped = _structure(pass_class()(copy.deepcopy(graph_module)).graph_module)
                with skip_inert_passes() as stats:
                    shortcut = _structure(pass_class()(copy.deepcopy(graph_module)).graph_module)
                assert shortcut == shipped, case
                changes = shipped != _structure(graph_module)
                assert needs_replay(graph_module) == changes, case
                assert stats == ({"skipped": 0, "replayed": 1} if changes else {"skipped": 1, "replayed": 0})
                if changes:
                    fired.add(pass_class)
    assert fired == set(_inert_pass_predicates()), fired


def test_merge_checks_agree_with_executorch_on_every_pair(tiny_nemo, monkeypatch):
    """fpa4w's non-delegated linears make the partitioner refuse many merges: on every pair it tries, the
    ``set.isdisjoint`` cycle check gives executorch's answer (both ways occur)."""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.exir.backend.canonical_partitioners.group_partitioner import GroupBasedPartitioner

    from parakeet_executorch.export.backends import partitioners
    from parakeet_executorch.export.load import load_nemo_model, read_metadata
    from parakeet_executorch.export.program import export_methods
    from parakeet_executorch.export.recipes import quantize_model
    from parakeet_executorch.export.xnnpack.shortcuts import merge_checks

    model = load_nemo_model(str(tiny_nemo))
    quantize_model(model, "fpa4w", "none", 32)
    encoder = export_methods(model, read_metadata(model, 0.1, 20.0), xnnpack_encoder=True)["encoder"]
    parts, programs = partitioners("xnnpack", {"encoder": encoder})
    original = GroupBasedPartitioner._can_merge_partitions
    answers = []

    def both(self, p1, p2, partitions_by_id):
        want = original(self, p1, p2, partitions_by_id)
        answers.append((merge_checks._can_merge_partitions(self, p1, p2, partitions_by_id), want))
        return want

    monkeypatch.setattr(GroupBasedPartitioner, "_can_merge_partitions", both)
    to_edge_transform_and_lower(programs, partitioner=parts, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    assert {want for _, want in answers} == {True, False}
    assert all(got == want for got, want in answers)
