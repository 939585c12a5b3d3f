"""The command lines' argument parser: argparse's, with a usage error in one line.

argparse prints its whole usage block before the error, fifteen lines and more for ``parakeet-transcribe``, so the
line that says what is wrong scrolls away. Our bad-input rule is one line naming the problem, exit status 2, as
the C++ runner does; ``--help`` still prints the usage.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are ``<prog>: error: <message>`` alone, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")
