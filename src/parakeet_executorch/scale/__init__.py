"""Transcribe a corpus on a Ray cluster through Ray Data (the ``scale`` extra: ``pip install
"parakeet-executorch[scale]"``); manifest mode (``runtime.manifest``) is the same job on one machine.

>>> from parakeet_executorch.scale import transcribe_dataset, write_results
>>> ds = transcribe_dataset("corpus.jsonl", "out/model.pte", concurrency=4)  # doctest: +SKIP
>>> write_results(ds, "results.parquet")                                     # doctest: +SKIP

Each row of the dataset is one input file; its ``line`` column is manifest mode's output line for that file,
exactly (``rows.py``). ``parakeet-transcribe-ray`` (``cli.py``) is the command line. Importing this package imports
nothing; each name loads its module when first used, and Ray is imported only when a job is prepared
(``RayNotInstalled``, one line saying what to install, when it is missing). Nothing else in the package imports
``scale``.
"""

from __future__ import annotations

__all__ = [
    "Job",
    "OutputError",
    "RayNotInstalled",
    "ResultsSummary",
    "ScaleOptions",
    "prepare",
    "transcribe_dataset",
    "write_results",
]

_LAZY = {
    "Job": "job",
    "ScaleOptions": "job",
    "prepare": "job",
    "transcribe_dataset": "job",
    "OutputError": "output",
    "ResultsSummary": "output",
    "write_results": "output",
    "RayNotInstalled": "ray_import",
}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
