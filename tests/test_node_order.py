"""keep_node_order: the partition cutting's re-sort keeps the traced order of independent chains."""

from __future__ import annotations

import operator

import pytest
import torch


def _two_chains() -> torch.fx.GraphModule:
    """x -> a1 -> a2 -> a3 and x -> b1 -> b2 -> b3, traced chain a first, then chain b; output a3 + b3."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    a = x
    for i in range(3):
        a = graph.call_function(torch.relu, (a,), name=f"a{i + 1}")
    b = x
    for i in range(3):
        b = graph.call_function(torch.neg, (b,), name=f"b{i + 1}")
    graph.output(graph.call_function(operator.add, (a, b), name="out"))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _order(gm) -> list[str]:
    return [n.name for n in gm.graph.nodes if n.op == "call_function"]


def test_stable_sort_keeps_a_valid_order_where_torch_interleaves():
    from torch.fx.passes.tools_common import legalize_graph

    from parakeet_executorch.export.xnnpack.node_order import stable_legalize_graph

    assert _order(legalize_graph(_two_chains())) == ["a1", "b1", "a2", "b2", "a3", "b3", "out"]
    gm = stable_legalize_graph(_two_chains())
    assert _order(gm) == ["a1", "a2", "a3", "b1", "b2", "b3", "out"]
    x = torch.randn(5)
    assert torch.equal(gm(x), torch.relu(x) + (-x))


def test_stable_sort_moves_a_node_placed_before_its_input():
    from parakeet_executorch.export.xnnpack.node_order import stable_legalize_graph

    gm = _two_chains()
    nodes = {n.name: n for n in gm.graph.nodes}
    nodes["a1"].prepend(nodes["b3"])  # b3 now stands before b2, its input: not a valid order
    gm = stable_legalize_graph(gm)
    order = _order(gm)
    assert order.index("b2") < order.index("b3")
    assert order[:3] == ["a1", "a2", "a3"]  # the rest keeps its place
    x = torch.randn(5)
    assert torch.equal(gm(x), torch.relu(x) + (-x))


def test_cycle_is_refused():
    from parakeet_executorch.export.xnnpack.node_order import stable_legalize_graph

    gm = _two_chains()
    nodes = {n.name: n for n in gm.graph.nodes}
    nodes["b1"].args = (nodes["b3"],)  # b1 <- b3 <- b2 <- b1
    with pytest.raises(RuntimeError, match="cycles"):
        stable_legalize_graph(gm)


def test_keep_node_order_swaps_executorchs_sort_and_restores_it():
    from executorch.exir import lowered_backend_module

    from parakeet_executorch.export.xnnpack.node_order import keep_node_order, stable_legalize_graph

    original = lowered_backend_module.legalize_graph
    with keep_node_order():
        assert lowered_backend_module.legalize_graph is stable_legalize_graph
    assert lowered_backend_module.legalize_graph is original


def test_a_graph_in_valid_order_is_kept_without_a_rebuild_and_recompiled():
    from parakeet_executorch.export.xnnpack.node_order import SORT_STATS, stable_legalize_graph

    gm = _two_chains()
    graph, nodes = gm.graph, list(gm.graph.nodes)
    # Change the graph the way a cut does, without going through the graph setter: gm.code is now stale.
    out = next(n for n in nodes if n.name == "out")
    with graph.inserting_before(out):
        c = graph.call_function(torch.sigmoid, (nodes[1],), name="c")
    out.args = (out.args[0], c)
    assert "sigmoid" not in gm.code
    before = dict(SORT_STATS)
    gm = stable_legalize_graph(gm)
    assert gm.graph is graph and list(gm.graph.nodes) == nodes[:-2] + [c] + nodes[-2:]
    assert SORT_STATS["kept"] == before["kept"] + 1
    assert "sigmoid" in gm.code  # recompiled, as installing a new graph would have done
    x = torch.randn(5)
    assert torch.equal(gm(x), torch.relu(x) + torch.sigmoid(torch.relu(x)))
