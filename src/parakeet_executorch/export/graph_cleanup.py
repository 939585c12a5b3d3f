"""Copies that an inference graph does not need, removed from the ATen-level ExportedProgram before ``to_edge``.

Why: every value an op writes is memory. A delegate's internal values live in XNNPACK's workspace (one arena shared
by all delegates, sized by the largest at the export's bound) and the values between delegates in the executorch
memory plan; both stay resident for the life of the process. Three kinds of op in a traced NeMo encoder only copy:

* ``aten.dropout`` in eval mode (``train=False``): the identity, which ``to_edge`` decomposes into a ``clone``. Each
  of the encoder's feed-forward modules has one on its [T, 4096] hidden values: at v3's size and a 60 s bound a
  12 MB copy inside the feed-forward's delegate, beside the activation's own values.
* a ``transpose`` of a ``transpose`` over the same two axes: the input again, but two copies on XNNPACK (it runs each
  transpose as a copy; a view stays a view only on the portable kernels). The subsampling's output is transposed
  to [B, C, T, F'] (NeMo's ``MaskedConvSequential`` returns it so) and straight back by ``ConvSubsampling``'s
  ``x.transpose(1, 2).reshape(b, t, -1)``: two [T, 4096] copies.
* a ``view`` or ``reshape`` to the shape its input already has (the quantized linears reshape their 2-D output
  to the input's leading dims, which on rows are the same): a copy into a new value on XNNPACK.

The rewrites leave every value the same (they only remove ops that return their input's elements unchanged).
"""

from __future__ import annotations

import torch


def _bypass(ep, returns_its_input) -> int:
    """Rewire the users of every call in ``ep``'s graph for which ``returns_its_input(node)`` is true to the call's
    first argument, and erase the call (in place). Returns how many were erased."""
    graph = ep.graph_module.graph
    count = 0
    for node in list(graph.nodes):
        if node.op == "call_function" and isinstance(node.args[0], torch.fx.Node) and returns_its_input(node):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
            count += 1
    if count:
        ep.graph_module.recompile()
    return count


def _eval_dropout(node: torch.fx.Node) -> bool:
    train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", True)
    return node.target is torch.ops.aten.dropout.default and train is False


def drop_inference_dropouts(ep) -> int:
    """Replace each ``aten.dropout(x, p, train=False)`` in ``ep``'s graph by ``x`` (in place).

    Mirrors ``torch.nn.functional.dropout``'s eval behaviour (the identity). Dropouts in training mode are kept.
    Returns how many were removed."""
    return _bypass(ep, _eval_dropout)


def _axes(node: torch.fx.Node) -> frozenset[int] | None:
    """The two axes of a ``transpose.int`` node, made non-negative; None if they cannot be read."""
    val = node.meta.get("val")
    dim0, dim1 = node.args[1], node.args[2]
    if not isinstance(val, torch.Tensor) or not isinstance(dim0, int) or not isinstance(dim1, int):
        return None
    rank = val.dim()
    return frozenset((dim0 % rank, dim1 % rank))


def cancel_transpose_pairs(ep) -> int:
    """Rewire every ``transpose(transpose(x, a, b), a, b)`` in ``ep``'s graph to ``x`` (in place); the inner
    transpose stays while it has other users. Returns how many pairs were cancelled."""
    transpose = torch.ops.aten.transpose.int
    graph = ep.graph_module.graph
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not transpose:
            continue
        inner = node.args[0]
        if not isinstance(inner, torch.fx.Node) or inner.op != "call_function" or inner.target is not transpose:
            continue
        axes = _axes(node)
        if axes is None or axes != _axes(inner) or len(axes) != 2:
            continue
        node.replace_all_uses_with(inner.args[0])
        graph.erase_node(node)
        count += 1
    if count:
        graph.eliminate_dead_code()
        ep.graph_module.recompile()
    return count


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when a and b have the same shape for every run-time size (decided without adding a guard)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return a.dim() == b.dim() and all(statically_known_true(x == y) for x, y in zip(a.shape, b.shape))


def _identity_view(node: torch.fx.Node) -> bool:
    if node.target not in (torch.ops.aten.view.default, torch.ops.aten.reshape.default):
        return False
    source = node.args[0]
    out, src = node.meta.get("val"), source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    return isinstance(out, torch.Tensor) and isinstance(src, torch.Tensor) and _same_shape(out, src)


def drop_identity_views(ep) -> int:
    """Rewire every ``view``/``reshape`` whose output has its input's shape to the input (in place); such a view
    returns the same elements in the same layout. Returns how many were removed."""
    return _bypass(ep, _identity_view)


def remove_inference_copies(ep) -> dict[str, int]:
    """:func:`drop_inference_dropouts`, :func:`cancel_transpose_pairs` and :func:`drop_identity_views` on ``ep``
    (in place); how many of each were removed."""
    return {
        "dropouts": drop_inference_dropouts(ep),
        "transpose_pairs": cancel_transpose_pairs(ep),
        "identity_views": drop_identity_views(ep),
    }
