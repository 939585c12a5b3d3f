"""Return large freed buffers to the OS at once, so that a long run's peak RSS stays its first window's.

glibc serves an allocation from ``mmap`` above a threshold (128 KiB at start) and from its heap below it, and it
raises that threshold each time an mmap-ed block is freed (up to 32 MiB). Buffered decoding allocates and frees
window-sized arrays (3.8 MB of audio at a 60 s window, the features, the encoder output) over and over; once the
threshold has grown past them they come from the heap, whose freed space is kept, and peak RSS creeps up. Fixing
the threshold (glibc's ``mallopt(M_MMAP_THRESHOLD)``, which also stops the adjustment) keeps every such buffer in
its own mapping: at full size and the 60 s bound the Python runner's 10-minute peak fell from 626 to 611 MiB
(``benchmarks/results/longform_full/python_native/``). The C++ runner sets the same (``cli/main.cpp``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: Allocations at least this large (bytes) are mmap-ed and unmapped when freed.
MMAP_THRESHOLD = 256 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def return_large_buffers_to_the_os() -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD`` for this process. Returns whether it was set: False where
    the C library is not glibc (macOS, musl), which have no such knob and need none of this."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
