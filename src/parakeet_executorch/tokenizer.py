"""SentencePiece tokenizer as Parakeet uses it (NeMo's SentencePieceTokenizer, ids 0..V-1, blank = V)."""

from __future__ import annotations

import warnings
from pathlib import Path

from .pte_format import tokenizer_fingerprint


class TokenizerError(ValueError):
    """The tokenizer file is missing, unreadable, or does not fit the model."""


class TokenizerWarning(UserWarning):
    """The tokenizer could not be checked fully against the model (a .pte exported without a fingerprint)."""


class Tokenizer:
    """Thin wrapper over ``sentencepiece.SentencePieceProcessor``.

    Mirrors what NeMo's ``SentencePieceTokenizer`` returns for ``ids_to_text`` and ``ids_to_tokens``.

    Args:
        path: a SentencePiece ``tokenizer.model`` file.
    Raises:
        TokenizerError: the file is missing or not a SentencePiece model.
    """

    def __init__(self, path: str | Path):
        import sentencepiece as spm

        path = Path(path)
        if not path.is_file():
            raise TokenizerError(f"tokenizer file not found: {path}. Pass the tokenizer.model written by the export.")
        self.path = path
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.Load(str(path))
        except Exception as exc:
            raise TokenizerError(f"{path} is not a SentencePiece model: {exc}") from exc

    @property
    def vocab_size(self) -> int:
        """Number of token ids (the blank id is this number)."""
        return int(self._sp.GetPieceSize())

    def check_vocab(self, model_vocab_size: int) -> None:
        """Raise TokenizerError when this tokenizer's size differs from the model's vocabulary size."""
        if self.vocab_size != model_vocab_size:
            raise TokenizerError(
                f"tokenizer {self.path} has {self.vocab_size} tokens but the model's vocabulary has "
                f"{model_vocab_size}; use the tokenizer.model exported next to this .pte"
            )

    @property
    def fingerprint(self) -> str:
        """Hex SHA-256 of the serialized SentencePiece model (``pte_format.tokenizer_fingerprint``)."""
        return tokenizer_fingerprint(self._sp.serialized_model_proto())

    def check_fingerprint(self, expected: str, model_name: str) -> None:
        """Raise TokenizerError unless this tokenizer is the one the model was exported with.

        Args:
            expected: the .pte's ``tokenizer_sha256`` (hex); "" for a .pte exported before it existed, which only
                warns (TokenizerWarning): the size check is then all there is.
            model_name: the .pte's path, for the messages.
        """
        if not expected:
            warnings.warn(
                TokenizerWarning(
                    f"{model_name} carries no tokenizer fingerprint (exported by an older parakeet-export), so "
                    f"{self.path} is checked by size only; re-export the model to have it checked fully"
                ),
                stacklevel=2,
            )
            return
        if self.fingerprint != expected:
            raise TokenizerError(
                f"tokenizer {self.path} is not the one {model_name} was exported with (SentencePiece model SHA-256 "
                f"{self.fingerprint[:12]}..., expected {expected[:12]}...): its ids would decode to the wrong text. "
                "Use the tokenizer.model exported next to this .pte, or pass --ignore-tokenizer-fingerprint if "
                "you know they match"
            )

    def piece(self, token_id: int) -> str:
        """The SentencePiece piece of one id, with its word-boundary marker '▁' kept."""
        return self._sp.IdToPiece(int(token_id))

    def decode(self, ids: list[int]) -> str:
        """Text of a token id sequence (SentencePiece detokenization)."""
        return self._sp.DecodeIds([int(i) for i in ids])

    def decode_pieces(self, pieces: list[str]) -> str:
        """Text of a piece sequence (NeMo's ``tokens_to_text``)."""
        return self._sp.DecodePieces(list(pieces))
