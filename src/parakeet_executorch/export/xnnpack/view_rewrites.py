"""Graph-level rewrite for XNNPACK: reshapes with one run-time size written with ``-1``.

The graph level of the encoder work (the module level is :mod:`.encoder_forwards`): :func:`rewrite_views`, on the
ATen-level ExportedProgram before ``to_edge``.

   ``view``/``reshape``/non-trailing ``unsqueeze`` whose output has exactly one run-time size -> a ``view`` with
   that size written as ``-1`` (after a contiguous clone only where the input may be strided).
       XNNPACK's partitioner rejects any symbolic size in a reshape but takes one inferred (-1) dimension; the
       element count fixes the same size, so the view is the same (e.g. the subsampling's [1, T, 4096] reshape).
       XNNPACK's unsqueeze only inserts a trailing dim; the features' ``unsqueeze(1)`` before the first conv2d
       split the subsampling from the first delegate.
       No clone where the input is contiguous: XNNPACK runs every clone as a copy into a value of its own, sized at
       the bound (a [T, 1024] copy per such reshape, ~3 MB at v3's size and 60 s).
"""

from __future__ import annotations

import torch


def _is_static(dim) -> bool:
    return isinstance(dim, int)


def _contiguous(node) -> bool:
    """True when ``node``'s value is contiguous for every run-time size (decided without adding a guard)."""
    from torch._prims_common import is_contiguous_or_false

    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and bool(is_contiguous_or_false(val))


def rewrite_views(ep) -> int:
    """In an ATen-level ExportedProgram, give each ``view``/``reshape`` with one run-time output size a ``-1`` there.

    XNNPACK's partitioner rejects a reshape with any symbolic size but takes one inferred (-1) dimension; the
    element count fixes that size to the same value, so the op is unchanged. A ``reshape`` becomes
    ``clone(contiguous) + view`` on an input that may be strided (what it does anyway there) and a plain ``view`` on
    a contiguous one (a reshape of a contiguous tensor is that view); ``to_edge`` would otherwise re-derive a
    symbolic shape from the reshape. The graph is changed in place. Returns how many ops were rewritten."""
    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default
    unsqueeze = torch.ops.aten.unsqueeze.default
    graph = ep.graph_module.graph
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (view, reshape, unsqueeze):
            continue
        out = node.meta.get("val")
        if out is None or not isinstance(out, torch.Tensor):
            continue
        if node.target == unsqueeze and node.args[1] in (-1, out.dim() - 1):
            continue  # XNNPACK takes a trailing unsqueeze as it is
        dynamic = [i for i, d in enumerate(out.shape) if not _is_static(d)]
        if len(dynamic) != 1:
            continue
        shape = [int(d) if _is_static(d) else -1 for d in out.shape]
        src = node.args[0]
        if node.target in (reshape, unsqueeze) and not _contiguous(src):
            with graph.inserting_before(node):
                src = graph.call_function(
                    torch.ops.aten.clone.default, (src,), {"memory_format": torch.contiguous_format}
                )
                src.meta = dict(node.args[0].meta)
        node.target = view
        node.args = (src, shape)
        count += 1
    if count:
        graph.eliminate_dead_code()
        ep.graph_module.recompile()
    return count
