"""``skip_unchanged_retraces``: the metadata replay after an XNNPACK preprocess pass that edited nothing.

executorch 1.5.1's ``XnnpackBackend.preprocess`` runs 17 passes on every partition, and each one ends by calling
``ExportPass.call``, which re-runs the whole partition through fake tensors to rebuild node metadata. With the
encoder's symbolic time dimension that replay costs about 0.6 s per conformer layer per pass, and most
passes find nothing to do in a Parakeet graph (no bilinear upsampling, no SDPA pattern, no PReLU, no large
concatenation): the replay then rebuilds exactly the metadata the nodes already carry.

``skip_unchanged_retraces`` records a fingerprint of the partition's graph before each XNNPACK pass and lets
``ExportPass.call`` return the graph as it is when the pass left the fingerprint unchanged. A pass that edits the
graph or swaps a constant still gets its replay. The retrace copies each node's metadata onto its replayed node
and recomputes only ``val``/``tensor_meta`` from the ops, so an unchanged graph keeps valid metadata without it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from unittest import mock

import torch

_state = threading.local()


def graph_fingerprint(graph_module: torch.fx.GraphModule) -> tuple:
    """Return a hashable summary of ``graph_module``'s structure: every node's op, target and arguments (nodes by
    name), and the identity of every attribute a ``get_attr`` node reads (so a pass that replaces a constant, as
    XNNPACK's PReLU pass does, counts as a change). Node metadata is not included."""
    items = []
    for node in graph_module.graph.nodes:
        args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: ("node", n.name))
        target = node.target if isinstance(node.target, str) else id(node.target)
        extra = None
        if node.op == "get_attr":
            obj: object = graph_module
            for part in node.target.split("."):
                obj = getattr(obj, part, None)
            extra = id(obj)
        items.append((node.name, node.op, target, repr(args), extra))
    return tuple(items)


_REPLAY_HOOKS = (
    "placeholder",
    "output",
    "inputs",
    "on_attr",
    "call_operator",
    "call_sym",
    "call_getitem",
    "call_cond",
    "call_map",
    "call_while",
    "call_scan",
    "call_delegate",
    "call_submodule",
    "call_size_operator",
    "call_size_operator_all",
)


def _replay_transforms(pass_class: type, export_pass: type) -> bool:
    """True when ``pass_class`` does its work during the replay itself (it overrides a hook the replay calls, as
    ``DimOrderOpsRevertPass`` and ``ConstPropPass`` do): skipping its replay would skip the pass."""
    return any(getattr(pass_class, hook, None) is not getattr(export_pass, hook, None) for hook in _REPLAY_HOOKS)


@contextmanager
def skip_unchanged_retraces():
    """Within this context, XNNPACK's preprocess skips the metadata replay of passes that changed nothing.

    Counts are kept in ``skip_unchanged_retraces.stats`` (``{"skipped": n, "replayed": m}``) for tests and
    benchmarks. Restores executorch's classes on exit, also on error.
    """
    from executorch.backends.xnnpack import _passes as xnn_passes
    from executorch.backends.xnnpack.xnnpack_preprocess import XNNPACKPassManager
    from executorch.exir.pass_base import ExportPass, PassResult

    original_call = ExportPass.call
    stats = skip_unchanged_retraces.stats = {"skipped": 0, "replayed": 0}

    def call(self, graph_module):
        before = getattr(_state, "fingerprints", {}).get(id(graph_module))
        if before is not None and not _replay_transforms(type(self), ExportPass):
            if graph_fingerprint(graph_module) == before:
                stats["skipped"] += 1
                return PassResult(graph_module, False)
            stats["replayed"] += 1
        return original_call(self, graph_module)

    def transform(manager):
        # Mirrors XNNPACKPassManager.transform, with a fingerprint taken before each pass.
        ep = manager.exported_program
        for pass_ in manager.passes:
            if issubclass(pass_, xnn_passes.XNNPACKPass):
                transform_pass = pass_(ep)
            elif issubclass(pass_, ExportPass):
                transform_pass = pass_()
            else:
                raise RuntimeError(f"expected an ExportPass subclass, got {pass_!r}")
            _state.fingerprints = {id(ep.graph_module): graph_fingerprint(ep.graph_module)}
            try:
                ep = xnn_passes._transform(ep, transform_pass)
            finally:
                _state.fingerprints = {}
        return ep

    with mock.patch.object(ExportPass, "call", call), mock.patch.object(XNNPACKPassManager, "transform", transform):
        yield stats


skip_unchanged_retraces.stats = {"skipped": 0, "replayed": 0}
