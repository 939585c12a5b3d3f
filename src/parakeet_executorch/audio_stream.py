"""Audio read block by block, for recordings of any length and for live input, with flat memory.

Files are decoded with libsndfile (``soundfile.SoundFile.read`` of ``block_frames`` frames at a time), averaged to
mono per block, and resampled with libsoxr's streaming resampler (``soxr.ResampleStream``, HQ), which keeps its
filter state across blocks. Raw 16-bit PCM from a pipe (``arecord -f S16_LE ...``) goes through the same mixing
and resampling. The C++ runner reads the same blocks and feeds libsoxr the same way
(``examples/parakeet/runner/audio_stream.cpp``), so both runners see the same samples.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .audio import (
    AudioError,
    cannot_decode,
    check_audio_path,
    check_finite,
    check_header,
    to_mono,
    warn_if_truncated,
    zero_non_finite,
)

BLOCK_FRAMES = 65536  # frames of the source file per block: ~4 s at 16 kHz, a few MB at most in memory


@dataclass(frozen=True)
class AudioInfo:
    """What a file's header says: frames per channel, sample rate (Hz), channels; ``seconds`` = frames / rate."""

    frames: int
    sample_rate: int
    channels: int

    @property
    def seconds(self) -> float:
        return self.frames / self.sample_rate if self.sample_rate > 0 else 0.0


def audio_info(path: str | Path) -> AudioInfo:
    """Read a file's header with libsndfile. Raises ``AudioError`` for a missing, undecodable or damaged file."""
    import soundfile as sf

    path = Path(path)
    check_audio_path(path)
    try:
        info = sf.info(str(path))
    except Exception as exc:  # soundfile raises LibsndfileError, RuntimeError or TypeError by format
        raise cannot_decode(path, exc) from exc
    check_header(path, int(info.channels), int(info.samplerate))
    return AudioInfo(int(info.frames), int(info.samplerate), int(info.channels))


def resampled_length(info: AudioInfo, rate: int) -> int:
    """Samples of the file at ``rate`` Hz as its header gives them: ``ceil(frames * rate / info.sample_rate)``,
    in integers (the C++ runner computes the same). The streaming resampler may differ by a few samples."""
    return -(-info.frames * int(rate) // info.sample_rate)


class StreamResampler:
    """libsoxr's streaming resampler from ``from_rate`` to ``to_rate`` Hz, or nothing when the rates match."""

    def __init__(self, from_rate: int, to_rate: int):
        if from_rate <= 0 or to_rate <= 0:
            raise AudioError(f"sample rates must be positive, got {from_rate} Hz -> {to_rate} Hz")
        self._stream = None
        if from_rate != to_rate:
            import soxr

            self._stream = soxr.ResampleStream(from_rate, to_rate, 1, dtype="float32", quality="HQ")

    def __call__(self, mono: np.ndarray, last: bool) -> np.ndarray:
        if self._stream is None:
            return mono
        return self._stream.resample_chunk(np.ascontiguousarray(mono, dtype=np.float32), last=last)


def read_blocks(
    path: str | Path, sample_rate: int, block_frames: int = BLOCK_FRAMES, *, non_finite: str = "error"
) -> Iterator[np.ndarray]:
    """Yield a file's audio as float32 mono blocks at ``sample_rate``, reading ``block_frames`` frames at a time.

    Args:
        path: any file libsndfile decodes.
        sample_rate: the model's rate (Hz).
        block_frames: source frames per read (the output blocks' lengths vary with resampling).
        non_finite: ``"error"`` refuses NaN/Inf samples, ``"zero"`` replaces them by silence with a warning; checked
            per block before mixing, with the block's offset, so the message gives the file's own time.
    Raises:
        AudioError: the file is missing, undecodable, damaged, holds non-finite samples, or fails mid-way.
    Warns:
        AudioWarning: at the end, when the file is truncated (its header promised more than it holds).
    """
    import soundfile as sf

    info = audio_info(path)
    resample = StreamResampler(info.sample_rate, sample_rate)
    offset = 0
    try:
        with sf.SoundFile(str(path)) as f:
            log = f.extra_info
            while True:
                data = f.read(block_frames, dtype="float32", always_2d=True)
                if non_finite == "zero":
                    zero_non_finite(data, str(path), offset, info.sample_rate)
                else:
                    check_finite(data, str(path), offset, info.sample_rate)
                offset += data.shape[0]
                last = data.shape[0] < block_frames
                out = resample(to_mono(data), last)
                if out.size:
                    yield out
                if last:
                    break
    except AudioError:
        raise
    except Exception as exc:
        raise cannot_decode(path, exc) from exc
    warn_if_truncated(str(path), log, offset, info.sample_rate)


def read_pcm_blocks(
    stream: BinaryIO, stream_rate: int, channels: int, sample_rate: int, block_frames: int = 1600
) -> Iterator[np.ndarray]:
    """Yield raw signed 16-bit little-endian interleaved PCM from ``stream`` as float32 mono at ``sample_rate``.

    Blocks of ``block_frames`` frames (0.1 s at 16 kHz by default) are yielded as soon as they are read, so live
    audio is decoded as it arrives. Samples are scaled by 1/32768 as libsndfile scales PCM16.

    Raises:
        AudioError: the stream ends inside a frame (a byte count that is not a whole number of frames), or
            ``stream_rate``/``channels`` are not positive.
    """
    if stream_rate <= 0 or channels <= 0:
        raise AudioError(f"--stream-rate and --stream-channels must be positive, got {stream_rate} Hz, {channels}")
    frame_bytes = 2 * channels
    resample = StreamResampler(stream_rate, sample_rate)
    pending = b""
    first = True
    while True:
        chunk = _read_some(stream, block_frames * frame_bytes)
        if first and chunk:
            _refuse_container(chunk)
            first = False
        data = pending + chunk
        usable = len(data) - len(data) % frame_bytes
        pending = data[usable:]
        last = not chunk
        if usable or last:
            pcm = np.frombuffer(data[:usable], dtype="<i2").reshape(-1, channels)
            out = resample(to_mono(pcm.astype(np.float32) / 32768.0), last)
            if out.size:
                yield out
        if last:
            if pending:
                raise AudioError(
                    f"the PCM stream ended inside a frame ({len(pending)} stray byte(s)); it must be "
                    f"16-bit little-endian with {channels} channel(s): check --stream-channels"
                )
            return


_CONTAINER_MAGIC = {b"RIFF": "WAV", b"RF64": "WAV", b"fLaC": "FLAC", b"OggS": "OGG", b"ID3": "MP3", b"FORM": "AIFF"}


def _refuse_container(head: bytes) -> None:
    for magic, name in _CONTAINER_MAGIC.items():
        if head.startswith(magic):
            raise AudioError(
                f"standard input holds a {name} file, not raw PCM: pass the file as an argument, or "
                "send raw 16-bit PCM (arecord -t raw -f S16_LE, sox ... -t raw -e signed -b 16 -)"
            )


def _read_some(stream: BinaryIO, size: int) -> bytes:
    # read1 returns what a pipe has now (live input) instead of waiting for `size` bytes; plain files fill it.
    read1 = getattr(stream, "read1", None)
    data = read1(size) if read1 is not None else stream.read(size)
    return data or b""


def stdin_binary() -> BinaryIO:
    """Standard input as a binary stream."""
    return sys.stdin.buffer
