"""Transcripts as a model spells them: text normalisation (`normalize`) and the SentencePiece tokenizer with the
blank at id 0 (`tokenizer`)."""

from asr_plugin.text.normalize import LIBRISPEECH_NORMALIZER, NormalizationCounts, TextNormalizer
from asr_plugin.text.tokenizer import BLANK_ID, CONVENTIONS, Tokenizer, train_tokenizer

__all__ = [
    "BLANK_ID",
    "CONVENTIONS",
    "LIBRISPEECH_NORMALIZER",
    "NormalizationCounts",
    "TextNormalizer",
    "Tokenizer",
    "train_tokenizer",
]
