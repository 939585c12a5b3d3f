"""Copies removed from inference graphs before lowering (export/graph_cleanup.py): the same outputs, fewer ops."""

from __future__ import annotations

import torch
from torch.export import Dim, export

from parakeet_executorch.export.graph_cleanup import (
    cancel_transpose_pairs,
    drop_identity_views,
    drop_inference_dropouts,
    remove_inference_copies,
)


def _targets(ep) -> list:
    return [n.target for n in ep.graph_module.graph.nodes if n.op == "call_function"]


class _FeedForwardLike(torch.nn.Module):
    """Linear, activation, dropout, linear on rows, with the reshapes a quantized linear leaves around them."""

    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(8, 32)
        self.dropout = torch.nn.Dropout(0.3)
        self.linear2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = self.linear1(x)
        h = h.reshape(x.size(0), 32)  # to the shape it has: an identity view
        h = self.dropout(torch.nn.functional.silu(h))
        y = self.linear2(h).reshape(1, x.size(0), 8)  # a real reshape, kept
        return y.transpose(1, 2).transpose(1, 2) + y.transpose(1, 2).transpose(2, 1)  # two transpose pairs


def _export(module, rows: int = 7):
    return export(module, (torch.randn(rows, 8),), dynamic_shapes={"x": {0: Dim("rows", min=2, max=64)}}, strict=False)


def test_cleanup_keeps_the_outputs_and_removes_the_copies():
    torch.manual_seed(0)
    module = _FeedForwardLike().eval()
    ep = _export(module)
    before = _targets(ep)
    assert torch.ops.aten.dropout.default in before
    counts = remove_inference_copies(ep)
    after = _targets(ep)
    assert counts["dropouts"] == 1 and torch.ops.aten.dropout.default not in after
    assert counts["transpose_pairs"] == 2 and torch.ops.aten.transpose.int not in after
    assert counts["identity_views"] >= 1
    # The reshape to [1, rows, 8] changes the shape: it stays.
    assert sum(t in (torch.ops.aten.view.default, torch.ops.aten.reshape.default) for t in after) >= 1
    for rows in (2, 7, 33):
        x = torch.randn(rows, 8)
        with torch.no_grad():
            assert torch.equal(ep.module()(x), module(x)), rows


def test_training_mode_dropout_is_kept():
    module = _FeedForwardLike().train()
    ep = _export(module)
    assert drop_inference_dropouts(ep) == 0
    assert torch.ops.aten.dropout.default in _targets(ep)


def test_a_transpose_over_other_axes_is_not_cancelled():
    class Rotate(torch.nn.Module):
        def forward(self, x):
            return x.transpose(0, 1).transpose(1, 2) * 2.0

    module = Rotate()
    x = torch.randn(3, 4, 5)
    ep = export(module, (x,), strict=False)
    assert cancel_transpose_pairs(ep) == 0
    assert drop_identity_views(ep) == 0
    assert torch.equal(ep.module()(x), module(x))
