"""tokens.txt as sherpa-onnx reads it for a NeMo transducer: "<piece> <id>" per line, NeMo's ids, ``<blk>`` last.

sherpa-onnx checks that tokens.txt has ``vocab_size + 1`` lines (the encoder's metadata counts no blank) and
that ``<blk>`` is the last id; it spells a hypothesis by joining the pieces with "▁" read as a space.

A model that went through a ``.nemo`` (`asr_plugin.formats.export_nemo`, then an import or a fine-tuning run
from it) keeps this project's SentencePiece blank piece ``<blk>`` as a token of its own (NeMo's class 0, which
training never targets), beside NeMo's blank: that token is written as ``<pad>`` (SentencePiece's name for the
piece it is), so that ``<blk>`` names the blank alone.
"""

from __future__ import annotations

from typing import Protocol

from asr_plugin.export.onnx_modules import sherpa_order

BLANK_SYMBOL = "<blk>"
RENAMED_BLANK_PIECE = "<pad>"  # a non-blank token spelled BLANK_SYMBOL (this project's blank piece after a .nemo)


class PieceTable(Protocol):
    vocab_size: int
    blank_id: int

    def id_to_piece(self, token_id: int) -> str: ...


def sherpa_token_lines(tokenizer: PieceTable) -> list[str]:
    """The lines of tokens.txt for `tokenizer` (our ids, blank 0), in sherpa's id order.

    ValueError when a piece could not be read back by sherpa (one with white space, or spelled as another's).
    """
    if tokenizer.blank_id != 0:
        raise ValueError(f"tokenizer blank_id={tokenizer.blank_id}: the export expects this project's blank id 0")
    pieces = {our_id: tokenizer.id_to_piece(our_id) for our_id in range(1, tokenizer.vocab_size)}
    pieces = {our_id: RENAMED_BLANK_PIECE if p == BLANK_SYMBOL else p for our_id, p in pieces.items()}
    pieces[0] = BLANK_SYMBOL
    spelled: dict[str, int] = {}
    lines = []
    for sherpa_id, our_id in enumerate(sherpa_order(tokenizer.vocab_size).tolist()):
        piece = pieces[our_id]
        if not piece or any(c.isspace() for c in piece) or piece in spelled:
            raise ValueError(f"token {our_id} ({piece!r}) cannot be written to sherpa-onnx's tokens.txt")
        spelled[piece] = our_id
        lines.append(f"{piece} {sherpa_id}")
    return lines
