"""Sizes and data settings shared by the ONNX export tests (a module of its own so test files import it by name)."""

from __future__ import annotations

from pathlib import Path

from tiny_models import CharTokenizer

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


class LetterPieces(CharTokenizer):
    """CharTokenizer with SentencePiece-style pieces: id k >= 1 is "\u2581" + its letter."""

    def id_to_piece(self, token_id: int) -> str:
        return "\u2581" + self.decode([token_id])
