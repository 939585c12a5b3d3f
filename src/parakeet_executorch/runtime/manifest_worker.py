"""Manifest mode's work on one file, in this process or in a worker process of ``manifest.py``'s pool.

The module's top-level imports are the standard library's and ``manifest_io``/``longform`` (themselves light), so
that a spawned worker unpickles its arguments and routes the libraries' logging into the parent's log file
(``library_log.join_log``) before torch and ExecuTorch are imported.
"""

from __future__ import annotations

import io
import os
import threading
import time
import warnings
from contextlib import redirect_stderr
from pathlib import Path

from .longform import LongFormOptions
from .manifest_io import ManifestEntry

Result = tuple[ManifestEntry, dict, float]


def load(model_path: str | Path, tokenizer: str | Path | None, check_fingerprint: bool, long_form: LongFormOptions):
    """A ``Transcriber`` for the .pte, with the context sizes checked. Raises PteModelError (ContextError) or
    TokenizerError."""
    from .longform import context_frames
    from .transcribe import Transcriber

    transcriber = Transcriber.from_pte(model_path, tokenizer, check_fingerprint=check_fingerprint)
    if long_form.chunk_seconds != 0:
        context_frames(transcriber, long_form)
    return transcriber


def transcribe_entry(
    transcriber, entry: ManifestEntry, long_form: LongFormOptions, non_finite: str, levels: tuple[str, ...]
) -> Result:
    """Transcribe one entry's file: (entry, result fields, audio seconds). The fields are ``pred_text`` and the
    timestamp ``levels`` (plus ``warnings`` when the audio raised AudioWarnings), or ``error``: one line naming the
    file, for audio that cannot be read or decoded (missing, undecodable, NaN/Inf) or a model failure on it."""
    from ..audio import AudioError, AudioWarning
    from .longform import transcribe_file
    from .pte_checks import PteModelError

    path = entry.audio
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AudioWarning)
        try:
            transcript = transcribe_file(transcriber, path, long_form, True, non_finite)
        except (AudioError, PteModelError, OSError) as exc:
            text = " ".join(str(exc).split())
            return entry, {"error": text if str(path) in text else f"{path}: {text}"}, 0.0
    for w in caught:
        if not issubclass(w.category, AudioWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    fields: dict = {"pred_text": transcript.text}
    fields.update({k: v for k, v in transcript.as_dict(levels).items() if k != "text"})
    ours = [" ".join(str(w.message).split()) for w in caught if issubclass(w.category, AudioWarning)]
    if ours:
        fields["warnings"] = ours
    return entry, fields, transcript.audio_seconds


# In a worker process: its transcriber and the per-file settings, set by init_worker.
_state: tuple = ()


def init_worker(
    log: str | None,
    model_path: str,
    tokenizer: str | None,
    check_fingerprint: bool,
    long_form: LongFormOptions,
    non_finite: str,
    levels: tuple[str, ...],
    threads: int,
    parent: int,
) -> None:
    """The pool's initializer: library output to the parent's log file ``log`` (None: left on stderr, as with
    ``-v``), Ctrl-C left to the parent, an exit within a second of the death of ``parent`` (the pool owner's PID,
    taken there), ``threads`` torch threads, and the model loaded once."""
    import signal

    from ..library_log import join_log

    global _state
    join_log(log)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The owner's PID comes from the owner: a worker that starts after its owner was killed (a slow spawn) would
    # read init's PID from getppid() and wait on it forever.
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    with redirect_stderr(io.StringIO()):  # the runtime's load chatter; the parent loaded (and showed) it once
        limit_threads(threads)
        transcriber = load(model_path, tokenizer, check_fingerprint, long_form)
    _state = (transcriber, long_form, non_finite, levels)


def limit_threads(threads: int) -> None:
    """Run this process on ``threads`` CPU threads: torch's intra-op pool (under the ``pybind`` runtime), and
    ExecuTorch's threadpool, on which
    the XNNPACK delegate runs and which starts with one thread per core of the machine (N workers, or N Ray actors
    on one node, would each take every core).

    Raises:
        ThreadsError: this ExecuTorch cannot resize its pool (see ``threads.set_cpu_threads``).
    """
    from .pte_runtime import resolve_runtime
    from .threads import set_cpu_threads

    if resolve_runtime("auto") == "pybind":  # the native runtime keeps torch out of the process
        import torch

        torch.set_num_threads(threads)
    set_cpu_threads(threads)


def _exit_with_parent(parent: int) -> None:
    # A parent killed by SIGKILL cannot stop its pool; its workers would wait for work forever, each holding a model.
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def work(entry: ManifestEntry) -> Result:
    """Transcribe one entry in a worker process (after ``init_worker``)."""
    return transcribe_entry(_state[0], entry, *_state[1:])
