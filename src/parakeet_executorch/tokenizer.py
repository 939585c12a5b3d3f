"""SentencePiece tokenizer as Parakeet uses it (NeMo's SentencePieceTokenizer, ids 0..V-1, blank = V)."""

from __future__ import annotations

from pathlib import Path


class TokenizerError(ValueError):
    """The tokenizer file is missing, unreadable, or does not fit the model."""


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

    def piece(self, token_id: int) -> str:
        """The SentencePiece piece of one id, with its word-boundary marker '▁' kept."""
        return self._sp.IdToPiece(int(token_id))

    def decode(self, ids: list[int]) -> str:
        """Text of a token id sequence (SentencePiece detokenization)."""
        return self._sp.DecodeIds([int(i) for i in ids])

    def decode_pieces(self, pieces: list[str]) -> str:
        """Text of a piece sequence (NeMo's ``tokens_to_text``)."""
        return self._sp.DecodePieces(list(pieces))
