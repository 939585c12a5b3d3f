"""The XNNPACK partitioner parakeet-export lowers with: executorch's, with scalar-only partitions left out."""

from __future__ import annotations

import torch


def _is_scalar_work(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else [val]
    return all(not isinstance(v, torch.Tensor) or v.numel() <= 1 for v in vals)


def xnnpack_partitioner():
    """``XnnpackPartitioner`` (all precisions) that leaves partitions of only one-element tensors to the portable
    kernels: the encoder's length arithmetic (a few adds on a [1] float) otherwise became separate tiny delegates,
    each a call into XNNPACK for one number. Only the tags change, never the graph."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    class _Partitioner(XnnpackPartitioner):
        def partition(self, exported_program):
            result = super().partition(exported_program)
            members: dict[str, list] = {}
            for node in exported_program.graph_module.graph.nodes:
                tag = node.meta.get("delegation_tag")
                if tag is not None:
                    members.setdefault(tag, []).append(node)
            for tag, nodes in members.items():
                compute = [n for n in nodes if n.op == "call_function"]
                if compute and all(_is_scalar_work(n) for n in compute):
                    for n in nodes:
                        del n.meta["delegation_tag"]
                    result.partition_tags.pop(tag, None)
            return result

    return _Partitioner()
