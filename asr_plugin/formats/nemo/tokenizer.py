"""NeMo's SentencePiece tokenizer with our blank policy: blank is id 0, NeMo's token k is our k + 1."""

from __future__ import annotations

from asr_plugin.text.normalize import TextNormalizer
from asr_plugin.text.tokenizer import Tokenizer


class NemoTokenizer(Tokenizer):
    """`Tokenizer` in the "nemo" convention over a NeMo model's SentencePiece model: text is normalised as
    its vocabulary expects (`TextNormalizer.from_vocabulary`: NeMo's English tokenizers are lower case).

    Args:
        model_proto: the bytes of the ``.model`` file (from the ``.nemo`` archive).
        normalizer: None = derived from the vocabulary.
    """

    def __init__(self, model_proto: bytes, normalizer: TextNormalizer | None = None) -> None:
        super().__init__(model_proto, convention="nemo", normalizer=normalizer)
