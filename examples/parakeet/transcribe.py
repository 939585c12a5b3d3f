#!/usr/bin/env python3
"""Transcribe audio with an exported .pte (same CLI as ``parakeet-transcribe``)."""

import sys

from parakeet_executorch.runtime.cli import main

if __name__ == "__main__":
    sys.exit(main())
