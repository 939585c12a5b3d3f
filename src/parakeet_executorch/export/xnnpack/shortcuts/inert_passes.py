"""``skip_inert_passes``: the replays of passes that have no op to rewrite (Edge conversion and XNNPACK)."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from unittest import mock

import torch

# Some ExportPass subclasses only rewrite ops of one kind, during a full replay of the graph through fake tensors
# (~10 s per pass for the full-size encoder). Three run while converting to the Edge dialect, two more in every
# XNNPACK partition's preprocess; a Parakeet graph has no op of their kind by then, and the replay rebuilds the
# same graph. Each predicate below says, from the graph alone, whether the pass could change an op: it mirrors
# the condition in the pass's ``call_operator`` (executorch 1.5.1, ``exir/passes/``).


def _op_nodes(graph_module: torch.fx.GraphModule):
    """The nodes a replay hands to ``call_operator``: calls of ATen/custom ops and of Edge ops."""
    from executorch.exir.dialects.edge._ops import EdgeOpOverload

    kinds = (torch._ops.OpOverload, torch._ops.OpOverloadPacket, EdgeOpOverload)
    return [n for n in graph_module.graph.nodes if n.op == "call_function" and isinstance(n.target, kinds)]


def _has_aten_t(graph_module) -> bool:  # NormalizeTransposePass: aten.t -> aten.t_copy
    return any(n.target == torch.ops.aten.t.default for n in _op_nodes(graph_module))


def _has_view_op(graph_module) -> bool:  # ReplaceBrokenOpsWithFunctionalOpsPass: view ops -> their _copy
    return any(getattr(n.target, "is_view", True) for n in _op_nodes(graph_module))


def _has_symbolic_tensor_argument(graph_module) -> bool:
    """SymToTensorPass: a SymInt/SymFloat/SymBool passed where the schema takes a Tensor."""
    from executorch.exir.pass_base import map_args

    found = False

    def check(value, argument):
        nonlocal found
        if (
            isinstance(value, torch.fx.Node)
            and isinstance(argument.type, torch.TensorType)
            and type(value.meta.get("val")) in (torch.SymInt, torch.SymFloat, torch.SymBool)
        ):
            found = True
        return value

    for node in _op_nodes(graph_module):
        map_args(node.target, check, tuple(node.args), dict(node.kwargs))
        if found:
            return True
    return False


def _has_dim_order_op(graph_module) -> bool:  # DimOrderOpsRevertPass: dim-order ops -> memory-format ops
    from executorch.exir.passes.dim_order_ops_registry import MemoryFormatOpsMap

    return any(n.target in MemoryFormatOpsMap for n in _op_nodes(graph_module))


def _has_constant_op(graph_module) -> bool:
    """ConstPropPass folds an op whose arguments are all constants during the replay: Python values, or tensors
    a ``get_attr`` reads (the replay hands those over as real tensors; any other node is a fake value)."""
    for node in _op_nodes(graph_module):
        inputs: list = []
        torch.fx.node.map_arg((node.args, node.kwargs), inputs.append)
        if all(n.op == "get_attr" for n in inputs):
            return True
    return False


def _replays_only_op_overloads(graph_module) -> bool:
    """True when the replay would only visit plain ops (no submodules, no higher-order ops such as cond or map,
    whose bodies the replay would enter), so that a predicate over the top-level nodes sees every op."""
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            return False
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            return False
    return True


def _inert_pass_predicates() -> dict:
    from executorch.exir.passes import NormalizeTransposePass, ReplaceBrokenOpsWithFunctionalOpsPass, SymToTensorPass
    from executorch.exir.passes.const_prop_pass import ConstPropPass
    from executorch.exir.passes.memory_format_ops_pass import DimOrderOpsRevertPass

    return {
        NormalizeTransposePass: _has_aten_t,
        ReplaceBrokenOpsWithFunctionalOpsPass: _has_view_op,
        SymToTensorPass: _has_symbolic_tensor_argument,
        DimOrderOpsRevertPass: _has_dim_order_op,
        ConstPropPass: _has_constant_op,
    }


@contextmanager
def skip_inert_passes():
    """Within this context, the passes of ``_inert_pass_predicates`` (``NormalizeTransposePass``,
    ``ReplaceBrokenOpsWithFunctionalOpsPass``, ``SymToTensorPass``, ``DimOrderOpsRevertPass``, ``ConstPropPass``)
    return the graph as it is when it holds no op they would rewrite, instead of replaying it to rebuild the same
    graph. A graph with submodules or higher-order ops is always replayed. Counts are kept in
    ``skip_inert_passes.stats`` (``{"skipped": n, "replayed": m}``). Restores executorch's classes on exit, also
    on error.
    """
    from executorch.exir.pass_base import PassResult

    stats = skip_inert_passes.stats = {"skipped": 0, "replayed": 0}
    with ExitStack() as patches:  # mock restores, or removes, each class's own call on exit
        for pass_class, needs_replay in _inert_pass_predicates().items():
            own = pass_class.__dict__.get("call")

            def call(self, graph_module, _needs_replay=needs_replay, _class=pass_class, _own=own):
                if _replays_only_op_overloads(graph_module) and not _needs_replay(graph_module):
                    stats["skipped"] += 1
                    return PassResult(graph_module, False)
                stats["replayed"] += 1
                # Looked up at call time, so that another shortcut wrapping ExportPass.call still applies.
                return _own(self, graph_module) if _own is not None else super(_class, self).call(graph_module)

            patches.enter_context(mock.patch.object(pass_class, "call", call))
        yield stats


skip_inert_passes.stats = {"skipped": 0, "replayed": 0}
