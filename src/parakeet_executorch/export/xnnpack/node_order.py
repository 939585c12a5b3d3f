"""Lowering that keeps the traced order of the graph's nodes, so that XNNPACK runs each delegate's ops in it.

executorch 1.5.1 cuts a program's partitions out one at a time, and after each cut ``create_submodule_from_nodes``
re-sorts the whole graph with torch's ``legalize_graph``, a breadth-first topological sort: of two independent
chains of ops it runs the first op of each, then the second of each, and so on. A delegate cut after that takes
its ops in that order, and XNNPACK runs them in it and plans its memory by it. For the subsampling computed in
time chunks (``subsampling_chunks.py``) that meant every chunk's first convolution ran before any chunk's second,
so all chunks' largest values were alive at once and the workspace stayed the size of the unchunked pass (70.8 MB
against 82 MB at v3's size and a 20 s bound).

:func:`keep_node_order` swaps that sort for :func:`stable_legalize_graph`: a topological sort that, among the
nodes ready to run, always takes the one that came first in the graph, so a graph that is already in a valid order
(as ``torch.export`` traces it: the order the Python code ran in) keeps it, and only a node placed before one of
its inputs moves (as the cut's ``call_delegate`` node may be). The graph computes the same values either way;
only the order of independent ops changes.
"""

from __future__ import annotations

import heapq
from contextlib import contextmanager
from unittest import mock

import torch

# Re-sorts by :func:`stable_legalize_graph` since import: graphs kept as they were, and graphs rebuilt.
SORT_STATS = {"kept": 0, "sorted": 0}


def stable_legalize_graph(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``torch.fx.passes.tools_common.legalize_graph`` with a stable order: replace ``gm``'s graph by one with the
    same nodes in a topological order that keeps the current order wherever it is already valid (ties between
    ready nodes go to the earlier one). Modifies ``gm`` in place and returns it.

    A graph already in a valid order is left as it is (the stable sort of a valid order is that order), without
    the rebuild: executorch re-sorts the whole graph after every partition it cuts, and rebuilding it each time was
    a sixth of the full-size fp32 lowering (24 of 145 s, 172 re-sorts, 165 of them of an already valid order).

    Raises:
        RuntimeError: the graph has a cycle (as ``legalize_graph``).
    """
    if _in_valid_order(gm.graph):
        SORT_STATS["kept"] += 1
        gm.recompile()  # what installing a new graph would have done (the cut changed the graph)
        return gm
    SORT_STATS["sorted"] += 1
    nodes = list(gm.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    pending = dict.fromkeys(nodes, 0)
    for node in nodes:
        for user in node.users:
            pending[user] += 1
    ready = [(position[node], node) for node in nodes if pending[node] == 0]
    heapq.heapify(ready)
    new_graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    while ready:
        _, node = heapq.heappop(ready)
        env[node] = new_graph.node_copy(node, lambda x: env[x])
        for user in node.users:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(env) < len(nodes):
        raise RuntimeError(f"Input graph has cycles, unable to add {[n for n in nodes if n not in env]}")
    new_graph._codegen = gm.graph._codegen
    gm.graph = new_graph
    return gm


def _in_valid_order(graph: torch.fx.Graph) -> bool:
    """Whether every node of ``graph`` comes after all of its inputs."""
    seen: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if not seen.issuperset(node.all_input_nodes):
            return False
        seen.add(node)
    return True


@contextmanager
def keep_node_order():
    """While active, executorch's partition cutting re-sorts graphs with :func:`stable_legalize_graph`. Enter it
    outside ``faster_lowering`` (whose recompile shortcut wraps whichever sort is installed), around
    ``to_edge_transform_and_lower``."""
    from executorch.exir import lowered_backend_module

    with mock.patch.object(lowered_backend_module, "legalize_graph", stable_legalize_graph):
        yield
