"""Own data from scratch with a vocabulary its transcripts cannot give (4,096 ids from the tiny corpus's 24
training transcripts; ``data=nemo``'s default 256 from 48 short ones of one's own): refused by a ConfigError naming ``data.vocab_size`` and the largest size that
works, the size SentencePiece itself names when asked for too many, and no tokenizer is written."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import sentencepiece as spm
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from asr_plugin.config_nodes import ConfigError
from asr_plugin.text import LIBRISPEECH_NORMALIZER

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def _largest_by_sentencepiece(texts: list[str], vocab_size: int) -> int:
    """SentencePiece's own answer: its hard limit's refusal names the largest size the text gives."""
    with pytest.raises(RuntimeError) as refusal:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=io.BytesIO(), vocab_size=vocab_size, model_type="bpe",
            character_coverage=1.0, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, minloglevel=2,
        )  # fmt: skip
    return int(re.search(r"Please set it to a value <= (\d+)", str(refusal.value)).group(1))


def test_a_vocabulary_the_transcripts_cannot_give_names_data_vocab_size_and_the_largest(nemo_corpus, tmp_path):
    manifests, segments = nemo_corpus
    overrides = [
        "data=nemo",
        f"data.train_manifests=[{manifests['train']}]",
        f"data.valid_manifests=[{manifests['dev']}]",
    ]
    overrides.append("data.vocab_size=4096")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[*overrides, f"paths.root_dir={tmp_path}", f"paths.data_dir={tmp_path}/data"])
    texts, _ = LIBRISPEECH_NORMALIZER.normalize_all(segment.text for segment in segments["train"])
    largest = _largest_by_sentencepiece(texts, 4096)
    datamodule = instantiate(cfg.data)
    with pytest.raises(
        ConfigError, match=rf"data\.vocab_size=4096 .* at most {largest} ids.*data\.vocab_size={largest}"
    ):
        datamodule.prepare_data()
    assert not list((tmp_path / "data").rglob("*.model"))
