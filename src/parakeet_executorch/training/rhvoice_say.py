"""Speak text with RHVoice through its C library, writing a WAV to stdout: the RHVoice program of ``synth.py``.

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


def speak(text: str, voice: str, rate: float = 1.0, pitch: float = 1.0) -> tuple[np.ndarray, int]:
    """Synthesize ``text`` with RHVoice voice ``voice``.

    Returns:
        (int16 mono samples, sample rate in Hz).
    Raises:
        OSError: libRHVoice.so.5 is not found (Debian: librhvoice5); RuntimeError: the engine or the voice could
        not be loaded, or synthesis failed.
    """
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
    lib.RHVoice_delete_tts_engine.argtypes = [ctypes.c_void_p]

    chunks: list[np.ndarray] = []
    rates: list[int] = []

    def set_rate(sample_rate, _user):
        rates.append(sample_rate)
        return 1

    def play(samples, count, _user):
        chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
        return 1

    set_rate_cb, play_cb = _SET_RATE(set_rate), _PLAY(play)
    params = _InitParams(
        data_path=os.environ.get("RHVOICE_DATA_PATH", "/usr/share/RHVoice").encode(),
        config_path=os.environ.get("RHVOICE_CONFIG_PATH", "/etc/RHVoice").encode(),
        callbacks=_Callbacks(set_rate_cb, play_cb),
    )
    engine = lib.RHVoice_new_tts_engine(ctypes.byref(params))
    if not engine:
        raise RuntimeError(f"RHVoice could not start with data at {params.data_path.decode()}")
    try:
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
        message = lib.RHVoice_new_message(engine, data, len(data), 0, ctypes.byref(synth), None)
        if not message:
            raise RuntimeError(f"RHVoice rejected the message for voice {voice!r} (is its data installed?)")
        try:
            if not lib.RHVoice_speak(message):
                raise RuntimeError(f"RHVoice failed to speak with voice {voice!r}")
        finally:
            lib.RHVoice_delete_message(message)
    finally:
        lib.RHVoice_delete_tts_engine(engine)
    if not chunks or not rates:
        raise RuntimeError(f"RHVoice returned no audio for voice {voice!r}")
    return np.concatenate(chunks), rates[-1]


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
            lib = ctypes.CDLL("libRHVoice.so.5")
        except OSError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        lib.RHVoice_get_version.restype = ctypes.c_char_p
        print(lib.RHVoice_get_version().decode())
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
