"""``fast_merge_checks``: the XNNPACK partitioner's cycle check as a set intersection in C.

executorch 1.5.1's ``GroupBasedPartitioner._merge_partitions`` tries every pair of candidate partitions, and its
``_can_merge_partitions`` refuses a merge when a node outside the pair, fed by it, leads back into it: for each
such node it scans the node's whole transitive downstream set with a Python generator (``any(n in combined for n
in downstream)``). Where the graph has ops XNNPACK does not take, most pairs straddle one and are refused after a
scan of most of the graph: for fpa4w (a non-delegated linear every few nodes) that was ~10^9 generator steps and
most of its lowering at full size.

``set.isdisjoint`` answers the same question (does the downstream set meet the pair?) in C, iterating over the
smaller set. Everything else, the order of the checks and the final ``validate_partition``, is executorch's.
"""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock


def _can_merge_partitions(self, p1, p2, partitions_by_id):
    # executorch 1.5.1's GroupBasedPartitioner._can_merge_partitions with the downstream scan done by isdisjoint.
    from torch.fx.passes.utils.fuser_utils import validate_partition

    p1_nodes = set(partitions_by_id[p1].nodes.keys())
    p2_nodes = set(partitions_by_id[p2].nodes.keys())
    combined_nodes = p1_nodes.union(p2_nodes)
    user_nodes = [user for node in combined_nodes for user in node.users if user not in combined_nodes]
    for external_node in user_nodes:
        if not self.dependency_viewer.downstreams_of(external_node).isdisjoint(combined_nodes):
            return False
    return bool(validate_partition(list(combined_nodes)))


@contextmanager
def fast_merge_checks():
    """Within this context, ``GroupBasedPartitioner`` checks merges for cycles with ``set.isdisjoint``; restores
    executorch's method on exit, also on error."""
    from executorch.exir.backend.canonical_partitioners.group_partitioner import GroupBasedPartitioner

    with mock.patch.object(GroupBasedPartitioner, "_can_merge_partitions", _can_merge_partitions):
        yield
