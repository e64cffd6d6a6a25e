"""SentencePiece tokenizer with the project's blank policy: the blank is id 0.

Training reserves id 0 for the piece "<blk>" through SentencePiece's pad slot (pad_id=0), a control
symbol: encoding never produces it and decoding drops it. id 1 is "<unk>"; there is no bos/eos.
`vocab_size` counts the blank, so it is the size of the model's output layer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from asr_plugin.data.atomic import write_atomic
from asr_plugin.data.text import normalize_text

BLANK_ID = 0
BLANK_PIECE = "<blk>"
UNK_ID = 1


class Tokenizer:
    """Wraps a SentencePiece model trained by `train_tokenizer`.

    Args:
        model_path: the .model file.
    """

    blank_id = BLANK_ID

    def __init__(self, model_path: str | os.PathLike):
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise FileNotFoundError(f"tokenizer model {self.model_path} does not exist")
        self._sp = spm.SentencePieceProcessor(model_file=str(self.model_path))
        if self._sp.id_to_piece(BLANK_ID) != BLANK_PIECE or not self._sp.is_control(BLANK_ID):
            raise ValueError(f"{self.model_path}: id 0 is {self._sp.id_to_piece(BLANK_ID)!r}, not the control "
                             f"piece {BLANK_PIECE!r}; train it with asr_plugin.data.train_tokenizer")

    @property
    def vocab_size(self) -> int:
        """Number of ids including the blank (the model's output size)."""
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Normalises `text` and returns its token ids (never the blank id 0)."""
        return self._sp.encode(normalize_text(text), out_type=int)

    def decode(self, ids: Sequence[int]) -> str:
        """Turns ids back into text; blanks (0) are dropped."""
        return self._sp.decode([int(i) for i in ids if int(i) != BLANK_ID])

    def id_to_piece(self, token_id: int) -> str:
        """The piece of one id, e.g. "▁THE"."""
        return self._sp.id_to_piece(int(token_id))

    def __getstate__(self) -> dict:
        # SentencePieceProcessor does not pickle; DataLoader workers reload the model from its path.
        return {"model_path": self.model_path}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model_path"])


def train_tokenizer(texts: Iterable[str], model_path: str | os.PathLike, vocab_size: int,
                    model_type: str = "bpe", overwrite: bool = False) -> Tokenizer:
    """Trains a SentencePiece model on `texts` (normalised first) and writes `model_path` (+ .vocab).

    `vocab_size` includes the blank and <unk>. An existing model is kept unless `overwrite`.
    """
    model_path = Path(model_path)
    if model_type not in ("bpe", "unigram"):
        raise ValueError(f"model_type must be 'bpe' or 'unigram', got {model_type!r}")
    if model_path.suffix != ".model":
        raise ValueError(f"model_path must end in .model, got {model_path}")
    if model_path.exists() and not overwrite:
        raise FileExistsError(f"tokenizer {model_path} exists; pass overwrite=True (--overwrite) to replace it")
    sentences = [t for t in (normalize_text(text) for text in texts) if t]
    if not sentences:
        raise ValueError("texts: no non-empty sentence to train the tokenizer on")

    def train(tmp_model: Path) -> None:
        prefix = str(tmp_model.with_suffix(""))
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_prefix=prefix, vocab_size=vocab_size,
            model_type=model_type, character_coverage=1.0, pad_id=BLANK_ID, pad_piece=BLANK_PIECE,
            unk_id=UNK_ID, bos_id=-1, eos_id=-1, input_sentence_size=2_000_000, shuffle_input_sentence=True,
            minloglevel=2,
        )
        os.replace(prefix + ".vocab", model_path.with_suffix(".vocab"))

    write_atomic(model_path, train)
    return Tokenizer(model_path)
