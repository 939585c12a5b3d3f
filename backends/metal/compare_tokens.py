#!/usr/bin/env python3
"""Compare the token ids of two transcripts of the same audio, as ``parakeet-transcribe --format json`` writes them.

    python backends/metal/compare_tokens.py REFERENCE.json CANDIDATE.json MIN_AGREEMENT

Agreement is the number of tokens that difflib matches between the two id sequences (in order), divided by the
length of the longer one: 1.0 means the same tokens, and a token dropped, added or replaced on either side lowers
it. Prints the agreement; exits 1 when it is below MIN_AGREEMENT (a number from 0 to 1), 2 on unusable input.
Only the standard library: it runs on any Python, with or without the package installed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path


class InputError(Exception):
    """A file that is not a single transcript with token ids."""


def token_ids(path: Path) -> list[int]:
    """The token ids of the transcript in ``path`` (one JSON object with a ``tokens`` list of ``{"id": ...}``)."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot read a JSON transcript: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("tokens"), list):
        raise InputError(
            f"{path}: expected one transcript object with a 'tokens' list "
            "(parakeet-transcribe --format json on one audio file, with token timestamps)"
        )
    ids = []
    for i, token in enumerate(obj["tokens"]):
        if not isinstance(token, dict) or not isinstance(token.get("id"), int):
            raise InputError(f"{path}: token {i} has no integer 'id'")
        ids.append(token["id"])
    return ids


def agreement(reference: list[int], candidate: list[int]) -> tuple[int, float]:
    """(matched tokens, matched / length of the longer sequence); two empty sequences agree fully."""
    longer = max(len(reference), len(candidate))
    if longer == 0:
        return 0, 1.0
    matcher = difflib.SequenceMatcher(None, reference, candidate, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    return matched, matched / longer


def fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", type=Path, help="transcript JSON of the reference export (XNNPACK fp32)")
    parser.add_argument("candidate", type=Path, help="transcript JSON of the export under test")
    parser.add_argument("min_agreement", type=fraction, help="lowest passing agreement, 0 to 1 (1 = identical)")
    args = parser.parse_args(argv)
    try:
        ref, cand = token_ids(args.reference), token_ids(args.candidate)
    except InputError as e:
        print(f"compare_tokens: error: {e}", file=sys.stderr)
        return 2
    if not ref:
        print(f"compare_tokens: error: {args.reference} has no tokens; nothing to compare against", file=sys.stderr)
        return 2
    matched, ratio = agreement(ref, cand)
    summary = f"{ratio:.3f} ({matched} tokens matched; reference {len(ref)}, candidate {len(cand)})"
    if ratio < args.min_agreement:
        print(
            f"compare_tokens: error: token agreement {summary} is below {args.min_agreement} "
            f"({args.candidate} against {args.reference})",
            file=sys.stderr,
        )
        return 1
    print(f"compare_tokens: token agreement {summary}, at least {args.min_agreement}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
