"""evict_page_cache.py FILE...: drop FILEs' clean pages from the page cache (posix_fadvise DONTNEED; no root).

Why: the .pte is mapped, not read, and how many of its pages a run maps depends on the page cache's state (a file
the exporter just wrote showed ~10 MiB more RssFile than the same bytes read back with cat). Comparisons here
evict both files and read each back with cat before every run, so that both start from the same state."""

import os
import sys

for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
