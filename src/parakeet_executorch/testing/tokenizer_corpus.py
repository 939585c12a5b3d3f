"""Train a SentencePiece BPE tokenizer locally (no hub download) for the test models.

The corpus is generated: common English words (so real sentences tokenize into word-sized pieces) plus
pseudo-words built from syllables, which give BPE enough distinct merges to reach v3's 8192 pieces.
"""

from __future__ import annotations

import random
from pathlib import Path

ENGLISH_WORDS = """
a about after again against all also an and any are as ask at back be because been before being
between both but by call can come could country day did do does down each even every fellow first
for from get give go good great had has have he her here him his how i if in into is it its just
know last left like little long look make man many may me more most much must my never new no not
now of off old on one only or other our out over own part people place right said same say see
she should so some still such take tell than that the their them then there these they thing think
this those three through time to two under up us use very want was way we well went were what
when where which while who why will with word work world would year you your americans nation
freedom peace public speech voice people free land liberty hope future children history together
spoken morning evening night water light sound small large open close house city river road
""".split()

_ONSETS = [
    "",
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "br",
    "ch",
    "cl",
    "dr",
    "fl",
    "gr",
    "pl",
    "pr",
    "sh",
    "sl",
    "st",
    "str",
    "th",
    "tr",
]
_VOWELS = ["a", "e", "i", "o", "u", "y", "ai", "ea", "ee", "ie", "oa", "oo", "ou"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "nt", "rt", "st", "ck", "sh", "th"]


def corpus_lines(n_lines: int, seed: int) -> list[str]:
    """``n_lines`` lines of generated text, mixing English words and syllable pseudo-words, deterministic in seed."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = []
        for _ in range(rng.randint(6, 16)):
            if rng.random() < 0.6:
                words.append(rng.choice(ENGLISH_WORDS))
            else:
                words.append(
                    "".join(
                        rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(1, 3))
                    )
                )
        line = " ".join(words)
        lines.append(line[0].upper() + line[1:] + rng.choice([".", ".", "?", "!", ","]))
    return lines


def train_tokenizer(out_dir: str | Path, vocab_size: int, seed: int = 0, lines: list[str] | None = None) -> Path:
    """Train a SentencePiece BPE model with exactly ``vocab_size`` pieces into ``out_dir``.

    Writes ``tokenizer.model``, ``tokenizer.vocab`` and ``vocab.txt`` (the files NeMo's BPE tokenizer
    config expects in its ``dir``).

    Args:
        out_dir: existing or new folder.
        vocab_size: number of pieces (NeMo's blank id will equal this number).
        seed: corpus seed.
        lines: training text; default: ``corpus_lines`` (generated, enough for v3's 8192 pieces).
    Returns:
        Path of ``tokenizer.model``.
    """
    import sentencepiece as spm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if lines is None:
        lines = corpus_lines(max(2000, vocab_size * 12), seed)
    text_path = out_dir / "corpus.txt"
    text_path.write_text("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.Train(
        input=str(text_path),
        model_prefix=str(out_dir / "tokenizer"),
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        pad_id=-1,
        num_threads=2,
        minloglevel=2,
        seed_sentencepiece_size=1_000_000,
        shuffle_input_sentence=False,
    )
    text_path.unlink()
    sp = spm.SentencePieceProcessor(model_file=str(out_dir / "tokenizer.model"))
    if sp.GetPieceSize() != vocab_size:
        raise RuntimeError(f"SentencePiece produced {sp.GetPieceSize()} pieces, expected {vocab_size}")
    (out_dir / "vocab.txt").write_text("".join(sp.IdToPiece(i) + "\n" for i in range(vocab_size)))
    return out_dir / "tokenizer.model"
