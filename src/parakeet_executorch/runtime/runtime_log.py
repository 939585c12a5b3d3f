"""Capture what ExecuTorch's runtime logs while a .pte is loaded, to put its detail into our one-line error.

The Python runtime raises only ``Failed to load program, error: 0x:23``; the reason ("File size is too small...")
is a separate ``[program.cpp:114] ...`` log line, which the pybindings write to Python's ``sys.stderr``.
``captured_runtime_log`` swaps ``sys.stderr`` for a buffer during a call and hands the lines back; the caller
replays them when the call succeeded (so nothing is hidden that was shown before) and folds the last one into its
message when it failed.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr

_LOG_LINE = re.compile(r"^\[[\w./-]+:\d+\]\s?(.*)$")


class RuntimeLog:
    """Text written to ``sys.stderr`` while the capture was open (available once it has closed)."""

    def __init__(self) -> None:
        self.text = ""

    @property
    def last_message(self) -> str:
        """The message part of the last ``[file.cpp:line] message`` line, or "" when there was none."""
        for line in reversed(self.text.splitlines()):
            match = _LOG_LINE.match(line.strip())
            if match and match.group(1):
                return match.group(1).strip()
        return ""

    def replay(self) -> None:
        """Write the captured text where it would have gone without the capture: stderr, or the library log of
        ``library_log.quiet_cli``."""
        from ..library_log import library_stream

        if self.text:  # into the library log while a CLI keeps third-party output quiet
            stream = library_stream()
            stream.write(self.text)
            stream.flush()


@contextmanager
def captured_runtime_log() -> Iterator[RuntimeLog]:
    """Collect what is written to ``sys.stderr`` in the body; the RuntimeLog fills in when the body exits."""
    log = RuntimeLog()
    buffer = io.StringIO()
    try:
        with redirect_stderr(buffer):
            yield log
    finally:
        log.text = buffer.getvalue()
