"""Speak text with RHVoice through its C library: ``speak()`` in-process (what ``synth.py`` calls), or as a program
writing a WAV to stdout.

``python -m parakeet_executorch.training.rhvoice_say --voice bdl --rate 1.1 --pitch 0.9 "some words" > out.wav``

Debian's own ``RHVoice-test`` links RHVoice's audio-output library, which pulls in PulseAudio, PortAudio, JACK and
libao; a machine that only carries the synthesizer's Debian packages (``tts_bundle.py``) lacks them. RHVoice's C
API (``libRHVoice.so.5``, ``RHVoice.h`` of Debian's librhvoice-dev) hands the samples to a callback instead, and
needs only its core library and voice data, so this is called through ``ctypes``: nothing is compiled.

Voice data is read from ``RHVOICE_DATA_PATH`` (default ``/usr/share/RHVoice``), the configuration from
``RHVOICE_CONFIG_PATH`` (default ``/etc/RHVoice``). ``--rate`` and ``--pitch`` are RHVoice's relative rate and pitch
(1.0 = the voice's own).
"""

from __future__ import annotations

import argparse
import ctypes
import io
import os
import sys

import numpy as np

VOICES = ("alan", "bdl", "clb", "slt")

_SET_RATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_PLAY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_uint, ctypes.c_void_p)


class _Callbacks(ctypes.Structure):
    # RHVoice_callbacks in RHVoice.h: two required functions, then seven optional ones that must be NULL.
    _fields_ = [("set_sample_rate", _SET_RATE), ("play_speech", _PLAY)] + [
        (name, ctypes.c_void_p)
        for name in (
            "process_mark",
            "word_starts",
            "word_ends",
            "sentence_starts",
            "sentence_ends",
            "play_audio",
            "done",
        )
    ]


class _InitParams(ctypes.Structure):
    _fields_ = [
        ("data_path", ctypes.c_char_p),
        ("config_path", ctypes.c_char_p),
        ("resource_paths", ctypes.c_void_p),
        ("callbacks", _Callbacks),
        ("options", ctypes.c_uint),
    ]


class _SynthParams(ctypes.Structure):
    _fields_ = [
        ("voice_profile", ctypes.c_char_p),
        ("absolute_rate", ctypes.c_double),
        ("absolute_pitch", ctypes.c_double),
        ("absolute_volume", ctypes.c_double),
        ("relative_rate", ctypes.c_double),
        ("relative_pitch", ctypes.c_double),
        ("relative_volume", ctypes.c_double),
        ("punctuation_mode", ctypes.c_int),
        ("punctuation_list", ctypes.c_char_p),
        ("capitals_mode", ctypes.c_int),
        ("flags", ctypes.c_int),
    ]


class _Engine:
    """One RHVoice engine with its callbacks; the callbacks append to ``chunks`` of whichever call is running."""

    def __init__(self, lib: ctypes.CDLL, data_path: str, config_path: str):
        self.lib = lib
        self.chunks: list[np.ndarray] = []
        self.rates: list[int] = []

        def set_rate(sample_rate, _user):
            self.rates.append(sample_rate)
            return 1

        def play(samples, count, _user):
            self.chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
            return 1

        # Kept on the object: the library calls them for as long as the engine lives.
        self._callbacks = (_SET_RATE(set_rate), _PLAY(play))
        params = _InitParams(
            data_path=data_path.encode(), config_path=config_path.encode(), callbacks=_Callbacks(*self._callbacks)
        )
        self.handle = lib.RHVoice_new_tts_engine(ctypes.byref(params))
        if not self.handle:
            raise RuntimeError(f"RHVoice could not start with data at {data_path}")


_engines: dict[tuple, _Engine] = {}


def _library(libdir: str | None) -> ctypes.CDLL:
    if libdir:
        # By full path, dependencies first, so that a prefix's copies are used without LD_LIBRARY_PATH (which a
        # running process cannot change for itself).
        for dep in ("libsonic.so.0", "libRHVoice_core.so.7"):
            if os.path.exists(os.path.join(libdir, dep)):
                ctypes.CDLL(os.path.join(libdir, dep), mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(os.path.join(libdir, "libRHVoice.so.5"))
    else:
        lib = ctypes.CDLL("libRHVoice.so.5")
    lib.RHVoice_new_tts_engine.restype = ctypes.c_void_p
    lib.RHVoice_new_tts_engine.argtypes = [ctypes.POINTER(_InitParams)]
    lib.RHVoice_new_message.restype = ctypes.c_void_p
    lib.RHVoice_new_message.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.POINTER(_SynthParams),
        ctypes.c_void_p,
    ]
    lib.RHVoice_speak.argtypes = [ctypes.c_void_p]
    lib.RHVoice_delete_message.argtypes = [ctypes.c_void_p]
    lib.RHVoice_get_version.restype = ctypes.c_char_p
    return lib


def speak(
    text: str,
    voice: str,
    rate: float = 1.0,
    pitch: float = 1.0,
    libdir: str | None = None,
    data_path: str | None = None,
    config_path: str | None = None,
) -> tuple[np.ndarray, int]:
    """Synthesize ``text`` with RHVoice voice ``voice``, in this process.

    The engine (voice data loaded once, about 0.2 s) is kept per process for the next call with the same paths.

    Args:
        rate, pitch: RHVoice's relative rate and pitch (1.0 = the voice's own).
        libdir: folder holding ``libRHVoice.so.5`` (and its core and libsonic) to load by path; None: the system's.
        data_path, config_path: RHVoice's data and configuration folders (default ``RHVOICE_DATA_PATH`` /
            ``RHVOICE_CONFIG_PATH``, else ``/usr/share/RHVoice`` / ``/etc/RHVoice``).
    Returns:
        (int16 mono samples, sample rate in Hz).
    Raises:
        OSError: libRHVoice.so.5 is not found (Debian: librhvoice5); RuntimeError: the engine or the voice could
        not be loaded, or synthesis failed.
    """
    data_path = data_path or os.environ.get("RHVOICE_DATA_PATH", "/usr/share/RHVoice")
    config_path = config_path or os.environ.get("RHVOICE_CONFIG_PATH", "/etc/RHVoice")
    key = (libdir, data_path, config_path)
    engine = _engines.get(key)
    if engine is None:
        engine = _engines[key] = _Engine(_library(libdir), data_path, config_path)
    engine.chunks, engine.rates = [], []
    synth = _SynthParams(
        voice_profile=voice.encode(),
        absolute_rate=0.0,
        absolute_pitch=0.0,
        absolute_volume=0.0,
        relative_rate=rate,
        relative_pitch=pitch,
        relative_volume=1.0,
    )
    data = text.encode()
    lib = engine.lib
    message = lib.RHVoice_new_message(engine.handle, data, len(data), 0, ctypes.byref(synth), None)
    if not message:
        raise RuntimeError(f"RHVoice rejected the message for voice {voice!r} (is its data installed?)")
    try:
        if not lib.RHVoice_speak(message):
            raise RuntimeError(f"RHVoice failed to speak with voice {voice!r}")
    finally:
        lib.RHVoice_delete_message(message)
    if not engine.chunks or not engine.rates:
        raise RuntimeError(f"RHVoice returned no audio for voice {voice!r}")
    return np.concatenate(engine.chunks), engine.rates[-1]


def main(argv: list[str] | None = None) -> int:
    import soundfile as sf

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--voice", default="slt", help=f"voice profile, e.g. one of {VOICES}")
    p.add_argument("--rate", type=float, default=1.0, help="relative speech rate (1.0 = the voice's own)")
    p.add_argument("--pitch", type=float, default=1.0, help="relative pitch (1.0 = the voice's own)")
    p.add_argument("text", nargs="?", help="the words to speak")
    p.add_argument("--version", action="store_true", help="print RHVoice's library version and exit")
    args = p.parse_args(argv)
    if args.version:
        try:
            print(_library(None).RHVoice_get_version().decode())
        except OSError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0
    if args.text is None:
        p.error("give the words to speak")
    try:
        samples, rate = speak(args.text, args.voice, args.rate, args.pitch)
    except (OSError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="WAV", subtype="PCM_16")
    sys.stdout.buffer.write(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
