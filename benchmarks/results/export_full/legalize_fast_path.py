"""Lowering time with and without stable_legalize_graph's fast path (a graph already in a valid order is kept).

    python legalize_fast_path.py force OUT_DIR RECIPE MODEL.nemo   # every re-sort rebuilds the graph (as before)
    python legalize_fast_path.py fast OUT_DIR RECIPE MODEL.nemo    # the shipped behaviour

Runs ``parakeet-export --backend xnnpack`` in this process and prints the re-sorts kept / rebuilt and the seconds
spent in them; compare the two .pte files with ``cmp``.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
import time

mode, out, recipe, model = sys.argv[1:5]
sys.argv = ["parakeet-export", "--model", model, "--backend", "xnnpack", "--quantize", recipe, "--output-dir", out]

from parakeet_executorch.export.xnnpack import node_order  # noqa: E402

sort = node_order.stable_legalize_graph
if mode == "force":
    node_order._in_valid_order = lambda graph: False
spent = [0.0]


def timed(gm):
    t0 = time.perf_counter()
    try:
        return sort(gm)
    finally:
        spent[0] += time.perf_counter() - t0


node_order.stable_legalize_graph = timed
with contextlib.suppress(SystemExit):
    runpy.run_module("parakeet_executorch.export.cli", run_name="__main__")
print("re-sorts", node_order.SORT_STATS, "seconds in them", round(spent[0], 2))
