"""Token, word and segment timestamps and text, against NeMo's own functions on the same decoded tokens."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from parakeet_executorch.decoding.tdt_greedy import DecodedToken
from parakeet_executorch.decoding.timestamps import (
    punctuation_of_vocab,
    segment_spans,
    set_seconds,
    token_spans,
    transcript_text,
    word_spans,
)
from parakeet_executorch.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer(tiny_nemo, tmp_path_factory):
    from parakeet_executorch.export.load import load_nemo_model

    path = tmp_path_factory.mktemp("tok") / "tokenizer.model"
    path.write_bytes(load_nemo_model(str(tiny_nemo)).tokenizer.tokenizer.serialized_model_proto())
    return Tokenizer(path)


def random_tokens(tokenizer, rng, n):
    """Random decoded tokens, weighted towards word starts and punctuation so every rule is exercised."""
    pieces = [tokenizer.piece(i) for i in range(tokenizer.vocab_size)]
    punct = [i for i, p in enumerate(pieces) if p in {".", ",", "?", "!"}]
    starts = [i for i, p in enumerate(pieces) if p.startswith("▁")]
    assert punct and starts, "the test tokenizer should have punctuation and word-start pieces"
    frame, out = 0, []
    for _ in range(n):
        r = rng.random()
        tid = rng.choice(punct) if r < 0.15 else rng.choice(starts) if r < 0.5 else rng.randrange(1, len(pieces))
        duration = rng.choice([0, 1, 2, 3, 4])
        out.append(DecodedToken(tid, frame, duration))
        frame += duration if duration else rng.choice([0, 1])
    return out


def ours(tokenizer, tokens):
    pieces = [tokenizer.piece(i) for i in range(tokenizer.vocab_size)]
    punct = punctuation_of_vocab(pieces)
    ids = [t.id for t in tokens]
    spans = token_spans(tokens, [tokenizer.decode([i]) for i in ids], punct)
    words = word_spans(spans, [pieces[i] for i in ids], tokenizer.decode_pieces, punct)
    segments = segment_spans(words)
    for level in (spans, words, segments):
        set_seconds(level, 0.01, 8)
    return {
        "text": transcript_text(tokenizer.decode(ids), punct),
        "char": [(s.start_offset, s.end_offset, s.start, s.end) for s in spans],
        "word": [(s.text, s.start_offset, s.end_offset, s.start, s.end) for s in words],
        "segment": [(s.text, s.start_offset, s.end_offset, s.start, s.end) for s in segments],
    }


def nemo(nemo_model, tokens):
    from nemo.collections.asr.parts.utils.rnnt_utils import Hypothesis
    from nemo.collections.asr.parts.utils.timestamp_utils import process_timestamp_outputs

    decoding = nemo_model.decoding
    hyp = Hypothesis(
        score=0.0,
        y_sequence=torch.tensor([t.id for t in tokens]),
        dec_state=None,
        timestamp=torch.tensor([t.frame for t in tokens]),
        token_duration=torch.tensor([t.duration for t in tokens]),
    )
    ids = [t.id for t in tokens]
    text = decoding.decode_tokens_to_str_with_strip_punctuation(ids)
    hyp = decoding.compute_rnnt_timestamps(copy.deepcopy(hyp), "all")
    hyp = process_timestamp_outputs(hyp, 8, 0.01)[0]
    ts = hyp.timestamp
    return {
        "text": text,
        "char": [(c["start_offset"], c["end_offset"], c["start"], c["end"]) for c in ts["char"]],
        "word": [(w["word"], w["start_offset"], w["end_offset"], w["start"], w["end"]) for w in ts["word"]],
        "segment": [(s["segment"], s["start_offset"], s["end_offset"], s["start"], s["end"]) for s in ts["segment"]],
    }


@pytest.mark.parametrize("seed", range(40))
def test_random_token_sequences_match_nemo(tokenizer, nemo_model, seed):
    rng = random.Random(seed)
    tokens = random_tokens(tokenizer, rng, rng.choice([1, 2, 5, 30, 80]))
    assert ours(tokenizer, tokens) == nemo(nemo_model, tokens)


def test_punctuation_takes_previous_end_and_closes_segment(tokenizer):
    pieces = [tokenizer.piece(i) for i in range(tokenizer.vocab_size)]
    word = next(i for i, p in enumerate(pieces) if p.startswith("▁") and len(p) > 2)
    dot = pieces.index(".")
    tokens = [DecodedToken(word, 3, 2), DecodedToken(dot, 9, 1), DecodedToken(word, 12, 1)]
    got = ours(tokenizer, tokens)
    assert got["char"][1][:2] == (5, 5)  # the late '.' moved onto the word's end
    assert [s[0] for s in got["segment"]] == [pieces[word][1:] + ".", pieces[word][1:]]
    assert got["segment"][0][1:3] == (3, 5)


def test_empty_token_list():
    assert segment_spans([]) == []
    assert token_spans([], [], set()) == []
