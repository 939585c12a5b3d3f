"""``defer_partition_recompiles``: one Python recompile of the graph after all partitions are cut, not one each.

executorch 1.5.1 cuts the partitions of a program out one at a time (``_create_partitions_in_graph_module``), and
after each cut ``create_submodule_from_nodes`` re-sorts the graph with ``legalize_graph``, which installs the new
graph through ``GraphModule.graph``'s setter. The setter regenerates and ``exec``s the Python source of the whole
graph and of every submodule cut so far. With P partitions that is P whole-graph code generations and ~P^2/2
submodule ones: for fpa4w, whose non-delegated linears split the full-size encoder into 219 partitions, most of
its lowering time.

Nothing in that loop runs or reads the generated code: each step reads and edits ``graph``, and the partition's
``ExportedProgram`` is built from the submodule's ``graph``, which makes a fresh ``GraphModule``. So within the
loop the sort still builds its new graph exactly as shipped, but the setter does not regenerate code; when the
loop returns, each graph module whose recompile was held back is recompiled once, which regenerates the same
source the last held-back recompile would have (the graph no longer changes in between).
"""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import torch


def _noop_recompile():
    return None


@contextmanager
def defer_partition_recompiles():
    """Within this context, executorch's partition cutting recompiles each graph module once, at the end.

    Counts are kept in ``defer_partition_recompiles.stats`` (``{"deferred": n, "recompiled": m}``: sorts whose
    recompile was held back, and recompiles run at the end). Restores executorch's functions on exit, also on error;
    if the loop raises, the held-back recompiles still run, so no graph module is left with stale code.
    """
    from executorch.exir import lowered_backend_module
    from executorch.exir.backend import backend_api

    original_legalize = lowered_backend_module.legalize_graph
    original_create = backend_api._create_partitions_in_graph_module
    stats = defer_partition_recompiles.stats = {"deferred": 0, "recompiled": 0}
    pending: dict[int, torch.fx.GraphModule] = {}

    def legalize_graph(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        if not depth:
            return original_legalize(gm)
        # The setter calls ``self.recompile()``; an instance attribute shadows the method for this call only.
        gm.__dict__["recompile"] = _noop_recompile
        try:
            result = original_legalize(gm)
        finally:
            del gm.__dict__["recompile"]
        pending[id(gm)] = gm
        stats["deferred"] += 1
        return result

    def create_partitions_in_graph_module(*args, **kwargs):
        nonlocal depth
        depth += 1
        try:
            return original_create(*args, **kwargs)
        finally:
            depth -= 1
            if not depth:
                for gm in pending.values():
                    gm.recompile()
                    stats["recompiled"] += 1
                pending.clear()

    depth = 0
    with (
        mock.patch.object(lowered_backend_module, "legalize_graph", legalize_graph),
        mock.patch.object(backend_api, "_create_partitions_in_graph_module", create_partitions_in_graph_module),
    ):
        yield stats


defer_partition_recompiles.stats = {"deferred": 0, "recompiled": 0}
