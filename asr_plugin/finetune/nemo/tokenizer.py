"""NeMo's SentencePiece tokenizer with our blank policy: blank is id 0, NeMo's token k is our k + 1."""

from __future__ import annotations

from collections.abc import Sequence

import sentencepiece as spm

BLANK_ID = 0
BLANK_PIECE = "<blk>"


class NemoTokenizer:
    """Text <-> our token ids through a NeMo model's SentencePiece model (NeMo applies no text normalisation).

    Args:
        model_proto: the bytes of the ``.model`` file (from the ``.nemo`` archive).
    """

    blank_id = BLANK_ID

    def __init__(self, model_proto: bytes) -> None:
        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)

    def __getstate__(self) -> dict:
        # SentencePieceProcessor does not pickle (DataLoader workers); its serialized model does.
        return {"model_proto": self._sp.serialized_model_proto()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model_proto"])

    @property
    def vocab_size(self) -> int:
        """Ids including the blank: NeMo's ``num_classes`` + 1, the model's output size."""
        return self._sp.get_piece_size() + 1

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (never the blank)."""
        return [i + 1 for i in self._sp.encode(text, out_type=int)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`; blanks are dropped."""
        return self._sp.decode([int(i) - 1 for i in ids if int(i) != BLANK_ID])

    def id_to_piece(self, token_id: int) -> str:
        """The piece of one id ("<blk>" for 0)."""
        return BLANK_PIECE if int(token_id) == BLANK_ID else self._sp.id_to_piece(int(token_id) - 1)
