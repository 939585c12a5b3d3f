"""Keep third-party chatter out of the command lines' output: it goes to a log file unless ``-v/--verbose``.

What the CLIs printed besides their own lines, and where it comes from:

* torchao's ``Failed to load .../_C_mxfp8...so`` (logger ``torchao``, no handler: Python's last-resort handler),
  nv_one_logger's ``OneLogger: ...`` and ``No exporters were provided`` (loggers ``nv_one_logger.*``, same);
* torch's ``W1202 ... _pytree.py`` lines (logger ``torch``, which has its own stderr handler and does not
  propagate);
* NeMo's ``[NeMo I ...]`` / ``[NeMo W ...]`` lines and config dumps (logger ``nemo_logger``, its own stdout and
  stderr handlers, added when NeMo is first imported), and the warnings NeMo routes into it (the LSTM
  ``_flat_weights ... assigned during export`` UserWarning);
* ExecuTorch's runtime log, e.g. XNNPACK's ``[cpuinfo_utils.cpp:71] ...`` lines, which the pybindings write to
  Python's ``sys.stderr`` while a program loads (captured there by ``runtime.runtime_log``).

:func:`quiet_cli` wraps a CLI's ``main``: a root-logger handler, warnings captured into logging, and the stream
handlers that loggers bring of their own pointed at the file instead of the terminal, all undone when ``main``
returns. torch and NeMo create those handlers when they are first imported, which happens inside ``main``; so while
the log is open, a ``logging.StreamHandler`` made for the terminal is made for the file instead (and put back on
the terminal when the log closes). Only logging and warnings are redirected, selected by where they are emitted,
never our own ``print``s: progress, results and ``error:`` lines still show. When ``main`` fails, one line names the log
file.
"""

from __future__ import annotations

import functools
import logging
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

VERBOSE_FLAGS = ("-v", "--verbose")
VERBOSE_HELP = (
    "show the libraries' own log lines and warnings (NeMo, torch, torchao, ExecuTorch) instead of "
    "writing them to a log file in the user cache directory"
)

_active: _LibraryLog | None = None  # the one log open in this process (nested CLIs share the outer one)


class _LibraryLog:
    def __init__(self, path: Path, stream: TextIO):
        self.path = path
        self.stream = stream
        self.handler = logging.StreamHandler(stream)
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.redirected: list[tuple[logging.StreamHandler, TextIO | None]] = []
        self.root_level = logging.getLogger().level

    def open(self) -> None:
        original_init = self.original_init = logging.StreamHandler.__init__
        log = self

        def init(handler, stream=None):
            original_init(handler, stream)
            if handler is not log.handler and log._is_terminal(handler.stream):
                log.redirected.append((handler, handler.setStream(log.stream)))

        logging.StreamHandler.__init__ = init  # type: ignore[method-assign]  # undone in close()
        root = logging.getLogger()
        root.addHandler(self.handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)  # library INFO lines belong in the file too
        logging.captureWarnings(True)  # warnings.showwarning -> logger "py.warnings" -> root -> the file
        self.adopt_stream_handlers()

    @staticmethod
    def _is_terminal(stream) -> bool:
        return any(stream is s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__) if s is not None)

    def adopt_stream_handlers(self) -> None:
        """Point every existing logger's own handler that writes to the terminal (torch's, NeMo's) at the file."""
        loggers = [
            logging.getLogger(),
            *(
                logger
                for logger in list(logging.Logger.manager.loggerDict.values())
                if isinstance(logger, logging.Logger)
            ),
        ]  # not PlaceHolders
        for logger in loggers:
            for handler in logger.handlers:
                if (
                    type(handler) is logging.StreamHandler
                    and self._is_terminal(handler.stream)
                    and handler is not self.handler
                ):
                    self.redirected.append((handler, handler.setStream(self.stream)))

    def close(self) -> None:
        logging.StreamHandler.__init__ = self.original_init  # type: ignore[method-assign]  # undoes our patch
        for handler, stream in reversed(self.redirected):
            if handler.stream is self.stream:
                handler.setStream(stream)
        logging.captureWarnings(False)
        root = logging.getLogger()
        root.removeHandler(self.handler)
        root.setLevel(self.root_level)
        self.stream.close()


def library_stream() -> TextIO:
    """Where library output should go now: the open log file inside :func:`quiet_cli`, else ``sys.stderr``."""
    return _active.stream if _active is not None else sys.stderr


def active_log_path() -> Path | None:
    """The log file :func:`quiet_cli` has open in this process, or None (``-v``, or outside a quiet CLI)."""
    return _active.path if _active is not None else None


def join_log(path: str | Path | None) -> None:
    """In a worker process of a quiet CLI: send its library logging and warnings to the parent's log file ``path``
    (appended) for the rest of the process, before the libraries are imported. None, an unwritable file, or a log
    already open: output is left as it is."""
    global _active
    if path is None or _active is not None:
        return
    try:
        stream = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 (open until the process ends)
    except OSError:
        return
    _active = _LibraryLog(Path(path), stream)
    _active.open()


def log_path(prog: str) -> Path:
    """``<user cache>/logs/<prog>.log`` (see ``user_cache.cache_root``); overwritten by each run."""
    from .user_cache import cache_root

    return cache_root() / "logs" / f"{prog}.log"


def quiet_cli(prog: str) -> Callable:
    """Decorate a CLI ``main(argv=None) -> int``: unless ``argv`` (or ``sys.argv[1:]``) holds ``-v``/``--verbose``,
    third-party logging and warnings go to :func:`log_path` while it runs. Nested calls (the demo runs the export's
    ``main``) share the outer log. When the file cannot be opened (read-only cache), output is left as it is.
    When ``main`` raises (a crash, not a handled error), one ``prog: library messages are in PATH`` line goes to
    stderr; a handled error (non-zero return, argparse's exit) keeps its own one-line message as the last line."""

    def decorate(main: Callable) -> Callable:
        @functools.wraps(main)
        def wrapped(argv: list[str] | None = None) -> int:
            global _active
            args = sys.argv[1:] if argv is None else argv
            if _active is not None or any(a in VERBOSE_FLAGS for a in args):
                return main(argv)
            path = log_path(prog)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                stream = open(path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed in close())
            except OSError:
                return main(argv)
            _active = _LibraryLog(path, stream)
            _active.open()
            crashed = True
            try:
                with warnings.catch_warnings():  # filters set by libraries while main runs are undone with it
                    rc = main(argv)
                crashed = False
                return rc
            except SystemExit:  # argparse: --help (0) or a usage error (2), already explained in one line
                crashed = False
                raise
            finally:
                log, _active = _active, None
                log.close()
                if crashed and path.stat().st_size:
                    print(f"{prog}: library messages are in {path} (-v shows them)", file=sys.stderr)

        return wrapped

    return decorate
