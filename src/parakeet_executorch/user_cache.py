"""Where this package keeps files between runs (exports of the demo model, library logs)."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "parakeet_executorch"


def cache_root() -> Path:
    """The user cache directory of this package (not created here).

    ``$PARAKEET_CACHE_DIR`` when set; else platformdirs' ``user_cache_dir`` when platformdirs is installed; else
    ``$XDG_CACHE_HOME/parakeet_executorch`` (``~/.cache/parakeet_executorch``); on Linux all three agree.
    """
    override = os.environ.get("PARAKEET_CACHE_DIR")
    if override:
        return Path(override)
    try:
        from platformdirs import user_cache_dir
    except ImportError:
        return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / APP_NAME
    return Path(user_cache_dir(APP_NAME, appauthor=False))
