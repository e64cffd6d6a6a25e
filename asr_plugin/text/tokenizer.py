"""SentencePiece tokenizer with the blank at id 0, in either of two conventions.

* ``"asr_plugin"`` (the tokenizers `train_tokenizer` makes): the blank is SentencePiece's own id 0, the
  reserved control piece "<blk>" trained in the pad slot (pad_id=0): encoding never produces it and decoding
  drops it. id 1 is "<unk>"; there is no bos/eos. Our id k is SentencePiece's id k.
* ``"nemo"`` (a NeMo checkpoint's tokenizer): the blank is not in the SentencePiece model; NeMo puts it
  after the last piece, we put it first, so our id k + 1 is SentencePiece's (and NeMo's) id k.

Either way `vocab_size` counts the blank: it is the size of the model's output layer. Text normalisation
belongs to the tokenizer (`normalize`): ours is LibriSpeech's (upper case, A-Z 0-9 '), a NeMo tokenizer's is
derived from its vocabulary (`TextNormalizer.from_vocabulary`: NeMo's English tokenizers are lower case).
`record()` is plain data (str, int, bytes, dict) that a checkpoint stores and `Tokenizer.from_record`
rebuilds exactly, refusing a record whose model bytes do not match its sha256.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from asr_plugin.config_nodes import ConfigError
from asr_plugin.files import write_bytes_atomic, write_text_atomic
from asr_plugin.text.normalize import LIBRISPEECH_NORMALIZER, TextNormalizer

log = logging.getLogger(__name__)

BLANK_ID = 0
BLANK_PIECE = "<blk>"
UNK_ID = 1
CONVENTIONS = ("asr_plugin", "nemo")
RECORD_KEYS = ("model", "sha256", "vocab_size", "blank_id", "convention", "normalization")


class Tokenizer:
    """Text <-> token ids (blank = 0) through a SentencePiece model.

    Args:
        model: the .model file, or its bytes.
        convention: "asr_plugin" (blank = SentencePiece's control piece id 0) or "nemo" (blank prepended:
            NeMo's token k is our k + 1); see the module docstring.
        normalizer: the text normalisation; None = LibriSpeech's for "asr_plugin", the one derived from the
            vocabulary for "nemo".
    """

    blank_id = BLANK_ID

    def __init__(
        self, model: str | os.PathLike | bytes, convention: str = "asr_plugin", normalizer: TextNormalizer | None = None
    ):
        if isinstance(model, (bytes, bytearray)):
            model_bytes, source = bytes(model), f"SentencePiece model ({len(model)} bytes)"
        else:
            path = Path(model)
            if not path.is_file():
                raise FileNotFoundError(f"tokenizer model {path} does not exist")
            model_bytes, source = path.read_bytes(), str(path)
        if convention not in CONVENTIONS:
            raise ValueError(f"{source}: convention must be one of {CONVENTIONS}, got {convention!r}")
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        except RuntimeError as err:
            raise ValueError(f"{source}: not a SentencePiece model ({err})") from None
        self._model_bytes = model_bytes
        self._sha256 = hashlib.sha256(model_bytes).hexdigest()
        self.convention = convention
        self._offset = 1 if convention == "nemo" else 0  # our id = SentencePiece id + offset
        if convention == "asr_plugin" and (
            self._sp.id_to_piece(BLANK_ID) != BLANK_PIECE or not self._sp.is_control(BLANK_ID)
        ):
            raise ValueError(
                f"{source}: id 0 is {self._sp.id_to_piece(BLANK_ID)!r}, not the control piece "
                f"{BLANK_PIECE!r}; train it with asr_plugin.data.train_tokenizer, or give "
                "convention='nemo' for a model without a blank"
            )
        self.normalizer = normalizer or (
            LIBRISPEECH_NORMALIZER
            if convention == "asr_plugin"
            else TextNormalizer.from_vocabulary(self.ordinary_pieces())
        )

    # ---- identity -----------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of ids including the blank (the model's output size)."""
        return self._sp.get_piece_size() + self._offset

    @property
    def model_bytes(self) -> bytes:
        """The SentencePiece model file's bytes."""
        return self._model_bytes

    @property
    def sha256(self) -> str:
        """Hex sha256 of `model_bytes`."""
        return self._sha256

    def describe(self) -> str:
        """One line for messages, e.g. "SentencePiece sha256 1f2e3d4c5b6a, 500 ids, blank 0, asr_plugin, upper"."""
        return (
            f"SentencePiece sha256 {self.sha256[:12]}, {self.vocab_size} ids, blank {self.blank_id}, "
            f"{self.convention} convention, {self.normalizer.case or 'own'} case"
        )

    def record(self) -> dict[str, Any]:
        """What a checkpoint stores to rebuild this tokenizer (loads with ``torch.load(weights_only=True)``):
        {"model": bytes, "sha256": str, "vocab_size": int, "blank_id": int, "convention": str,
        "normalization": {"case": str | None, "characters": str}}."""
        return {
            "model": self.model_bytes,
            "sha256": self.sha256,
            "vocab_size": self.vocab_size,
            "blank_id": self.blank_id,
            "convention": self.convention,
            "normalization": self.normalizer.record(),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Tokenizer":
        """The tokenizer of `record()`. ValueError when a key is missing or unknown, the model bytes do not
        match the record's sha256, or the rebuilt vocabulary size or blank id differ from the record's."""
        if not isinstance(record, Mapping):
            raise ValueError(f"tokenizer record must be a mapping, got {type(record).__name__}")
        if sorted(record) != sorted(RECORD_KEYS):
            raise ValueError(f"tokenizer record must have the keys {list(RECORD_KEYS)}, got {sorted(record)}")
        model = record["model"]
        if not isinstance(model, bytes):
            raise ValueError(f"tokenizer record: model must be bytes, got {type(model).__name__}")
        digest = hashlib.sha256(model).hexdigest()
        if digest != record["sha256"]:
            raise ValueError(
                f"tokenizer record: the model's sha256 is {digest}, the record says {record['sha256']}: "
                "the record is corrupt or was edited"
            )
        tokenizer = cls(model, record["convention"], TextNormalizer.from_record(record["normalization"]))
        for key in ("vocab_size", "blank_id"):
            if getattr(tokenizer, key) != record[key]:
                raise ValueError(
                    f"tokenizer record: {key} is {record[key]!r} but its model gives {getattr(tokenizer, key)!r}"
                )
        return tokenizer

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return (self.sha256, self.convention, self.normalizer) == (other.sha256, other.convention, other.normalizer)

    def __hash__(self) -> int:
        return hash((self.sha256, self.convention, self.normalizer))

    def __getstate__(self) -> dict[str, Any]:
        # SentencePieceProcessor does not pickle (DataLoader workers); the record does.
        return self.record()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # the base class's constructor: a subclass may take other arguments
        normalizer = TextNormalizer.from_record(state["normalization"])
        Tokenizer.__init__(self, state["model"], state["convention"], normalizer)

    # ---- text -----------------------------------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """`text` as this tokenizer expects it (case, alphabet, single spaces); see `TextNormalizer`
        (`tokenizer.normalizer.normalize_all(texts)` also counts what it changed)."""
        return self.normalizer(text)

    def encode(self, text: str) -> list[int]:
        """Normalises `text` and returns its token ids (never the blank id 0)."""
        return [i + self._offset for i in self._sp.encode(self.normalize(text), out_type=int)]

    def decode(self, ids: Sequence[int]) -> str:
        """Turns ids back into text; blanks (0) are dropped."""
        return self._sp.decode([int(i) - self._offset for i in ids if int(i) != BLANK_ID])

    def id_to_piece(self, token_id: int) -> str:
        """The piece of one id, e.g. "▁THE" ("<blk>" for 0)."""
        token_id = int(token_id)
        if token_id == BLANK_ID:
            return BLANK_PIECE
        return self._sp.id_to_piece(token_id - self._offset)

    def ordinary_pieces(self) -> list[str]:
        """The model's pieces that spell text (control, unknown, unused and byte pieces left out)."""
        sp = self._sp
        return [
            sp.id_to_piece(i)
            for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i) or sp.is_byte(i))
        ]


def train_tokenizer(
    texts: Iterable[str],
    model_path: str | os.PathLike,
    vocab_size: int,
    model_type: str = "bpe",
    overwrite: bool = False,
    vocab_key: str = "vocab_size",
) -> Tokenizer:
    """Trains a SentencePiece model on `texts` (LibriSpeech-normalised first; what that changed is logged)
    and writes `model_path` and its `.vocab` listing (piece<TAB>score per line), both atomically.

    `vocab_size` includes the blank and <unk>. An existing model is kept unless `overwrite`. A `vocab_size` the
    text cannot give (few transcripts) is a ConfigError naming `vocab_key` (the config key that set it) and the
    largest size that works, before anything is written.
    """
    model_path = Path(model_path)
    if model_type not in ("bpe", "unigram"):
        raise ValueError(f"model_type must be 'bpe' or 'unigram', got {model_type!r}")
    if model_path.suffix != ".model":
        raise ValueError(f"model_path must end in .model, got {model_path}")
    if model_path.exists() and not overwrite:
        raise FileExistsError(f"tokenizer {model_path} exists; pass overwrite=True (--overwrite) to replace it")
    normalized, counts = LIBRISPEECH_NORMALIZER.normalize_all(texts)
    if counts.changed:
        log.warning("tokenizer training text: %s", counts.describe())
    sentences = [text for text in normalized if text]
    if not sentences:
        raise ValueError("texts: no non-empty sentence to train the tokenizer on")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        pad_id=BLANK_ID,
        pad_piece=BLANK_PIECE,
        unk_id=UNK_ID,
        bos_id=-1,
        eos_id=-1,
        input_sentence_size=2_000_000,
        shuffle_input_sentence=True,
        minloglevel=2,
        hard_vocab_limit=False,  # a size the text cannot give yields the largest it can: checked below
    )
    tokenizer = Tokenizer(model.getvalue())
    if tokenizer.vocab_size < vocab_size:
        raise ConfigError(
            f"{vocab_key}={vocab_size} is more than the text of the {len(sentences)} transcripts gives: a "
            f"{model_type} SentencePiece model of them has at most {tokenizer.vocab_size} ids (blank and <unk> "
            f"included); set {vocab_key}={tokenizer.vocab_size} or less, or train on more text"
        )
    sp = tokenizer._sp
    listing = "".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n" for i in range(sp.get_piece_size()))
    write_text_atomic(model_path.with_suffix(".vocab"), listing)
    write_bytes_atomic(model_path, tokenizer.model_bytes)
    return tokenizer
