"""The demo model's synthetic corpus (v2): words without a grammar, several synthesizers, long utterances.

Text comes from ``text.py`` (a 5,000-word vocabulary; random frequency-weighted word sequences and sentences of
Debian's fortunes; held-out words and sentences), speech from ``synth.py`` and acoustic variety from
``augment.py``. A ``Clip`` is one synthesis job: one or more text segments spoken by one voice, joined by pauses,
then (for training) augmented; its ``seed`` fixes the pauses and the augmentation, so a clip's audio does not
depend on which worker made it or in which order.

Training mix (``training_set``, seed 0 by default):
- Segments: half random sequences of 2-16 training words, half training sentences.
- Voices: half espeak-ng (7 English accents x 9 variants, 122-201 words/min, pitch 25-75, word gap 0-30 ms), half
  flite (kal, kal16, awb, rms, slt; speed x0.75-1.3; f0 mean x0.8-1.25 of the voice's own, or its default).
- Length: ``long_fraction`` of the hours (default 0.3) are long clips of 20-40 s: segments with pauses of
  0.15-1.2 s; the rest are single segments (about 1-7 s). A long clip's segments share one voice, except for a
  ``mixed_voice_fraction`` of the long clips (default 0) where each segment has its own voice and a level of its
  own (+-6 dB), as in a conversation or in test set (d).
- Augmentation: ``augment.py``'s recipe on every clip; with ``speed_perturb`` P > 0, a share P of the clips is
  first sped up or slowed down by 0.85-1.15x, pitch and formants with it (new speakers from few voices).
- More synthesizers: with ``extra_voice_fraction`` F > 0, a share F of the voices comes from MBROLA's diphone voices
  (us1, us2, us3, en1; driven by espeak-ng), RHVoice's HTS voices (alan, bdl, clb, slt) and SVOX Pico (en-US,
  en-GB), one draw per voice, at speeds x0.75-1.3 and pitches around the voice's own (Debian non-free packages).

Held-out material (never in training):
- voices: the espeak-ng variants m6 and f4, at speeds and pitches inside the training range; all of festival
  (``voice_kal_diphone``, ``voice_ked_diphone``, ``voice_cmu_us_slt_arctic_hts``). Flite's voices are all in
  training; test clips use them at new settings.
- text: the 250 held-out words and the test sentence pool of ``text.py``; the dev set uses the dev pool and
  training words only.

Test sets (``test_sets``): (a) ``random``: random sequences over all 5,000 words with 10 % held-out words, held-out
espeak-ng voices and flite; (b) ``sentences``: test-pool sentences, same voices; (c) ``festival``: half random
sequences, half test sentences, festival only; (d) ``long``: a single recording of at least 10 minutes built from
further held-out clips by all three synthesizers (a third each), with 0.3-1.5 s pauses; its clips' offsets are
kept so that word times of a run over the whole file can be checked clip by clip. All test audio is clean.
"""

from __future__ import annotations

import os
import random
from dataclasses import asdict, dataclass

import numpy as np

from . import text
from .synth import (
    FESTIVAL_VOICES,
    FLITE_DEFAULT_F0,
    FLITE_VOICES,
    MBROLA_VOICES,
    PICO_VOICES,
    RHVOICE_VOICES,
    SAMPLE_RATE,
    EspeakError,
    SynthError,
    Voice,
    synthesize,
    versions,
)

__all__ = [
    "Clip",
    "Voice",
    "SynthError",
    "EspeakError",
    "training_set",
    "dev_set",
    "test_sets",
    "sample_clip",
    "synthesize_clip",
    "synthesize_many",
    "versions",
]

ESPEAK_ACCENTS = ["en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029"]
TRAIN_VARIANTS = ["", "m1", "m2", "m3", "m4", "m7", "f1", "f2", "f5"]
HELDOUT_VARIANTS = ["m6", "f4"]
LONG_SECONDS = (20.0, 40.0)
PAUSE_SECONDS = (0.15, 1.2)
TEST_PAUSE_SECONDS = (0.3, 1.5)
LONG_TEST_MIN_SECONDS = 600.0
# Seconds per word at speed 1.0, measured on espeak-ng and flite (random sequences have longer, rarer words).
SECONDS_PER_WORD = {"sequence": 0.41, "sentence": 0.27}

# The shipped sample (demo_model/): a test-pool sentence without held-out words, by a held-out espeak-ng variant.
SAMPLE_TEXT = "if you wait long enough it will go away"


@dataclass(frozen=True)
class Clip:
    """Text segments spoken one after another by ``voice`` (or by ``voices``, one per segment, when given),
    joined by seeded pauses, optionally augmented."""

    texts: tuple[str, ...]
    voice: Voice
    seed: int
    augment: bool = False
    kinds: tuple[str, ...] = ()  # "sequence" or "sentence" per segment
    pause_range: tuple[float, float] = PAUSE_SECONDS
    voices: tuple[Voice, ...] = ()  # one per segment; empty: all by ``voice``
    speed_perturb: float = 0.0  # probability of augment.py's speed perturbation (with ``augment``)

    def segment_voice(self, i: int) -> Voice:
        """The voice of segment ``i``."""
        return self.voices[i] if self.voices else self.voice

    @property
    def text(self) -> str:
        """The transcript: the segments' words joined by spaces."""
        return " ".join(self.texts)

    def describe(self) -> dict:
        out = {
            "text": self.text,
            "segments": len(self.texts),
            "voice": asdict(self.voice),
            "seed": self.seed,
            "augment": self.augment,
        }
        if self.speed_perturb:
            out["speed_perturb"] = self.speed_perturb
        if self.voices:
            out["voices"] = [asdict(v) for v in self.voices]
        return out


def _estimate_s(segment: str, kind: str, voice: Voice) -> float:
    return len(segment.split()) * SECONDS_PER_WORD[kind] / voice.speed + 0.3


# The training voices of the synthesizers beyond espeak-ng and flite (``extra_voice_fraction``), one draw each.
EXTRA_VOICES = (
    *(("mbrola", n) for n in MBROLA_VOICES),
    *(("rhvoice", n) for n in RHVOICE_VOICES),
    *(("pico", n) for n in PICO_VOICES),
)


def _extra_voice(rng: random.Random) -> Voice:
    synth, name = rng.choice(EXTRA_VOICES)
    if synth == "mbrola":
        return Voice(synth, name, speed=round(rng.uniform(0.75, 1.2), 3), pitch=rng.randint(30, 70))
    # RHVoice and pico: speed factor and pitch in percent of the voice's own.
    return Voice(synth, name, speed=round(rng.uniform(0.8, 1.3), 3), pitch=rng.randint(85, 120))


def _train_voice(rng: random.Random, extra: float = 0.0) -> Voice:
    # At extra == 0 no draw is spent, so a seed gives the clips of earlier versions.
    if extra > 0 and rng.random() < extra:
        return _extra_voice(rng)
    if rng.random() < 0.5:
        variant = rng.choice(TRAIN_VARIANTS)
        return Voice(
            "espeak",
            rng.choice(ESPEAK_ACCENTS) + (f"+{variant}" if variant else ""),
            speed=round(rng.uniform(0.7, 1.15), 3),
            pitch=rng.randint(25, 75),
            gap=rng.choice([0, 0, 1, 2, 3]),
        )
    name = rng.choice(FLITE_VOICES)
    pitch = None if rng.random() < 0.3 else round(FLITE_DEFAULT_F0[name] * rng.uniform(0.8, 1.25))
    return Voice("flite", name, speed=round(rng.uniform(0.75, 1.3), 3), pitch=pitch)


def _heldout_voice(rng: random.Random, synth: str) -> Voice:
    """A test voice: espeak-ng with a held-out variant, flite at new settings, or festival."""
    if synth == "espeak":
        return Voice(
            "espeak",
            f"{rng.choice(ESPEAK_ACCENTS)}+{rng.choice(HELDOUT_VARIANTS)}",
            speed=round(rng.uniform(0.75, 1.1), 3),
            pitch=rng.randint(30, 70),
            gap=rng.choice([0, 1, 2]),
        )
    if synth == "flite":
        name = rng.choice(FLITE_VOICES)
        return Voice(
            "flite",
            name,
            speed=round(rng.uniform(0.8, 1.2), 3),
            pitch=round(FLITE_DEFAULT_F0[name] * rng.uniform(0.85, 1.15)),
        )
    name = rng.choice(FESTIVAL_VOICES)
    return Voice(
        "festival",
        name,
        speed=round(rng.uniform(0.85, 1.15), 3),
        pitch=rng.randint(-2, 2) if name.endswith("_hts") else None,
    )


def _train_segment(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.5:
        return text.random_sequence(rng), "sequence"
    return rng.choice(text.sentence_split()["train"]), "sentence"


def training_set(
    seed: int = 0,
    hours: float | None = 24.0,
    clips: int | None = None,
    long_fraction: float = 0.3,
    mixed_voice_fraction: float = 0.0,
    speed_perturb: float = 0.0,
    extra_voice_fraction: float = 0.0,
) -> list[Clip]:
    """The training clips: ``clips`` of them, or else clips until the estimated audio reaches ``hours``.

    Args:
        long_fraction: share of the (estimated) audio time in 20-40 s clips; each new clip is long while the long
            clips' share is below it.
        mixed_voice_fraction: share of the long clips whose segments each have their own training voice. At 0 the
            random draws are those of earlier versions, so a seed gives the same clips as before.
        speed_perturb: probability that a clip's augmentation starts with a speed (and formant) change of
            0.85-1.15x (``augment.py``); 0 keeps the draws of earlier versions.
        extra_voice_fraction: share of the voices (of clips and of mixed-voice segments) drawn from MBROLA, RHVoice
            and SVOX Pico (``EXTRA_VOICES``, one draw per voice) instead of espeak-ng and flite; festival stays held
            out. 0 keeps the draws of earlier versions.
    Raises:
        ValueError: neither ``hours`` nor ``clips``, or a fraction outside [0, 1].
    """
    if clips is None and hours is None:
        raise ValueError("give hours or clips")
    fractions = (
        ("long_fraction", long_fraction),
        ("mixed_voice_fraction", mixed_voice_fraction),
        ("speed_perturb", speed_perturb),
        ("extra_voice_fraction", extra_voice_fraction),
    )
    for name, value in fractions:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    rng = random.Random(seed)
    out: list[Clip] = []
    total_s = long_s = 0.0
    # hours is only read when clips is None, where the caller gives it (it defaults to 24).
    while (len(out) < clips) if clips is not None else (total_s < hours * 3600):  # type: ignore[operator]
        voice = _train_voice(rng, extra_voice_fraction)
        long = long_fraction > 0 and long_s <= long_fraction * total_s
        target = rng.uniform(*LONG_SECONDS) if long else 0.0
        mixed = long and mixed_voice_fraction > 0 and rng.random() < mixed_voice_fraction
        segments: list = []
        kinds: list = []
        voices: list = []
        est = 0.0
        while not segments or est < target:
            seg, kind = _train_segment(rng)
            segments.append(seg)
            kinds.append(kind)
            voices.append(voice if not mixed or len(segments) == 1 else _train_voice(rng, extra_voice_fraction))
            est += _estimate_s(seg, kind, voices[-1]) + (sum(PAUSE_SECONDS) / 2 if len(segments) > 1 else 0)
        out.append(
            Clip(
                tuple(segments),
                voice,
                seed=rng.getrandbits(32),
                augment=True,
                kinds=tuple(kinds),
                voices=tuple(voices) if mixed else (),
                speed_perturb=speed_perturb,
            )
        )
        total_s += est
        long_s += est if long else 0.0
    return out


def dev_set(n: int, seed: int = 1) -> list[Clip]:
    """``n`` short clean dev clips: half new random sequences of training words, half dev-pool sentences, spoken
    by held-out espeak-ng variants and flite at new settings (both available wherever training runs)."""
    rng = random.Random(seed)
    pool = list(text.sentence_split()["dev"])
    rng.shuffle(pool)
    out = []
    for i in range(n):
        voice = _heldout_voice(rng, "espeak" if i % 2 == 0 else "flite")
        if i % 4 < 2:
            segment, kind = text.random_sequence(rng), "sequence"
        else:
            segment, kind = pool[(i // 2) % len(pool)], "sentence"
        out.append(Clip((segment,), voice, seed=rng.getrandbits(32), kinds=(kind,)))
    return out


def test_sets(seed: int = 2026, n: int = 200, long_seconds: float = LONG_TEST_MIN_SECONDS) -> dict[str, list[Clip]]:
    """The four held-out test sets: ``random``, ``sentences``, ``festival`` (``n`` clips each) and ``long`` (clips
    to be joined into one recording of at least ``long_seconds``; ``long_recording`` joins them).

    The test sentences are drawn without replacement across the sets, so no sentence is in two of them.

    Raises:
        ValueError: the test pool has too few sentences for ``n``.
    """
    rng = random.Random(seed)
    pool = list(text.sentence_split()["test"])
    rng.shuffle(pool)
    need = n + n // 2 + int(long_seconds / 4)
    if need > len(pool):
        raise ValueError(f"{need} test sentences needed, the pool has {len(pool)}; lower n or long_seconds")

    def sentence() -> tuple[str, str]:
        return pool.pop(), "sentence"

    def sequence() -> tuple[str, str]:
        return text.random_sequence(rng, training=False, heldout_share=0.1), "sequence"

    def clip(segment: tuple[str, str], synth: str, pauses=PAUSE_SECONDS) -> Clip:
        return Clip(
            (segment[0],), _heldout_voice(rng, synth), seed=rng.getrandbits(32), kinds=(segment[1],), pause_range=pauses
        )

    sets = {
        "random": [clip(sequence(), "espeak" if i % 2 == 0 else "flite") for i in range(n)],
        "sentences": [clip(sentence(), "espeak" if i % 2 == 0 else "flite") for i in range(n)],
        "festival": [clip(sequence() if i % 2 == 0 else sentence(), "festival") for i in range(n)],
        "long": [],
    }
    est = 0.0
    synths = ("espeak", "flite", "festival")
    # A 10 % margin over the estimate so the joined recording reaches long_seconds; long_recording checks it.
    while est < 1.1 * long_seconds:
        i = len(sets["long"])
        c = clip(sequence() if i % 3 == 1 else sentence(), synths[i % 3], TEST_PAUSE_SECONDS)
        sets["long"].append(c)
        est += _estimate_s(c.texts[0], c.kinds[0], c.voice) + sum(TEST_PAUSE_SECONDS) / 2
    return sets


def sample_clip() -> Clip:
    """The shipped sample: ``SAMPLE_TEXT`` by the held-out variant ``en-us+f4`` at 157 words/min, pitch 45."""
    return Clip((SAMPLE_TEXT,), Voice("espeak", "en-us+f4", speed=0.9, pitch=45, gap=1), seed=0, kinds=("sentence",))


def synthesize_clip(clip: Clip, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """One clip's float32 audio: its segments spoken by its voice (or voices, each at a level of its own drawn
    uniformly in +-6 dB), joined by pauses drawn from its seed, then augmented when ``clip.augment``
    (``augment.py``). Raises ``SynthError``."""
    from .augment import AugmentRecipe, augment

    gen = np.random.default_rng(clip.seed)
    parts = []
    for i, segment in enumerate(clip.texts):
        if i:
            parts.append(np.zeros(int(gen.uniform(*clip.pause_range) * sample_rate), dtype=np.float32))
        audio = synthesize(segment, clip.segment_voice(i), sample_rate)
        if clip.voices:
            audio = audio * np.float32(10.0 ** (gen.uniform(-6.0, 6.0) / 20.0))
        parts.append(audio)
    audio = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if clip.augment:
        audio, _ = augment(audio, gen, sample_rate, AugmentRecipe(speed_p=clip.speed_perturb))
    return audio


def _work(args: tuple[Clip, int, bool]):
    clip, rate, as_int16 = args
    audio = synthesize_clip(clip, rate)
    if as_int16:
        return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype(np.int16)
    return audio


def synthesize_many(
    clips: list[Clip],
    sample_rate: int = SAMPLE_RATE,
    workers: int | None = None,
    as_int16: bool = False,
    progress: bool = False,
) -> list[np.ndarray]:
    """``synthesize_clip`` for many clips on a pool of worker processes, in input order.

    Args:
        workers: processes (default: all cores; 1 runs in this process).
        as_int16: return int16 PCM (half the memory of float32; training keeps its hours of audio this way).
        progress: print a line every 10 % to stdout.
    Raises:
        SynthError: from the first clip that failed.
    """
    workers = workers or os.cpu_count() or 1
    jobs = [(c, sample_rate, as_int16) for c in clips]
    if workers == 1 or len(clips) < 4:
        return [_work(j) for j in jobs]
    import multiprocessing as mp

    out = []
    step = max(1, len(jobs) // 10)
    # "spawn": the caller may already hold torch's thread pools, which a fork would copy in a broken state.
    with mp.get_context("spawn").Pool(workers) as pool:
        for i, audio in enumerate(pool.imap(_work, jobs, chunksize=max(1, min(32, len(jobs) // (workers * 8))))):
            out.append(audio)
            if progress and (i + 1) % step == 0:
                print(f"  synthesized {i + 1}/{len(jobs)} clips", flush=True)
    return out


def long_recording(
    clips: list[Clip],
    audio: list[np.ndarray],
    min_seconds: float = LONG_TEST_MIN_SECONDS,
    sample_rate: int = SAMPLE_RATE,
) -> tuple[np.ndarray, list[dict]]:
    """Join the ``long`` test clips into one recording with seeded pauses between them.

    Returns:
        the float32 recording and one row per clip: ``text``, ``start`` and ``end`` (seconds in the recording),
        ``voice``.
    Raises:
        ValueError: the recording is shorter than ``min_seconds``.
    """
    parts: list[np.ndarray] = []
    rows: list[dict] = []
    pos = 0
    for clip, a in zip(clips, audio):
        gen = np.random.default_rng(clip.seed)
        if parts:
            pause = np.zeros(int(gen.uniform(*clip.pause_range) * sample_rate), dtype=np.float32)
            parts.append(pause)
            pos += len(pause)
        a = a.astype(np.float32) / (32767.0 if a.dtype == np.int16 else 1.0)
        rows.append(
            {
                "text": clip.text,
                "start": round(pos / sample_rate, 3),
                "end": round((pos + len(a)) / sample_rate, 3),
                "voice": clip.voice.describe(),
            }
        )
        parts.append(a)
        pos += len(a)
    if pos / sample_rate < min_seconds:
        raise ValueError(f"long recording is {pos / sample_rate:.0f} s, shorter than {min_seconds:.0f} s")
    return np.concatenate(parts), rows
