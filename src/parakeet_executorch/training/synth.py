"""Speech synthesizers behind one interface: espeak-ng, flite, festival, MBROLA, RHVoice and SVOX Pico, each called
as a program except RHVoice (its C library, in the calling process).

``synthesize(text, voice)`` returns float32 mono audio at 16 kHz (the synthesizer's own rate resampled with libsoxr,
HQ) for a ``Voice``: which synthesizer, which of its voices, a speed factor and a pitch. Every call is one process
(RHVoice: one engine per calling process), so a pool of worker processes scales over cores, and each synthesizer's
output is deterministic for its version (the versions are recorded by ``versions()``).

- espeak-ng: voice ``en-us``, ``en-gb+f4`` etc. (language voice ``+`` variant); speed 1.0 is its default 175 words
  per minute; pitch is its 0-99 scale (default 50); ``gap`` is extra silence between words in units of 10 ms.
- flite: its built-in voices ``kal`` (8 kHz diphone), ``kal16`` (16 kHz diphone), ``awb``, ``rms`` and ``slt``
  (clustergen); speed through ``--setf duration_stretch=1/speed``; pitch is the target f0 mean in Hz through
  ``--setf int_f0_target_mean`` (None keeps the voice's own; ``rms`` ignores it).
- festival: ``text2wave`` with ``voice_kal_diphone``, ``voice_ked_diphone`` (Debian's festvox-kallpc16k and
  festvox-kdlpc16k) or ``voice_cmu_us_slt_arctic_hts`` (festvox-us-slt-hts); speed through ``Duration_Stretch``
  (diphone voices) or the HTS engine's ``-r``; pitch, for the HTS voice only, is a shift in semitones (``-fm``).
  It starts a Scheme interpreter per call (about 0.5 s), so it serves the held-out test sets.
- mbrola: MBROLA's diphone voices ``us1`` (female), ``us2``, ``us3`` (male, American) and ``en1`` (male, British),
  driven by espeak-ng (``-v mb-us1``; espeak-ng runs the ``mbrola`` program it finds on ``PATH``); speed and pitch as
  for espeak-ng. Debian non-free: mbrola, mbrola-us1 ... mbrola-en1.
- rhvoice: RHVoice's HTS voices ``alan`` (Scottish male), ``bdl`` (American male), ``clb`` and ``slt`` (American
  female), through its C library (``rhvoice_say.py``); speed and pitch (a percentage of the voice's own) are its
  relative rate and pitch. Debian non-free: rhvoice-english, librhvoice5.
- pico: SVOX Pico's ``en-US`` and ``en-GB`` voices (both female) through ``pico2wave``; speed and pitch are its
  markup's percentages (``<speed level=..>``, ``<pitch level=..>``). Debian non-free: libttspico-utils.

Programs are found, in this order, from an explicit variable (``ESPEAK_NG``, ``FLITE``, ``FESTIVAL``,
``PICO2WAVE``: the binary; ``TEXT2WAVE``: the script), from ``PARAKEET_TTS_PREFIX`` (a folder where Debian packages
were unpacked by ``tts_bundle.py``: ``PREFIX/usr/bin/...``, added to ``PATH``, with ``PREFIX/usr/lib/x86_64-linux-gnu``
added to ``LD_LIBRARY_PATH``, espeak-ng's data taken from there through ``ESPEAK_DATA_PATH``, RHVoice's from
``PREFIX/usr/share/RHVoice`` through ``RHVOICE_DATA_PATH`` unless those are set, and festival's library from
``PREFIX/usr/share/festival`` unless ``FESTIVAL_LIBDIR`` is set), then from ``PATH``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .rhvoice_say import VOICES as RHVOICE_VOICES

SAMPLE_RATE = 16000
SYNTHS = ("espeak", "flite", "festival", "mbrola", "rhvoice", "pico")
FLITE_VOICES = ("kal", "kal16", "awb", "rms", "slt")
# Median f0 (Hz) each flite voice speaks at by default, measured on a sentence; pitch factors scale these.
FLITE_DEFAULT_F0 = {"kal": 95, "kal16": 95, "awb": 130, "rms": 100, "slt": 170}
FESTIVAL_VOICES = ("kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts")
MBROLA_VOICES = ("us1", "us2", "us3", "en1")
PICO_VOICES = ("en-US", "en-GB")
ESPEAK_DEFAULT_WPM = 175
APT_PACKAGE = {
    "espeak": "espeak-ng",
    "flite": "flite",
    "festival": "festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts",
    "mbrola": "espeak-ng mbrola mbrola-us1 mbrola-us2 mbrola-us3 mbrola-en1 (Debian non-free)",
    "rhvoice": "rhvoice-english librhvoice5 (Debian non-free)",
    "pico": "libttspico-utils (Debian non-free)",
}


class SynthError(RuntimeError):
    """A synthesizer is missing or failed; the message names the Debian package or the failing command."""


# The name train.py and older callers catch.
EspeakError = SynthError


@dataclass(frozen=True)
class Voice:
    """One way of speaking: synthesizer, its voice name, speed factor (1.0 = the voice's default rate), pitch
    (espeak-ng and mbrola: 0-99; flite: f0 mean in Hz; festival HTS: semitones; rhvoice and pico: percent of the
    voice's own; festival diphone: unused; None: the voice's default), and espeak-ng's word gap (10 ms units)."""

    synth: str
    name: str
    speed: float = 1.0
    pitch: int | None = None
    gap: int = 0

    def describe(self) -> str:
        pitch = "" if self.pitch is None else f" pitch {self.pitch}"
        gap = f" gap {self.gap}" if self.gap else ""
        return f"{self.synth}:{self.name} speed {self.speed:.2f}{pitch}{gap}"


def _prefix() -> Path | None:
    prefix = os.environ.get("PARAKEET_TTS_PREFIX")
    return Path(prefix) if prefix else None


def _env() -> dict:
    """Environment for the synthesizer processes: the unpacked prefix's libraries and espeak-ng data."""
    env = dict(os.environ)
    prefix = _prefix()
    if prefix is not None:
        libdir = prefix / "usr" / "lib" / "x86_64-linux-gnu"
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(libdir), env.get("LD_LIBRARY_PATH")) if p)
        # espeak-ng runs the mbrola program from PATH.
        env["PATH"] = os.pathsep.join(p for p in (str(prefix / "usr" / "bin"), env.get("PATH")) if p)
        # espeak-ng reads ESPEAK_DATA_PATH/espeak-ng-data (and MBROLA voices from its mbrola/ folder).
        env.setdefault("ESPEAK_DATA_PATH", str(libdir))
        env.setdefault("RHVOICE_DATA_PATH", str(prefix / "usr" / "share" / "RHVoice"))
        env.setdefault("RHVOICE_CONFIG_PATH", str(prefix / "etc" / "RHVoice"))
    return env


def program(synth: str) -> list[str]:
    """The command prefix that runs ``synth`` ("espeak", "flite" or "festival"'s text2wave).

    Raises:
        SynthError: not found; the message names the Debian package and the variable to set.
    """
    prefix = _prefix()
    if synth == "festival":
        script = os.environ.get("TEXT2WAVE") or _find("text2wave", prefix)
        binary = os.environ.get("FESTIVAL") or _find("festival", prefix)
        if not script or not binary:
            raise SynthError(
                f"festival not found: install it (apt-get install {APT_PACKAGE['festival']}) or set "
                "FESTIVAL and TEXT2WAVE (or PARAKEET_TTS_PREFIX)"
            )
        libdir = os.environ.get("FESTIVAL_LIBDIR") or (str(prefix / "usr/share/festival") if prefix else None)
        # text2wave's "#!/usr/bin/festival --script" line names the system binary; run the one we found instead.
        return [binary, *(["--libdir", libdir] if libdir else []), "--script", script]
    if synth == "mbrola":
        if not _find("mbrola", prefix):
            raise SynthError(f"mbrola not found: install it (apt-get install {APT_PACKAGE['mbrola']})")
        return program("espeak")
    if synth == "rhvoice":
        import ctypes.util

        bundled = prefix is not None and (prefix / "usr/lib/x86_64-linux-gnu/libRHVoice.so.5").is_file()
        if not bundled and not ctypes.util.find_library("RHVoice"):
            raise SynthError(f"RHVoice's library not found: install it (apt-get install {APT_PACKAGE['rhvoice']})")
        return [sys.executable, "-m", "parakeet_executorch.training.rhvoice_say"]
    name, var = {"espeak": ("espeak-ng", "ESPEAK_NG"), "flite": ("flite", "FLITE"), "pico": ("pico2wave", "PICO2WAVE")}[
        synth
    ]
    found = os.environ.get(var) or _find(name, prefix)
    if not found:
        raise SynthError(
            f"{name} not found: install it (apt-get install {APT_PACKAGE[synth]}) or set {var}=/path "
            "(or PARAKEET_TTS_PREFIX)"
        )
    return [found]


def _find(name: str, prefix: Path | None) -> str | None:
    if prefix is not None and (prefix / "usr" / "bin" / name).is_file():
        return str(prefix / "usr" / "bin" / name)
    return shutil.which(name)


def versions(synths=SYNTHS) -> dict[str, str]:
    """Version line of each available synthesizer in ``synths`` ("missing" where the program is not found)."""
    out = {}
    for synth in synths:
        try:
            cmd = program(synth)
        except SynthError:
            out[synth] = "missing"
            continue
        if synth == "espeak":
            text = _run(cmd + ["--version"]).decode().split("Data at")[0]
        elif synth == "flite":
            # flite prints its version and exits 1.
            text = next(
                line for line in _run(cmd + ["--version"], check=False).decode().splitlines() if "version" in line
            )
        elif synth == "festival":
            text = _run(cmd[:1] + ["--version"]).decode()
        elif synth == "mbrola":
            # mbrola prints no version; espeak-ng's (which drives it) and the voices stand for it.
            text = "mbrola via " + _run(cmd + ["--version"]).decode().split("Data at")[0].strip()
        elif synth == "rhvoice":
            text = "RHVoice " + _run(cmd + ["--version"]).decode()
        else:
            # pico2wave has no version option; Debian's package version stands for it.
            text = "svox pico (libttspico-utils)"
        out[synth] = text.strip()
    return out


def _run(cmd: list[str], check: bool = True) -> bytes:
    try:
        proc = subprocess.run(cmd, capture_output=True, env=_env(), timeout=300)
    except OSError as e:
        raise SynthError(f"could not run {cmd[0]}: {e}") from e
    if check and proc.returncode != 0:
        raise SynthError(f"{cmd[0]} failed ({proc.returncode}) for {cmd}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def _decode(wav: bytes, what: str) -> tuple[np.ndarray, int]:
    import soundfile as sf

    if len(wav) < 100:
        raise SynthError(f"{what} returned no audio")
    # espeak-ng streams to stdout without knowing the length, so its RIFF sizes are placeholders; libsndfile reads
    # such a WAV to the end of the data it has.
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    return samples, rate


def _espeak_cmd(synth: str, espeak_voice: str, voice: Voice, text: str) -> list[str]:
    """espeak-ng's command for ``text`` in ``espeak_voice`` (an MBROLA voice is espeak-ng's ``mb-NAME``), at
    ``voice``'s speed, pitch and word gap, WAV to stdout."""
    speed = str(round(ESPEAK_DEFAULT_WPM * voice.speed))
    pitch = str(50 if voice.pitch is None else voice.pitch)
    return program(synth) + ["-v", espeak_voice, "-s", speed, "-p", pitch, "-g", str(voice.gap), "--stdout", text]


def synthesize(text: str, voice: Voice, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Speak ``text`` (lower-case words) with ``voice``.

    Returns:
        float32 mono waveform at ``sample_rate`` Hz.
    Raises:
        SynthError: the program is missing, fails, or returns no audio; ValueError: unknown synthesizer or voice.
    """
    from ..audio import resample, to_mono

    if voice.synth == "espeak":
        samples, rate = _decode(_run(_espeak_cmd("espeak", voice.name, voice, text)), f"espeak-ng {voice.describe()}")
    elif voice.synth == "flite":
        if voice.name not in FLITE_VOICES:
            raise ValueError(f"unknown flite voice {voice.name!r}; built-in voices are {FLITE_VOICES}")
        cmd = program("flite") + ["-voice", voice.name, "--setf", f"duration_stretch={1 / voice.speed:.4f}"]
        if voice.pitch is not None:
            cmd += ["--setf", f"int_f0_target_mean={voice.pitch}"]
        samples, rate = _decode(_run(cmd + ["-t", text, "-o", "/dev/stdout"]), f"flite {voice.describe()}")
    elif voice.synth == "festival":
        if voice.name not in FESTIVAL_VOICES:
            raise ValueError(f"unknown festival voice {voice.name!r}; supported: {FESTIVAL_VOICES}")
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "in.txt", Path(tmp) / "out.wav"
            src.write_text(text + "\n")
            if voice.name.endswith("_hts"):
                # The HTS engine ignores Duration_Stretch; its own options are -r (speed) and -fm (semitones).
                extra = f'(list "-r" {voice.speed:.4f}) (list "-fm" {voice.pitch or 0})'
                setting = f"(set! hts_engine_params (append hts_engine_params (list {extra})))"
            else:
                setting = f"(Parameter.set 'Duration_Stretch {1 / voice.speed:.4f})"
            _run(program("festival") + ["-eval", f"(voice_{voice.name})", "-eval", setting, "-o", str(dst), str(src)])
            samples, rate = _decode(dst.read_bytes() if dst.exists() else b"", f"festival {voice.describe()}")
    elif voice.synth == "mbrola":
        if voice.name not in MBROLA_VOICES:
            raise ValueError(f"unknown mbrola voice {voice.name!r}; supported: {MBROLA_VOICES}")
        cmd = _espeak_cmd("mbrola", f"mb-{voice.name}", voice, text)
        samples, rate = _decode(_run(cmd), f"mbrola {voice.describe()}")
    elif voice.synth == "rhvoice":
        if voice.name not in RHVOICE_VOICES:
            raise ValueError(f"unknown RHVoice voice {voice.name!r}; supported: {RHVOICE_VOICES}")
        from .rhvoice_say import speak

        prefix = _prefix()
        env = _env()
        # In this process (a synthesis worker): a process per call, loading the voice each time, made RHVoice
        # the slowest part of synthesizing a training set (28.5 h in 667 s on 16 cores, half of it extra voices).
        try:
            pcm, rate = speak(
                text,
                voice.name,
                rate=voice.speed,
                pitch=1.0 if voice.pitch is None else voice.pitch / 100,
                libdir=str(prefix / "usr/lib/x86_64-linux-gnu") if prefix is not None else None,
                data_path=env.get("RHVOICE_DATA_PATH"),
                config_path=env.get("RHVOICE_CONFIG_PATH"),
            )
        except OSError as e:
            # The library did not load: the same message as program("rhvoice"), without probing for it on every
            # segment (ctypes.util.find_library runs ldconfig).
            raise SynthError(
                f"RHVoice's library not found: install it (apt-get install {APT_PACKAGE['rhvoice']}): {e}"
            ) from e
        except RuntimeError as e:
            raise SynthError(f"rhvoice {voice.describe()}: {e}") from e
        samples = pcm.astype(np.float32) / 32768.0
    elif voice.synth == "pico":
        if voice.name not in PICO_VOICES:
            raise ValueError(f"unknown pico voice {voice.name!r}; supported: {PICO_VOICES}")
        markup = f'<speed level="{round(100 * voice.speed)}"><pitch level="{voice.pitch or 100}">{text}</pitch></speed>'
        with tempfile.TemporaryDirectory() as tmp:
            # pico2wave only writes to a file whose name ends in .wav.
            dst = Path(tmp) / "out.wav"
            _run(program("pico") + ["-l", voice.name, "-w", str(dst), markup])
            samples, rate = _decode(dst.read_bytes() if dst.exists() else b"", f"pico {voice.describe()}")
    else:
        raise ValueError(f"unknown synthesizer {voice.synth!r}; expected one of {SYNTHS}")
    return resample(to_mono(samples), rate, sample_rate)
