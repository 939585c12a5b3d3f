"""Damaged audio files for fuzzing the audio loaders of both runners.

Small valid seed files (WAV PCM16 mono, WAV float32 stereo at 22.05 kHz, FLAC 8 kHz) are damaged by a list of
mutations: a header byte set, a header field overwritten by an extreme 16/32-bit value (sizes, channel counts,
sample rates and bit depths live there), a byte anywhere set, the file cut short, or bytes appended. The Python
test draws mutations with hypothesis; the C++ test draws a fixed set with ``random.Random`` (same vocabulary).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np

HEADER_BYTES = 64  # RIFF/fmt/data headers and FLAC's STREAMINFO all lie in the first 64 bytes of the seeds
EXTREMES = (0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)

# (kind, a, b): ("byte", offset < HEADER_BYTES, value), ("word", offset < HEADER_BYTES, extreme value; 2 or 4
# bytes as it fits), ("anybyte", position in [0, 1), value), ("truncate", fraction of the length kept, 0),
# ("append", length, fill byte).
Mutation = tuple[str, float, int]


def write_seeds(folder: str | Path) -> list[Path]:
    """Write the seed files (each a quarter second of a tone) into ``folder``; returns their paths."""
    import soundfile as sf

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    seeds = []
    for name, rate, channels, subtype, fmt in (
        ("pcm16.wav", 16000, 1, "PCM_16", "WAV"),
        ("float_stereo.wav", 22050, 2, "FLOAT", "WAV"),
        ("tone.flac", 8000, 1, "PCM_16", "FLAC"),
    ):
        t = np.arange(rate // 4) / rate
        tone = 0.3 * np.sin(2 * np.pi * 440 * t)
        data = np.stack([tone * (1 - 0.3 * c) for c in range(channels)], axis=1)
        sf.write(str(folder / name), data, rate, subtype=subtype, format=fmt)
        seeds.append(folder / name)
    return seeds


def mutate(data: bytes, mutations: list[Mutation]) -> bytes:
    """Apply ``mutations`` in order to a file's bytes (see ``Mutation``)."""
    out = bytearray(data)
    for kind, a, b in mutations:
        if kind == "byte" and out:
            out[int(a) % min(HEADER_BYTES, len(out))] = b & 0xFF
        elif kind == "word" and len(out) >= 2:
            width = 4 if b > 0xFFFF else 2
            width = min(width, len(out))
            offset = int(a) % max(1, min(HEADER_BYTES, len(out)) - width + 1)
            out[offset : offset + width] = struct.pack("<I" if width == 4 else "<H", b)[:width]
        elif kind == "anybyte" and out:
            out[min(int(a * len(out)), len(out) - 1)] = b & 0xFF
        elif kind == "truncate":
            del out[int(a * len(out)) :]
        elif kind == "append":
            out += bytes([b & 0xFF]) * int(a)
    return bytes(out)


def random_mutations(rng: random.Random) -> list[Mutation]:
    """One to four mutations drawn from ``rng`` (for the fixed C++ set)."""
    mutations: list[Mutation] = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("byte", "word", "word", "anybyte", "truncate", "append"))
        if kind == "byte":
            mutations.append((kind, rng.randrange(HEADER_BYTES), rng.randrange(256)))
        elif kind == "word":
            mutations.append((kind, rng.randrange(HEADER_BYTES), rng.choice(EXTREMES)))
        elif kind == "anybyte":
            mutations.append((kind, rng.random(), rng.randrange(256)))
        elif kind == "truncate":
            mutations.append((kind, rng.random(), 0))
        else:
            mutations.append((kind, rng.randrange(1, 200), rng.randrange(256)))
    return mutations


def write_mutants(folder: str | Path, count: int, seed: int = 0) -> list[Path]:
    """Write ``count`` mutated copies of the seed files into ``folder`` (deterministic in ``seed``)."""
    folder = Path(folder)
    seeds = write_seeds(folder / "seeds")
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        source = seeds[i % len(seeds)]
        path = folder / f"mutant{i:03d}{source.suffix}"
        path.write_bytes(mutate(source.read_bytes(), random_mutations(rng)))
        paths.append(path)
    return paths
