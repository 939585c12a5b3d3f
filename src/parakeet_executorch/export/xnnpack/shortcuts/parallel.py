"""``parallel_preprocess``: XNNPACK's preprocess of the partitions in forked worker processes."""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from unittest import mock

import torch

from .inert_passes import skip_inert_passes
from .retraces import skip_unchanged_retraces

_jobs: list = []  # (backend class, edge program, compile specs), read by forked workers


def _counters() -> list:
    """The stats of the shortcuts that also run inside preprocess workers (their counts go back to the parent)."""
    return [skip_unchanged_retraces.stats, skip_inert_passes.stats]


def _preprocess_job(index: int):
    backend, program, specs = _jobs[index]
    before = [dict(stats) for stats in _counters()]
    result = backend.preprocess(program, specs)
    return result, [{key: stats[key] - old.get(key, 0) for key in stats} for stats, old in zip(_counters(), before)]


def _single_threaded_worker():
    torch.set_num_threads(1)  # a forked child must not enter the parent's OpenMP pool


@contextmanager
def parallel_preprocess(workers: int | None = None):
    """Within this context, XNNPACK preprocesses the partitions of all methods in ``workers`` forked processes
    (default: the CPUs this process may use), instead of one after the other.

    Each partition's preprocess reads only its own edge program and returns bytes (the XNNPACK flatbuffer and the
    weights it names), so the order of work cannot change the result; results are put back in the partition
    order executorch expects. Linux only: elsewhere (macOS forbids forking a process that has started
    Objective-C or Metal), with one CPU, or with fewer than two partitions, it runs as shipped.

    Raises:
        concurrent.futures.process.BrokenProcessPool: a worker died (for example killed for memory); the export
            fails rather than waiting for a partition that will never come.
    """
    import multiprocessing
    import sys
    from concurrent.futures import ProcessPoolExecutor

    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

    def preprocess_multimethod(cls, edge_programs, compile_specs):
        order = [(name, i) for name, programs in edge_programs.items() for i in range(len(programs))]
        if workers < 2 or len(order) < 2 or not sys.platform.startswith("linux"):
            return super(XnnpackBackend, cls).preprocess_multimethod(edge_programs, compile_specs)
        _jobs[:] = [(cls, edge_programs[name][i], compile_specs[name][i]) for name, i in order]
        # A collection in a forked child touches every object the parent holds (a model, torch, NeMo) and so
        # copies the parent's heap page by page: ~1 s per collection per worker. Frozen objects are not scanned.
        gc.freeze()
        try:
            with ProcessPoolExecutor(
                min(workers, len(order)),
                mp_context=multiprocessing.get_context("fork"),
                initializer=_single_threaded_worker,
            ) as pool:
                results = list(pool.map(_preprocess_job, range(len(order))))
        finally:
            gc.unfreeze()
            _jobs.clear()
        out: dict = {name: [] for name in edge_programs}
        for (name, _), (result, counts) in zip(order, results):
            out[name].append(result)
            for stats, child in zip(_counters(), counts):
                for key, value in child.items():
                    stats[key] += value
        return out

    # mock restores what the class had: its own method, or none (then the inherited one applies again).
    with mock.patch.object(XnnpackBackend, "preprocess_multimethod", classmethod(preprocess_multimethod)):
        yield
