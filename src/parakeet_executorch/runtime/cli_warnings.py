"""The command name and the warning printer shared by ``parakeet-transcribe``'s modes (``cli.py``,
``manifest_cli.py``)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

PROG = "parakeet-transcribe"


@contextmanager
def printed_warnings(prog: str = PROG) -> Iterator[None]:
    """Print this package's warnings (AudioWarning, TokenizerWarning) as ``prog: warning: ...`` lines on stderr.

    Other warnings raised in the body are re-issued unchanged after it.
    """
    from ..audio import AudioWarning
    from ..tokenizer import TokenizerWarning

    ours = (AudioWarning, TokenizerWarning)
    pending: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            for category in ours:
                warnings.simplefilter("always", category)
            try:
                yield
            finally:
                pending = list(caught)
    finally:
        # Emitted outside catch_warnings, so that foreign warnings obey the caller's filters again; and also when
        # the body raised (a warning about a file may explain its error).
        for w in pending:
            if issubclass(w.category, ours):
                print(f"{prog}: warning: {w.message}", file=sys.stderr)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
