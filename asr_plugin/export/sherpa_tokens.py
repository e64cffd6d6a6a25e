"""tokens.txt as sherpa-onnx reads it for a NeMo transducer: "<piece> <id>" per line, NeMo's ids, ``<blk>`` last.

sherpa-onnx checks that tokens.txt has ``vocab_size + 1`` lines (the encoder's metadata counts no blank) and
that ``<blk>`` is the last id; it spells a hypothesis by joining the pieces with "▁" read as a space.
"""

from __future__ import annotations

from typing import Protocol

from asr_plugin.export.onnx_modules import sherpa_order

BLANK_SYMBOL = "<blk>"


class PieceTable(Protocol):
    vocab_size: int
    blank_id: int

    def id_to_piece(self, token_id: int) -> str: ...


def sherpa_token_lines(tokenizer: PieceTable) -> list[str]:
    """The lines of tokens.txt for `tokenizer` (our ids, blank 0), in sherpa's id order.

    ValueError when a piece could not be read back by sherpa (one with white space, or a second ``<blk>``).
    """
    if tokenizer.blank_id != 0:
        raise ValueError(f"tokenizer blank_id={tokenizer.blank_id}: the export expects this project's blank id 0")
    lines = []
    for sherpa_id, our_id in enumerate(sherpa_order(tokenizer.vocab_size).tolist()):
        piece = BLANK_SYMBOL if our_id == 0 else tokenizer.id_to_piece(our_id)
        if not piece or any(c.isspace() for c in piece) or (piece == BLANK_SYMBOL and our_id != 0):
            raise ValueError(f"token {our_id} ({piece!r}) cannot be written to sherpa-onnx's tokens.txt")
        lines.append(f"{piece} {sherpa_id}")
    return lines
