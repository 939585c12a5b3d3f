"""The first demo model's corpus (still shipped until the v2 model replaces it): a small grammar spoken by espeak-ng.

The shipped ``demo_model/parakeet-tdt-demo.nemo`` was trained on this corpus; its tests (the sample clip, the
held-out speech of ``tests/conftest.py``) regenerate material from here while its ``train_log.json`` has no
``"corpus"`` entry. ``corpus.py`` is the corpus ``parakeet-train-demo`` uses now.

Sentences come from a fixed word list (about 300 words) and a handful of templates. Voice settings (espeak-ng
variant, speed in words per minute, pitch 0-99, gap between words in units of 10 ms) are drawn per utterance.
The held-out split uses variants that training never hears, speeds and pitches between the training grid's
values, and sentences that are not in the training set, so its WER measures generalisation, not recall.

espeak-ng is called as a program (``espeak-ng --stdout``), its 22.05 kHz output resampled to 16 kHz with libsoxr.
Its output is deterministic for a given espeak-ng version; the version is recorded with the trained model.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
from dataclasses import dataclass

import numpy as np

from .synth import EspeakError, _env, program, versions

DETERMINERS = "the a this that every some my your our their his her".split()
NUMBERS = "two three four five six seven eight nine ten eleven twelve twenty many few".split()
ADJECTIVES = """old young small big little tall short red green blue yellow white black brown bright dark quiet
loud happy sad quick slow warm cold soft hard clean busy empty heavy new early late gentle strange friendly
careful lazy clever hungry tired brave kind proud simple rich poor wild calm""".split()
# Nouns whose plural is the noun + "s", so the plural forms need no exceptions list.
NOUNS = """teacher doctor farmer driver baker king queen dog cat horse bird rabbit lion bear house garden river
bridge road city village forest mountain window door table chair book letter story song picture car train boat
ship plane bicycle apple cake tree flower stone hill lake island school market station kitchen office
morning evening night winter summer box key clock phone computer lamp ball hat coat shoe bag ticket map camera
girl boy friend brother sister mother father student window cup plate pencil""".split()
NOUNS = list(dict.fromkeys(NOUNS))
MASS_NOUNS = "water bread milk coffee music rain snow money paper".split()
VERBS_TRANSITIVE = """saw found carried painted opened closed watched followed cleaned visited bought sold built
moved pushed pulled lifted dropped wanted liked needed helped called heard remembered forgot counted washed fixed
packed kicked caught held took brought read wrote drew chose met""".split()
VERBS_INTRANSITIVE = """ran walked slept laughed smiled waited jumped danced sang swam arrived stayed worked
played talked listened rested cried shouted sat""".split()
PREPOSITIONS = "in on under near behind beside over across through into from with around along past".split()
ADVERBS = """slowly quickly quietly loudly carefully happily today yesterday again always never often soon later
together""".split()
DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
TIME_PHRASES = ([f"on {d}" for d in DAYS] + ["last week", "next week", "at night", "in the morning",
                                              "in the evening", "this afternoon"])

# The shipped sample sentence; ``training_sentences`` never yields it.
SAMPLE_TEXT = "seven hungry birds sang in the garden on sunday"

ESPEAK_RATE = 22050
TRAIN_VOICES = ["en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029"]
TRAIN_VARIANTS = ["", "m1", "m2", "m3", "m4", "m7", "f1", "f2", "f5"]
HELDOUT_VARIANTS = ["m6", "f4"]
TRAIN_SPEEDS = list(range(130, 200, 10))  # words per minute
HELDOUT_SPEEDS = list(range(135, 195, 10))
TRAIN_PITCHES = list(range(30, 72, 6))
HELDOUT_PITCHES = list(range(33, 69, 6))


def vocabulary() -> list[str]:
    """Every word the grammar can produce, sorted (the corpus' closed vocabulary)."""
    words = set(DETERMINERS + NUMBERS + ADJECTIVES + NOUNS + MASS_NOUNS + VERBS_TRANSITIVE + VERBS_INTRANSITIVE
                + PREPOSITIONS + ADVERBS + DAYS + [n + "s" for n in NOUNS])
    for phrase in TIME_PHRASES + ["where is the", "there are"]:
        words.update(phrase.split())
    return sorted(words)


def _noun_phrase(rng: random.Random) -> str:
    adj = [rng.choice(ADJECTIVES)] if rng.random() < 0.5 else []
    return " ".join([rng.choice(DETERMINERS), *adj, rng.choice(NOUNS)])


def random_sentence(rng: random.Random) -> str:
    """One sentence of the grammar, lower case, no punctuation (the demo model's output alphabet)."""
    kind = rng.random()
    if kind < 0.35:
        words = [_noun_phrase(rng), rng.choice(VERBS_TRANSITIVE),
                 _noun_phrase(rng) if rng.random() < 0.8 else rng.choice(MASS_NOUNS)]
        if rng.random() < 0.4:
            words += [rng.choice(PREPOSITIONS), _noun_phrase(rng)]
        if rng.random() < 0.3:
            words.append(rng.choice(ADVERBS))
    elif kind < 0.6:
        words = [_noun_phrase(rng), rng.choice(VERBS_INTRANSITIVE), rng.choice(PREPOSITIONS), _noun_phrase(rng)]
        if rng.random() < 0.4:
            words.append(rng.choice(TIME_PHRASES))
    elif kind < 0.8:
        adj = [rng.choice(ADJECTIVES)] if rng.random() < 0.5 else []
        words = [rng.choice(NUMBERS), *adj, rng.choice(NOUNS) + "s", rng.choice(VERBS_INTRANSITIVE)]
        if rng.random() < 0.6:
            words += [rng.choice(PREPOSITIONS), _noun_phrase(rng)]
        if rng.random() < 0.3:
            words.append(rng.choice(TIME_PHRASES))
    elif kind < 0.9:
        words = [rng.choice(TIME_PHRASES), _noun_phrase(rng), rng.choice(VERBS_TRANSITIVE),
                 rng.choice(NUMBERS), rng.choice(NOUNS) + "s"]
    elif kind < 0.95:
        adj = [rng.choice(ADJECTIVES)] if rng.random() < 0.5 else []
        words = ["where is the", *adj, rng.choice(NOUNS)]
    else:
        words = ["there are", rng.choice(NUMBERS), rng.choice(NOUNS) + "s", rng.choice(PREPOSITIONS),
                 _noun_phrase(rng)]
    return " ".join(words)


@dataclass(frozen=True)
class Utterance:
    """One sentence and the espeak-ng settings that speak it."""

    text: str
    voice: str  # espeak-ng voice, with "+variant" when a variant is set
    speed: int  # words per minute
    pitch: int  # 0..99
    gap: int  # extra pause between words, units of 10 ms


def _utterance(rng: random.Random, text: str, variants: list[str], speeds: list[int], pitches: list[int],
               gaps: list[int]) -> Utterance:
    variant = rng.choice(variants)
    base = rng.choice(TRAIN_VOICES)
    return Utterance(text, base + (f"+{variant}" if variant else ""), rng.choice(speeds), rng.choice(pitches),
                     rng.choice(gaps))


def training_set(n: int, seed: int) -> list[Utterance]:
    """``n`` training utterances (sentences may repeat with other voices); never the sample sentence."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        text = random_sentence(rng)
        if text != SAMPLE_TEXT:
            out.append(_utterance(rng, text, TRAIN_VARIANTS, TRAIN_SPEEDS, TRAIN_PITCHES, [0, 1, 2, 3]))
    return out


def heldout_set(n: int, seed: int, exclude: set[str]) -> list[Utterance]:
    """``n`` utterances with sentences outside ``exclude`` and voice settings training never uses.

    Args:
        n: number of utterances (distinct sentences).
        seed: selects sentences and settings; use one not used for training.
        exclude: sentences to avoid (the training sentences and the sample).
    Raises:
        RuntimeError: the grammar did not yield ``n`` new sentences in a bounded number of draws.
    """
    rng = random.Random(seed)
    out, seen = [], set(exclude) | {SAMPLE_TEXT}
    for _ in range(200 * n):
        text = random_sentence(rng)
        if text in seen:
            continue
        seen.add(text)
        out.append(_utterance(rng, text, HELDOUT_VARIANTS, HELDOUT_SPEEDS, HELDOUT_PITCHES, [1, 2]))
        if len(out) == n:
            return out
    raise RuntimeError(f"only {len(out)} new sentences after {200 * n} draws; lower n")


def sample_utterance() -> Utterance:
    """The shipped sample clip's settings: a held-out variant, speed and pitch."""
    return Utterance(SAMPLE_TEXT, "en-us+f4", 155, 45, 1)


def espeak_program() -> str:
    """Path of the espeak-ng program (``$ESPEAK_NG``, ``$PARAKEET_TTS_PREFIX/usr/bin`` or PATH).

    Raises:
        EspeakError: not found; install the Debian package ``espeak-ng``.
    """
    return program("espeak")[0]


def espeak_version() -> str:
    """espeak-ng's version line, e.g. ``eSpeak NG text-to-speech: 1.51 ...``."""
    return versions(["espeak"])["espeak"]


def synthesize(utt: Utterance, sample_rate: int = 16000) -> np.ndarray:
    """Speak one utterance with espeak-ng.

    Returns:
        float32 mono waveform at ``sample_rate`` Hz (espeak-ng's 22.05 kHz output resampled by libsoxr, HQ).
    Raises:
        EspeakError: espeak-ng missing, failing, or returning no audio.
    """
    import soundfile as sf

    from ..audio import resample, to_mono

    cmd = [espeak_program(), "-v", utt.voice, "-s", str(utt.speed), "-p", str(utt.pitch), "-g", str(utt.gap),
           "--stdout", utt.text]
    proc = subprocess.run(cmd, capture_output=True, env=_env())
    if proc.returncode != 0 or len(proc.stdout) < 100:
        raise EspeakError(f"espeak-ng failed ({proc.returncode}) for {cmd}: {proc.stderr.decode(errors='replace')}")
    # espeak-ng streams to stdout without knowing the length, so the RIFF sizes are placeholders; libsndfile
    # reads such a WAV to the end of the data it has.
    samples, rate = sf.read(io.BytesIO(proc.stdout), dtype="float32")
    return resample(to_mono(samples), rate, sample_rate)


def synthesize_many(utts: list[Utterance], sample_rate: int = 16000, workers: int | None = None) -> list[np.ndarray]:
    """``synthesize`` for many utterances on a thread pool (each call is a separate espeak-ng process)."""
    from concurrent.futures import ThreadPoolExecutor

    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda u: synthesize(u, sample_rate), utts))
