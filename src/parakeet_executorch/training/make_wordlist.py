"""Regenerate ``training/data/words.tsv``, the demo corpus' vocabulary (run once by hand; not a dependency).

The list is the most frequent English words of wordfreq 3.1.1 (``top_n_list("en", ...)``, its "best" list),
kept only when they are
- plain lower-case a-z words (no digits, apostrophes or hyphens),
- entries of Debian's ``wamerican`` dictionary spelled in lower case, which drops proper nouns ("John" is
  capitalised there), abbreviations ("TV", "Mr") and fragments wordfreq's tokenizer makes ("didn", "ll"),
  plus the pronoun "i", which the dictionary lists as "I",
- with a vowel (a, e, i, o, u or y: drops unit symbols such as "mm"),
- not single letters other than "a" and "i", and not in a short list of slurs and profanity,
until ``--words`` are collected. Each row is ``word<TAB>zipf<TAB>phonemes``: wordfreq's Zipf frequency
(log10 of occurrences per billion words) and espeak-ng's phoneme string for the word spoken alone
(``espeak-ng -q -x``), which ``training/text.py`` uses to find homophones.

Usage (wordfreq is 56 MB; install it into a throw-away folder)::

    pip install --target /tmp/wfenv wordfreq==3.1.1
    PYTHONPATH=/tmp/wfenv:src python -m parakeet_executorch.training.make_wordlist
"""

from __future__ import annotations

import argparse
import re
import subprocess
from importlib import metadata
from pathlib import Path

OUT = Path(__file__).with_name("data") / "words.tsv"
DICTIONARY = Path("/usr/share/dict/american-english")
# Words a demo model should not be taught to print, whatever their frequency.
EXCLUDED = set(
    """fuck fucking fucked fucker shit shitty bitch bitches damn damned dick cock cunt pussy whore slut
nigga nigger fag faggot retard retarded porn porno sex sexy boobs tits ass asshole bastard piss pissed crap
rape raped rapist""".split()
)


def main(argv: list[str] | None = None) -> int:
    import wordfreq

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--words", type=int, default=5000)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    allowed = {w for w in DICTIONARY.read_text().split() if re.fullmatch(r"[a-z]+", w)} | {"i"}
    words = []
    for w in wordfreq.top_n_list("en", 40000):
        if (
            re.fullmatch(r"[a-z]*[aeiouy][a-z]*", w)
            and w in allowed
            and (len(w) > 1 or w in "ai")
            and w not in EXCLUDED
        ):
            words.append(w)
            if len(words) == args.words:
                break
    if len(words) < args.words:
        raise SystemExit(f"only {len(words)} words qualify")
    proc = subprocess.run(
        ["espeak-ng", "-q", "-x", "-v", "en-us"],
        input="\n".join(words) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    phonemes = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if len(phonemes) != len(words):
        raise SystemExit(f"espeak-ng returned {len(phonemes)} phoneme lines for {len(words)} words")
    version = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout.split("Data")[0]
    lines = [
        f"# {len(words)} words: wordfreq {metadata.version('wordfreq')} top English words in wamerican; "
        f"phonemes by {version.strip()} (en-us)",
        "# Frequencies from wordfreq (Robyn Speer et al.), whose data is licensed CC BY-SA 4.0; made by "
        "training/make_wordlist.py",
    ]
    lines += [f"{w}\t{wordfreq.zipf_frequency(w, 'en'):.2f}\t{ph}" for w, ph in zip(words, phonemes)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(words)} words, zipf {wordfreq.zipf_frequency(words[-1], 'en'):.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
