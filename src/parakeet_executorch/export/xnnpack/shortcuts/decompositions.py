"""Fewer whole-program retraces in ``run_decompositions``: ``skip_empty_decompositions`` and
``decompose_in_one_retrace``."""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock


@contextmanager
def _wrapped_run_decompositions(wrap):
    """Replace ``ExportedProgram.run_decompositions`` by ``wrap(the current one)`` until exit, also on error."""
    from torch.export import ExportedProgram

    with mock.patch.object(ExportedProgram, "run_decompositions", wrap(ExportedProgram.run_decompositions)):
        yield


# aten.sym_size.int is in the default table but a size read has nothing to decompose into: it is how a symbolic
# dimension appears in the graph, and a re-export keeps it.
_NOTHING_TO_DECOMPOSE = ("aten.sym_size.int",)


@contextmanager
def skip_empty_decompositions():
    """Within this context, ``ExportedProgram.run_decompositions(table)`` returns the program unchanged when
    ``table`` is not empty and no ``call_function`` node's target is in it (``aten.sym_size.int`` aside).

    ``to_edge_transform_and_lower`` runs a program through ``run_decompositions`` three times before lowering to
    XNNPACK: once with an empty table (functionalization; never skipped here), once with the partitioner's
    preserved ops left out of the table, and once more with the full table for preserved ops the partitioner
    then rejected. When it rejected none, the third call re-exports the whole graph to change nothing (~50 s for
    the full-size encoder). Counts are kept in ``skip_empty_decompositions.stats``.
    """
    stats = skip_empty_decompositions.stats = {"skipped": 0, "run": 0}

    def wrap(original):
        def run_decompositions(self, decomp_table=None, *args, **kwargs):
            if decomp_table and not any(
                node.op == "call_function"
                and node.target in decomp_table
                and str(node.target) not in _NOTHING_TO_DECOMPOSE
                for node in self.graph_module.graph.nodes
            ):
                stats["skipped"] += 1
                return self
            stats["run"] += 1
            return original(self, decomp_table, *args, **kwargs)

        return run_decompositions

    with _wrapped_run_decompositions(wrap):
        yield stats


skip_empty_decompositions.stats = {"skipped": 0, "run": 0}


@contextmanager
def decompose_in_one_retrace(programs: dict | None = None, partitioners: dict | None = None):
    """Within this context, functionalizing a program that will be lowered to XNNPACK also decomposes it.

    ``to_edge_transform_and_lower`` retraces each program twice before partitioning: ``run_decompositions({})``
    (functionalize only) so that it can ask the partitioner which ops to keep, then ``run_decompositions`` with
    the core-ATen table less those ops. XNNPACK's answer does not depend on the graph (``XnnpackPartitioner``
    reads it from its op configs), so here the first call already applies that table, on the training-IR
    program, and the second finds nothing left and is skipped by ``skip_empty_decompositions``. One retrace of
    the full-size encoder (~40 s) is saved; if the partitioner asks to keep other ops than expected, the second
    call still runs, so the program is the same either way.

    Args:
        programs: method name -> the ``ExportedProgram`` about to be lowered (the objects passed to
            ``to_edge_transform_and_lower``; matched by identity).
        partitioners: method name -> list of partitioners, as passed to ``to_edge_transform_and_lower``. Only
            methods whose one partitioner is an ``XnnpackPartitioner`` take the shortcut.

    Counts are kept in ``decompose_in_one_retrace.stats`` (``{"merged": n}``).
    """
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir.program._program import _default_decomposition_table

    tables = {}
    for name, program in (programs or {}).items():
        parts = (partitioners or {}).get(name) or []
        if len(parts) == 1 and isinstance(parts[0], XnnpackPartitioner):
            table = _default_decomposition_table()
            for op in parts[0].ops_to_not_decompose(program)[0]:
                table.pop(op, None)
            tables[id(program)] = (program, table)  # the program is kept so that its id cannot be reused
    stats = decompose_in_one_retrace.stats = {"merged": 0}

    def wrap(original):
        def run_decompositions(self, decomp_table=None, *args, **kwargs):
            entry = tables.get(id(self))
            if decomp_table == {} and entry is not None and entry[0] is self:
                stats["merged"] += 1
                return original(self, entry[1], *args, **kwargs)
            return original(self, decomp_table, *args, **kwargs)

        return run_decompositions

    with _wrapped_run_decompositions(wrap):
        yield stats


decompose_in_one_retrace.stats = {"merged": 0}
