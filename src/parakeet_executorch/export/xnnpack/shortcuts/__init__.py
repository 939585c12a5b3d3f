"""Shortcuts through executorch 1.5.1's lowering that skip work which cannot change the result.

Lowering the full-size encoder to XNNPACK took ~400 s, nearly all of it whole-graph replays through fake tensors
with a symbolic time dimension (about 0.6 s per conformer layer per replay), on one core. ``faster_lowering``
skips the replays that change nothing for a Parakeet encoder and spreads the per-partition work over the cores:

* ``decompose_in_one_retrace``: functionalization and decomposition in one retrace instead of two.
* ``skip_inert_passes``: the replays of passes that have no op to rewrite (Edge conversion and XNNPACK).
* ``skip_unchanged_retraces``: the metadata replay after an XNNPACK preprocess pass that edited nothing.
* ``skip_empty_decompositions``: a ``run_decompositions`` call, after the graph is functional, whose table has
  nothing to decompose in the graph.
* ``parallel_preprocess``: XNNPACK's preprocess of the partitions in forked worker processes.
* ``fast_merge_checks``: the XNNPACK partitioner's cycle check for each pair of candidate partitions as a set
  intersection in C instead of a Python scan of the downstream graph (quadratic; most of fpa4w's lowering).
* ``defer_partition_recompiles``: one Python code generation of the graph after all partitions are cut, instead of
  one per partition (quadratic in the partition count: fpa4w's 219).
* ``fast_affine_metadata``: the output shapes and dtypes of torchao's quantize / dequantize / choose-qparams ops
  during those replays, without running the ops' arithmetic on fake tensors (also while ``torch.export`` traces
  a quantized model and in ``to_executorch``: ``faster_tracing``).

Each lives in its own module of this package. Tests lower the same program with and without these shortcuts and
require byte-identical .pte files.

They patch private functions and classes of executorch 1.5.1 (``EXPECTED_EXECUTORCH``), mirroring their code; on
any other installed version :func:`faster_lowering` and :func:`faster_tracing` do nothing, after one line on stderr
(:func:`shortcuts_apply`). ``parakeet-export --no-lowering-shortcuts`` turns them off as well.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from .affine_metadata import fast_affine_metadata
from .decompositions import decompose_in_one_retrace, skip_empty_decompositions
from .inert_passes import _inert_pass_predicates, skip_inert_passes  # noqa: F401 (tests import the helper here)
from .merge_checks import fast_merge_checks
from .parallel import parallel_preprocess
from .recompiles import defer_partition_recompiles
from .retraces import _replay_transforms, graph_fingerprint, skip_unchanged_retraces  # noqa: F401 (as above)

__all__ = [
    "EXPECTED_EXECUTORCH",
    "decompose_in_one_retrace",
    "defer_partition_recompiles",
    "fast_affine_metadata",
    "fast_merge_checks",
    "faster_lowering",
    "faster_tracing",
    "graph_fingerprint",
    "parallel_preprocess",
    "shortcuts_apply",
    "skip_empty_decompositions",
    "skip_inert_passes",
    "skip_unchanged_retraces",
]

# The executorch release whose lowering code the shortcuts mirror (checked at run time, see shortcuts_apply).
EXPECTED_EXECUTORCH = "1.5.1"
_announced: set[str | None] = set()  # versions already reported on stderr: one line per process, not one per context


def _executorch_version() -> str | None:
    """The installed executorch distribution's version (``importlib.metadata``), or None when it has none."""
    from importlib import metadata

    try:
        return metadata.version("executorch")
    except metadata.PackageNotFoundError:
        return None


def shortcuts_apply() -> bool:
    """True when the installed executorch is ``EXPECTED_EXECUTORCH``, the version the shortcuts were written against.

    On any other version (or none found) returns False and writes one line on stderr, once per process, naming the
    version found and the one expected and saying that executorch's stock lowering runs: the patched internals may
    have changed, and a shortcut that no longer mirrors them could change the program.
    """
    found = _executorch_version()
    if found == EXPECTED_EXECUTORCH:
        return True
    if found not in _announced:
        _announced.add(found)
        print(
            f"parakeet_executorch: lowering shortcuts off: found executorch {found or '(not installed)'}, they "
            f"were written against {EXPECTED_EXECUTORCH}; lowering runs stock",
            file=sys.stderr,
            flush=True,
        )
    return False


@contextmanager
def faster_lowering(programs: dict | None = None, partitioners: dict | None = None, *, shortcuts: bool = True):
    """All the lowering shortcuts of this package, for the span of one ``to_edge_transform_and_lower(programs,
    partitioner=partitioners)`` call (the two arguments let ``decompose_in_one_retrace`` find the programs).

    With ``shortcuts=False``, or on an executorch other than ``EXPECTED_EXECUTORCH`` (see :func:`shortcuts_apply`),
    nothing is patched: executorch's stock lowering runs. Yields whether the shortcuts are on.
    """
    if not (shortcuts and shortcuts_apply()):
        yield False
        return
    with (
        decompose_in_one_retrace(programs, partitioners),
        skip_inert_passes(),
        skip_unchanged_retraces(),
        skip_empty_decompositions(),
        fast_affine_metadata(),
        parallel_preprocess(),
        defer_partition_recompiles(),
        fast_merge_checks(),
    ):
        yield True


@contextmanager
def faster_tracing(*, shortcuts: bool = True):
    """The shortcut that applies outside the lowering: while ``torch.export`` traces a quantized model, and in
    ``EdgeProgramManager.to_executorch``, whose spec-propagation replays evaluate every delegate's original graph
    through fake tensors, torchao's affine ops take ``fast_affine_metadata`` (the graphs are the same; at 4
    full-width layers of 8da4w, ``to_executorch`` 21 -> 10 s).

    ``shortcuts=False`` or another executorch version: nothing is patched, as in :func:`faster_lowering`. Yields
    whether the shortcut is on.
    """
    if not (shortcuts and shortcuts_apply()):
        yield False
        return
    with fast_affine_metadata():
        yield True
