"""The Ray Data actor: one loaded .pte per actor, then manifest mode's per-file work on each batch of entries.

Ray creates ``concurrency`` instances of ``TranscribeActor`` (``ray.data.ActorPoolStrategy``), each in its own
worker process on some node, each reserving ``num_cpus_per_actor`` CPUs and running as many threads
(``manifest_worker.limit_threads``). The model is loaded once per actor, from the same path on every node (shared
storage, or the same copy at the same place), and the actor checks that its copy is the one the driver hashed, so
that every row's ``pte_sha256`` is true.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path

from ..file_hash import file_sha256
from ..runtime.longform import LongFormOptions
from ..runtime.manifest_io import result_line
from ..runtime.manifest_worker import limit_threads, load, transcribe_entry
from .rows import Row, entries_of, table


class ModelMismatch(RuntimeError):
    """The .pte an actor found at the model path is not the one the driver hashed (another copy on that node)."""


@dataclass(frozen=True)
class ActorConfig:
    """What every actor needs, built on the driver (``job.prepare``) and pickled to the actors.

    Attributes:
        model: the .pte path, the same on every node.
        tokenizer: the tokenizer.model path (None: the one next to ``model``).
        check_fingerprint: require the tokenizer the .pte was exported with.
        long_form: context sizes in seconds.
        non_finite: ``"error"`` or ``"zero"`` for NaN/Inf samples.
        levels: the timestamp levels of each line (``formats.LEVELS`` value).
        threads: CPU threads per actor, torch's and ExecuTorch's (its reserved CPUs, at least 1).
        pte_sha256: the driver's SHA-256 of ``model`` (written in every line).
        settings: manifest mode's ``line_settings`` (written in every line).
    """

    model: str
    tokenizer: str | None
    check_fingerprint: bool
    long_form: LongFormOptions
    non_finite: str
    levels: tuple[str, ...]
    threads: int
    pte_sha256: str
    settings: dict


class TranscribeActor:
    """A callable class for ``Dataset.map_batches``: ``pyarrow.Table`` of input rows in, ``Table`` of result rows
    (``rows.row_schema()``) out, one per input row.

    Raises (on construction, which Ray reports as the job's failure): ModelMismatch, PteModelError, TokenizerError.
    A file that cannot be transcribed is an ``error`` row, as in manifest mode, never an exception.
    """

    def __init__(self, config: ActorConfig):
        sha = file_sha256(config.model)
        if sha != config.pte_sha256:
            raise ModelMismatch(
                f"{config.model} on this node has SHA-256 {sha}, not the driver's {config.pte_sha256}: every node "
                "must read the same .pte"
            )
        with redirect_stderr(io.StringIO()):  # the runtime's load chatter; the driver loaded (and checked) it once
            limit_threads(config.threads)
            self.transcriber = load(Path(config.model), config.tokenizer, config.check_fingerprint, config.long_form)
        self.config = config

    def __call__(self, batch):
        c = self.config
        rows = []
        for entry in entries_of(batch):
            _, fields, seconds = transcribe_entry(self.transcriber, entry, c.long_form, c.non_finite, c.levels)
            rows.append(Row(entry.line, result_line(entry, fields, c.pte_sha256, c.settings), seconds))
        return table(rows)
