"""resident_pages.py PTE AUDIO OUT.npy [RUNNER]: run the C++ runner over AUDIO in one pass and save which pages of
PTE were mapped and present in it (from /proc/PID/pagemap; root) at the snapshot with the most, as file page
indices (offset / 4096). Used to find what the file-backed part of the peak RSS is (here: the decoder's embedding
table is the only constant read in part, and how much of it stays mapped follows the page cache)."""

import os
import subprocess
import sys
import time

import numpy as np

pte, audio, out = sys.argv[1:4]
runner = sys.argv[4] if len(sys.argv) > 4 else "cmake-out/examples/parakeet/parakeet_runner"
args = [runner, "--model_path", pte, "--audio_path", audio, "--chunk_seconds", "0", "--quiet"]
proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
real = os.path.realpath(pte)
best = np.zeros(0, dtype=np.int64)
while proc.poll() is None:
    try:
        with open(f"/proc/{proc.pid}/maps") as maps, open(f"/proc/{proc.pid}/pagemap", "rb") as pagemap:
            pages = []
            for line in maps.read().splitlines():
                parts = line.split()
                if len(parts) < 6 or parts[5] != real:
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                pagemap.seek(start // 4096 * 8)
                entries = np.frombuffer(pagemap.read((end - start) // 4096 * 8), dtype=np.uint64)
                pages.append(int(parts[2], 16) // 4096 + np.nonzero(entries >> np.uint64(63))[0])
        current = np.unique(np.concatenate(pages)) if pages else best
        if current.size >= best.size:
            best = current
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    time.sleep(0.3)
np.save(out, best)
print(pte, "resident pages", best.size, "=", best.size * 4, "KiB")
