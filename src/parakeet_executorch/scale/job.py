"""``transcribe_dataset``: a corpus as a Ray Data dataset of transcripts, one row per file (``rows.py``).

Everything that can be checked is checked on the driver before Ray runs anything (the manifest, the options, the
model: loaded once there and dropped); the dataset is lazy: Ray transcribes when it is consumed
(``output.write_results``, ``iter_rows``, ``write_parquet``, ...), and again each time, unless it is materialized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..file_hash import file_sha256
from ..runtime.formats import LEVELS
from ..runtime.longform import FILE_CONTEXT, LongFormOptions
from ..runtime.manifest import LineSettings, line_settings
from ..runtime.manifest_io import ManifestEntry
from .actor import ActorConfig, TranscribeActor
from .ray_import import import_ray
from .rows import input_items
from .source import Source, read_source


@dataclass(frozen=True)
class ScaleOptions(LineSettings):
    """How a Ray job runs (``transcribe_dataset``'s keyword arguments): the ``runtime.manifest.LineSettings``
    (timestamps, long_form, non_finite, tokenizer, check_fingerprint, as manifest mode's) and

    Attributes:
        concurrency: actors, each holding one copy of the model (a fixed-size ``ActorPoolStrategy``).
        num_cpus_per_actor: CPUs Ray reserves for each actor (> 0); the actor runs that many threads, torch's
            and ExecuTorch's (rounded down, at least 1). ``concurrency * num_cpus_per_actor`` CPUs must exist in
            the cluster, or the actors beyond them wait (an autoscaling cluster adds nodes).
        batch_size: files per block of the dataset and per actor call: the unit Ray schedules (and retries). Small
            batches spread files of unequal length over the actors; large ones cut Ray's per-block overhead on
            corpora of millions of files.
    """

    concurrency: int = 1
    num_cpus_per_actor: float = 1.0
    batch_size: int = 4

    def check(self) -> None:
        """Raise ValueError naming the first option out of range."""
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {self.concurrency!r}")
        if not self.num_cpus_per_actor > 0:
            raise ValueError(f"num_cpus_per_actor must be > 0, got {self.num_cpus_per_actor!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        if self.timestamps not in LEVELS:
            raise ValueError(f"timestamps must be one of {', '.join(LEVELS)}, got {self.timestamps!r}")
        if self.non_finite not in ("error", "zero"):
            raise ValueError(f"non_finite must be 'error' or 'zero', got {self.non_finite!r}")


@dataclass(frozen=True)
class Job:
    """A checked Ray job (``prepare``): the entries to transcribe and what each actor needs. ``dataset()`` builds
    the lazy ``ray.data.Dataset`` (starting a local Ray, or joining ``RAY_ADDRESS``'s cluster, when ``ray.init``
    was not called)."""

    entries: list[ManifestEntry]
    options: ScaleOptions
    config: ActorConfig

    def dataset(self):
        ray = import_ray()
        o = self.options
        blocks = math.ceil(len(self.entries) / o.batch_size)
        ds = ray.data.from_items(input_items(self.entries), override_num_blocks=blocks)
        return ds.map_batches(
            TranscribeActor,
            fn_constructor_kwargs={"config": self.config},
            compute=ray.data.ActorPoolStrategy(size=o.concurrency),
            num_cpus=o.num_cpus_per_actor,
            batch_size=o.batch_size,
            batch_format="pyarrow",
        )


def prepare(source: Source, model: str | Path, options: ScaleOptions | None = None) -> Job:
    """Check a Ray job on the driver, starting nothing: the options, the source, Ray's presence, and the model
    (loaded once with the tokenizer and context sizes, then dropped).

    Raises:
        ValueError: an option out of range (``ScaleOptions.check``).
        ManifestError: a bad manifest or list of paths (``source.read_source``).
        RayNotInstalled: Ray Data is missing (one line: ``pip install "parakeet-executorch[scale]"``).
        PteModelError / TokenizerError: the model or tokenizer cannot be loaded; ContextError: context sizes the
            .pte cannot take.
    """
    from ..runtime.manifest_worker import load

    options = options or ScaleOptions()
    options.check()
    entries = read_source(source)
    import_ray()
    load(model, options.tokenizer, options.check_fingerprint, options.long_form)
    settings = line_settings(model, options)
    config = ActorConfig(
        model=str(Path(model).resolve()),
        tokenizer=None if options.tokenizer is None else str(Path(options.tokenizer).resolve()),
        check_fingerprint=options.check_fingerprint,
        long_form=options.long_form,
        non_finite=options.non_finite,
        levels=LEVELS[options.timestamps],
        threads=max(1, int(options.num_cpus_per_actor)),
        pte_sha256=file_sha256(model),
        settings=settings,
    )
    return Job(entries, options, config)


def transcribe_dataset(
    source: Source,
    model: str | Path,
    *,
    concurrency: int = 1,
    num_cpus_per_actor: float = 1.0,
    batch_size: int = 4,
    timestamps: str = "none",
    long_form: LongFormOptions | None = None,
    non_finite: str = "error",
    tokenizer: str | Path | None = None,
    check_fingerprint: bool = True,
):
    """Transcribe a corpus with Ray Data: a lazy ``ray.data.Dataset`` of one row per input file.

    Args:
        source: a NeMo-style JSONL manifest path, or a list of audio paths (``source.read_source``).
        model: the .pte (its tokenizer.model next to it unless ``tokenizer``), at the same path on every node.
        concurrency, num_cpus_per_actor, batch_size, timestamps, long_form (default ``FILE_CONTEXT``: 4 s of
            left and 2 s of right context, the chunk filling the .pte's bound), non_finite, tokenizer,
            check_fingerprint: see ``ScaleOptions``.
    Returns:
        the dataset (``rows.row_schema()``: ``input_line``, ``audio_filepath``, ``resolved_audio_filepath``,
        ``pred_text``, ``error``, ``audio_seconds`` and ``line``, manifest mode's output line for the file, exactly).
        Rows come in no particular order; ``write_results`` writes them to JSONL or Parquet.
    Raises:
        what ``prepare`` raises, before Ray runs anything.
    """
    options = ScaleOptions(
        concurrency=concurrency,
        num_cpus_per_actor=num_cpus_per_actor,
        batch_size=batch_size,
        timestamps=timestamps,
        long_form=long_form or LongFormOptions(*FILE_CONTEXT),
        non_finite=non_finite,
        tokenizer=tokenizer,
        check_fingerprint=check_fingerprint,
    )
    return prepare(source, model, options).dataset()
