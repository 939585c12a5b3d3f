"""Text for the demo corpus: a 5,000-word English vocabulary, random word sequences and natural sentences.

Targets are lower-case a-z words separated by single spaces (no punctuation, no digits), as the model writes them.

Vocabulary (``data/words.tsv``, made once by ``make_wordlist.py``): the 5,000 most frequent English words of
wordfreq 3.1.1 that Debian's ``wamerican`` dictionary spells in lower case, with their Zipf frequency and the
espeak-ng phonemes of the word spoken alone.

Held-out words (``heldout_words()``): 250 words drawn with ``random.Random(HELDOUT_WORD_SEED)`` from the words of
frequency rank 300 and below that share their pronunciation with no other word. They never occur in training text:
random sequences skip them, and every sentence containing one goes to the test pool.

Random sequences (``random_sequence``): 2-16 words drawn independently, with weights proportional to
``10 ** (zipf * RANDOM_WEIGHT_EXPONENT)`` (frequency ** 0.5, which flattens Zipf's law so that the 5,000th word is
still drawn about once per 10,000 words). Training sequences use only one spelling per pronunciation, the most
frequent ("to", never "too" or "two"), because without a grammar a homophone cannot be told from the audio;
sentences keep every spelling, so the model still learns them from context.

Sentences (``data/sentences.txt``, made once by ``write_sentences`` from Debian's fortune databases): fortunes are
split into sentences, lower-cased, contractions expanded ("don't" -> "do not"), integers spelled out, other
punctuation removed; a sentence is kept when it has 3-24 words, all in the vocabulary. The split is by a hash of the
text, independent of file order: sentences with a held-out word, and 6 % of the rest, are the test pool; another
3 % are the dev pool; the rest are training sentences.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from pathlib import Path

DATA = Path(__file__).with_name("data")
WORDS_FILE = DATA / "words.tsv"
SENTENCES_FILE = DATA / "sentences.txt"
FORTUNES_DIR = Path("/usr/share/games/fortunes")
HELDOUT_WORD_SEED = 24
HELDOUT_WORDS = 250
HELDOUT_MIN_RANK = 300
RANDOM_WEIGHT_EXPONENT = 0.5
SEQUENCE_WORDS = (2, 16)
SENTENCE_WORDS = (3, 24)
TEST_PERCENT, DEV_PERCENT = 6, 3


@functools.cache
def _rows() -> tuple[tuple[str, float, str], ...]:
    rows = []
    for line in WORDS_FILE.read_text().splitlines():
        if line and not line.startswith("#"):
            word, zipf, phonemes = line.split("\t")
            rows.append((word, float(zipf), phonemes))
    return tuple(rows)


def vocabulary() -> list[str]:
    """All 5,000 words, most frequent first (held-out words included: they are in the vocabulary of the tests)."""
    return [w for w, _, _ in _rows()]


def zipf() -> dict[str, float]:
    return {w: z for w, z, _ in _rows()}


@functools.cache
def homophone_groups() -> tuple[tuple[str, ...], ...]:
    """Groups of two or more vocabulary words with the same espeak-ng pronunciation, most frequent first."""
    groups: dict[str, list[str]] = {}
    for w, _, ph in _rows():
        groups.setdefault(ph, []).append(w)
    return tuple(tuple(g) for g in groups.values() if len(g) > 1)


@functools.cache
def heldout_words() -> frozenset[str]:
    """The 250 words that only test material contains (see the module docstring for the rule)."""
    shared = {w for g in homophone_groups() for w in g}
    candidates = [w for w in vocabulary()[HELDOUT_MIN_RANK:] if w not in shared]
    return frozenset(random.Random(HELDOUT_WORD_SEED).sample(candidates, HELDOUT_WORDS))


@functools.cache
def _sequence_words(training: bool) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Words and weights for random sequences: training drops held-out words and the non-first homophones."""
    z = zipf()
    if training:
        dropped = heldout_words() | {w for g in homophone_groups() for w in g[1:]}
        words = [w for w in vocabulary() if w not in dropped]
    else:
        words = vocabulary()
    return tuple(words), tuple(10 ** (z[w] * RANDOM_WEIGHT_EXPONENT) for w in words)


def random_sequence(rng: random.Random, training: bool = True, heldout_share: float = 0.0) -> str:
    """One random word sequence of 2-16 words drawn by (flattened) frequency.

    Args:
        training: draw only from the training words (see ``_sequence_words``); False draws from all 5,000.
        heldout_share: with ``training=False``, the chance that each word is instead a held-out word (uniformly),
            so test sequences contain enough of them to measure.
    """
    words, weights = _sequence_words(training)
    n = rng.randint(*SEQUENCE_WORDS)
    out = rng.choices(words, weights, k=n)
    if not training and heldout_share:
        pool = sorted(heldout_words())
        out = [rng.choice(pool) if rng.random() < heldout_share else w for w in out]
    return " ".join(out)


# --- sentences ---------------------------------------------------------------------------------------------------

_CONTRACTIONS = {
    "can't": "can not",
    "cannot": "can not",
    "won't": "will not",
    "shan't": "shall not",
    "let's": "let us",
    "it's": "it is",
    "that's": "that is",
    "he's": "he is",
    "she's": "she is",
    "what's": "what is",
    "there's": "there is",
    "here's": "here is",
    "who's": "who is",
    "where's": "where is",
    "how's": "how is",
    "i'm": "i am",
    "o'clock": "o clock",
}
_SUFFIXES = (("n't", " not"), ("'re", " are"), ("'ve", " have"), ("'ll", " will"), ("'d", " would"))
_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split()
)
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def spell_number(n: int) -> str:
    """An integer 0 <= n < 10**9 in words, without "and": 1984 -> "one thousand nine hundred eighty four"."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    for size, name in ((10**6, "million"), (1000, "thousand"), (100, "hundred")):
        if n >= size:
            head, rest = divmod(n, size)
            return f"{spell_number(head)} {name}" + ("" if rest == 0 else " " + spell_number(rest))
    raise AssertionError(n)


def normalize(text: str) -> str | None:
    """One sentence as transcript words, or None when it has something that cannot be spoken as plain words.

    Lower case; curly quotes folded; contractions expanded; integers spelled out (decimals, ordinals, currency,
    percentages, other possessives and any non-ASCII letter reject the sentence); hyphens and dashes become spaces;
    the remaining punctuation is dropped.
    """
    t = text.lower().replace("\u2019", "'").replace("\u2018", "'").replace("&", " and ")
    t = t.replace("\u201c", '"').replace("\u201d", '"')
    if re.search(r"\d[.,:/]\d|\d(st|nd|rd|th)\b|[$%#@*=+<>|\\~^_{}\[\]]", t):
        return None
    t = re.sub(r"\d+", lambda m: f" {spell_number(int(m.group()))} " if len(m.group()) <= 9 else " \0 ", t)
    t = re.sub(r"-+|/", " ", t)
    words = []
    for raw in t.split():
        w = raw.strip("\"'`.,;:!?()")
        if not w:
            continue
        if w in _CONTRACTIONS:
            words += _CONTRACTIONS[w].split()
            continue
        for suffix, full in _SUFFIXES:
            if w.endswith(suffix) and len(w) > len(suffix):
                w = w[: -len(suffix)] + full
                break
        w = re.sub(r"[\"`.,;:!?()]", "", w)
        if not re.fullmatch(r"[a-z]+( [a-z]+)?", w):
            return None
        words += w.split()
    return " ".join(words) if words else None


def fortune_sentences(folder: Path = FORTUNES_DIR) -> list[str]:
    """Normalised sentences of every fortune database in ``folder`` (files with a ``.dat`` index beside them),
    in file-name order, before the vocabulary filter. Attribution lines ("-- Mark Twain") are dropped."""
    out = []
    for path in sorted(folder.iterdir()):
        if not path.with_name(path.name + ".dat").is_file():
            continue
        for fortune in path.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            lines = [ln for ln in fortune.splitlines() if not re.match(r"\s*(--|\u2015|\u2014)", ln)]
            body = " ".join(ln.strip() for ln in lines)
            for part in re.split(r"(?<=[.!?;:])\s+|\s[-\u2014]{2,}\s", body):
                s = normalize(part)
                if s:
                    out.append(s)
    return out


def write_sentences(folder: Path = FORTUNES_DIR, out: Path = SENTENCES_FILE) -> int:
    """Write the vocabulary-filtered, de-duplicated fortune sentences to ``data/sentences.txt`` (sorted);
    returns how many. Needs Debian's ``fortunes`` and ``fortunes-min`` packages."""
    vocab = set(vocabulary())
    lo, hi = SENTENCE_WORDS
    kept = sorted(
        {s for s in fortune_sentences(folder) if lo <= len(s.split()) <= hi and all(w in vocab for w in s.split())}
    )
    out.write_text(
        f"# {len(kept)} sentences of Debian's fortune databases (packages fortunes, fortunes-min), "
        "normalised and filtered by training/text.py\n" + "".join(s + "\n" for s in kept)
    )
    return len(kept)


def _bucket(sentence: str) -> int:
    return int(hashlib.sha256(b"demo-v2:" + sentence.encode()).hexdigest(), 16) % 100


@functools.cache
def sentence_split() -> dict[str, tuple[str, ...]]:
    """``{"train": ..., "dev": ..., "test": ...}`` over ``data/sentences.txt`` (rule in the module docstring)."""
    held = heldout_words()
    split: dict[str, list[str]] = {"train": [], "dev": [], "test": []}
    for s in SENTENCES_FILE.read_text().splitlines():
        if not s or s.startswith("#"):
            continue
        b = _bucket(s)
        if b < TEST_PERCENT or any(w in held for w in s.split()):
            split["test"].append(s)
        elif b < TEST_PERCENT + DEV_PERCENT:
            split["dev"].append(s)
        else:
            split["train"].append(s)
    return {k: tuple(v) for k, v in split.items()}


def main(argv: list[str] | None = None) -> int:
    """``python -m parakeet_executorch.training.text``: rewrite data/sentences.txt from the fortunes, and print
    the split's sizes."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])  # type: ignore[union-attr]  # has one
    p.add_argument("--fortunes", type=Path, default=FORTUNES_DIR)
    args = p.parse_args(argv)
    n = write_sentences(args.fortunes)
    sentence_split.cache_clear()
    sizes = {k: len(v) for k, v in sentence_split().items()}
    print(f"wrote {SENTENCES_FILE}: {n} sentences; split {sizes}; {len(heldout_words())} held-out words")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
