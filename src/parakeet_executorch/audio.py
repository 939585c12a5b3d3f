"""Audio loading for transcription: decode with libsndfile, mix to mono, resample with libsoxr.

Decoding and resampling are delegated to well-kept libraries (soundfile wraps libsndfile, soxr wraps libsoxr),
so WAV (PCM 16/24/32, float, WAVE_FORMAT_EXTENSIBLE, extra chunks), FLAC, OGG/Vorbis/Opus and MP3 all work
as far as the bundled libsndfile supports them.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

# libsndfile logs "data : 352000 (should be 175961)" (WAV, W64, RF64) or "SSND : ..." (AIFF) when a header promises
# more audio bytes than the file holds; it then reads what is there without reporting an error.
_TRUNCATED_CHUNK = re.compile(r"^\s*(data|SSND)\s*:\s*(\d+)\s*\(should be (\d+)\)", re.MULTILINE)
_UNKNOWN_LENGTH = 0xFFFFFFFF  # what streaming writers put in the size field when they cannot seek back
# Sample rates a real recording has (the C++ runner uses the same bounds).
MIN_FILE_RATE, MAX_FILE_RATE = 1000, 1_000_000


class AudioError(ValueError):
    """An audio file could not be read or converted; the message names the file and the cause."""


class AudioWarning(UserWarning):
    """The audio was read, but not all of it is as the file promised (truncated, or non-finite samples zeroed)."""


def cannot_decode(path: str | Path, exc: BaseException) -> AudioError:
    """The AudioError for a file libsndfile refuses, with libsndfile's reason (one sentence, one period): its own
    message (soundfile's ``error_string``) without soundfile's "Error opening '<path>': " prefix, as the C++ runner
    words it."""
    reason = str(getattr(exc, "error_string", None) or exc).strip().rstrip(".")
    return AudioError(f"cannot decode audio file {path}: {reason}. Pass a WAV, FLAC, OGG or MP3 file.")


def check_header(path: str | Path, channels: int, sample_rate: int) -> None:
    """Refuse a header whose channel count or sample rate no recording has (a damaged file).

    Args:
        channels: the header's channel count; sample_rate: its rate in Hz.
    Raises:
        AudioError: fewer than one channel, or a rate outside [MIN_FILE_RATE, MAX_FILE_RATE] Hz (resampling from
            such a rate would make an absurdly long or short waveform).
    """
    if channels < 1 or not MIN_FILE_RATE <= sample_rate <= MAX_FILE_RATE:
        raise AudioError(
            f"cannot decode audio file {path}: it reports {channels} channels at {sample_rate} Hz "
            f"(expected {MIN_FILE_RATE} to {MAX_FILE_RATE} Hz; the header is probably damaged). "
            "Re-encode it, e.g. as 16 kHz WAV."
        )


def _first_non_finite(samples: np.ndarray) -> tuple[int, int, float]:
    """(count of non-finite frames, index of the first, its first non-finite value); count 0 when all finite."""
    bad = ~np.isfinite(samples)
    if bad.ndim == 2:
        bad = bad.any(axis=1)
    count = int(np.count_nonzero(bad))
    if count == 0:
        return 0, -1, 0.0
    first = int(np.argmax(bad))
    row = np.atleast_1d(samples[first])
    return count, first, float(row[~np.isfinite(row)][0])


def _non_finite_report(count: int, first: int, value: float, name: str, offset_samples: int, sample_rate: int) -> str:
    frame = offset_samples + first
    return (
        f"{name}: sample {frame} at {frame / sample_rate:.3f} s is {value} ({count} non-finite "
        f"sample{'s' if count != 1 else ''})"
    )


def check_finite(samples: np.ndarray, name: str, offset_samples: int, sample_rate: int) -> None:
    """Refuse audio holding NaN or +-Inf (the model would turn them into garbage tokens).

    Call it on decoded samples before mixing and resampling (both spread one bad value over its neighbours); a
    block-by-block reader calls it on each block with that block's offset.

    Args:
        samples: float array [frames] or [frames, channels].
        name: what to call the audio in the message (its path).
        offset_samples: frames that precede ``samples`` in the file, so the time reported is the file's.
        sample_rate: the rate of ``samples`` in Hz (the file's own rate, before resampling).
    Raises:
        AudioError: naming ``name``, the first non-finite frame and its time in seconds, and the fix.
    """
    count, first, value = _first_non_finite(samples)
    if count:
        raise AudioError(
            _non_finite_report(count, first, value, name, offset_samples, sample_rate)
            + "; audio must hold finite numbers. Repair the file, or pass --zero-non-finite to "
            "replace them with silence."
        )


def zero_non_finite(samples: np.ndarray, name: str, offset_samples: int, sample_rate: int) -> int:
    """Replace NaN and +-Inf by 0 in place and warn (AudioWarning) once, naming the first one's time.

    Args: as ``check_finite``; ``samples`` must be writable.
    Returns:
        The number of frames that held a non-finite value.
    """
    count, first, value = _first_non_finite(samples)
    if count:
        samples[~np.isfinite(samples)] = 0.0
        warnings.warn(
            AudioWarning(
                _non_finite_report(count, first, value, name, offset_samples, sample_rate) + "; replaced by silence"
            ),
            stacklevel=2,
        )
    return count


def warn_if_truncated(name: str, sndfile_log: str, frames: int, sample_rate: int) -> bool:
    """Warn (AudioWarning) when libsndfile's parse log says the header promised more audio than the file holds.

    Args:
        name: the file's path, for the message.
        sndfile_log: libsndfile's log of the header parse (``SoundFile.extra_info``; ``SFC_GET_LOG_INFO`` in C).
        frames: the frames actually read; sample_rate: the file's rate in Hz (for the seconds in the message).
    Returns:
        True when it warned.
    """
    for match in _TRUNCATED_CHUNK.finditer(sndfile_log):
        promised, present = int(match.group(2)), int(match.group(3))
        if promised > present and promised != _UNKNOWN_LENGTH:
            warnings.warn(
                AudioWarning(
                    f"{name} is truncated: its header promises {promised} bytes of audio but the file holds {present}; "
                    f"transcribing the {frames / sample_rate:.2f} s that are there. Re-copy or re-encode the file "
                    "if the rest matters."
                ),
                stacklevel=2,
            )
            return True
    return False


def to_mono(samples: np.ndarray) -> np.ndarray:
    """Average all channels into one.

    Args:
        samples: float array, shape [frames] or [frames, channels] (soundfile's layout).
    Returns:
        float32 array of shape [frames].
    """
    if samples.ndim == 1:
        return samples.astype(np.float32, copy=False)
    if samples.ndim != 2:
        raise AudioError(f"expected audio of shape [frames] or [frames, channels], got {samples.shape}")
    return samples.mean(axis=1, dtype=np.float64).astype(np.float32)


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Resample mono float audio with libsoxr's high-quality (HQ) filter.

    Args:
        samples: float32 [frames] at ``from_rate`` Hz.
        from_rate, to_rate: sample rates in Hz (positive integers).
    Returns:
        float32 [round(frames * to_rate / from_rate)] at ``to_rate`` Hz; the input itself when the rates match.
    """
    if from_rate <= 0 or to_rate <= 0:
        raise AudioError(f"sample rates must be positive, got {from_rate} Hz -> {to_rate} Hz")
    if from_rate == to_rate or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    import soxr

    return soxr.resample(samples, from_rate, to_rate, quality="HQ").astype(np.float32, copy=False)


def check_audio_path(path: Path) -> None:
    """Raise ``AudioError`` naming what ``path`` is when it cannot be audio: missing, a folder, or an empty file."""
    if path.is_dir():
        raise AudioError(f"audio path is a folder, not a file: {path}")
    if not path.is_file():
        raise AudioError(f"audio file not found: {path}")
    if path.stat().st_size == 0:
        raise AudioError(f"audio file is empty (0 bytes): {path}")


def load_audio(path: str | Path, sample_rate: int, *, non_finite: str = "error") -> np.ndarray:
    """Read an audio file as the mono waveform the model expects.

    Channels are averaged to mono *before* resampling (one resampler pass instead of one per channel).

    Args:
        path: any file libsndfile can decode.
        sample_rate: target rate in Hz (the model's preprocessor rate, 16000 for Parakeet).
        non_finite: ``"error"`` refuses NaN/Inf samples (``check_finite``); ``"zero"`` replaces them by silence
            with an AudioWarning (``zero_non_finite``).
    Returns:
        float32 array [samples] in [-1, 1] at ``sample_rate``.
    Raises:
        AudioError: the file is missing, unreadable, not audio libsndfile can decode, or holds non-finite samples.
    Warns:
        AudioWarning: the file is truncated (its header promises more than it holds), or non-finite samples were
            zeroed.
    """
    import soundfile as sf

    if non_finite not in ("error", "zero"):
        raise ValueError(f"non_finite must be 'error' or 'zero', not {non_finite!r}")
    path = Path(path)
    check_audio_path(path)
    try:
        with sf.SoundFile(str(path)) as f:
            rate, log = int(f.samplerate), f.extra_info
            check_header(path, int(f.channels), rate)
            data = f.read(dtype="float32", always_2d=True)
    except AudioError:
        raise
    except Exception as exc:  # soundfile raises LibsndfileError, RuntimeError, TypeError or MemoryError by format
        raise cannot_decode(path, exc) from exc
    warn_if_truncated(str(path), log, data.shape[0], rate)
    if non_finite == "zero":
        zero_non_finite(data, str(path), 0, rate)
    else:
        check_finite(data, str(path), 0, rate)
    return resample(to_mono(data), rate, int(sample_rate))
