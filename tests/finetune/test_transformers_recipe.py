"""`+finetune=from_transformers` in the training recipe: a transformers Parakeet directory (tiny, from
transformers' own config classes, with transformers' tokenizer.json of a SentencePiece model of the corpus' text)
fine-tuned on the session's tiny corpus with the sample-wise loss, then written back with
scripts/export_transformers.py: transformers loads it and its `generate` transcribes the dev audio as the
recipe's greedy search does."""

from __future__ import annotations

from pathlib import Path

import pytest
import soundfile as sf
import torch

pytest.importorskip("transformers.models.parakeet")

from built_once import copy_of  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from tiny_models import TINY_CORPUS  # noqa: E402
from transformers import AutoModel, ParakeetFeatureExtractor  # noqa: E402
from transformers_models import (  # noqa: E402
    assert_same_greedy_transcripts,
    decodable_model,
    save_directory,
    sentencepiece_of,
)

from asr_plugin.formats import read_model  # noqa: E402
from asr_plugin.training import train  # noqa: E402

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
PIECES = 40  # the Parakeet's vocabulary: these and the blank
# three steps from the first, one validation batch before and after, nothing else
RUN = ["trainer.max_steps=3", "optim.scheduler.warmup_ratio=null", "optim.scheduler.warmup_steps=1", "test=false"]
RUN += ["trainer.limit_val_batches=1", "trainer.enable_progress_bar=false", "callbacks.model_summary=null"]


def _compose(overrides: list[str], root: Path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*overrides, f"paths.root_dir={root}", f"paths.output_dir={root}/run"])


@pytest.fixture(scope="module")
def data_dir(tiny_corpus, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data")
    copy_of(tiny_corpus, path / "mini_librispeech")  # nothing to synthesise
    instantiate(_compose([*TINY_CORPUS, f"paths.data_dir={path}"], path).data).prepare_data()
    return path


def _transcripts(corpus: Path, split: str) -> dict[Path, str]:
    """{flac path: its transcript} of a split of the LibriSpeech-layout corpus."""
    texts = {}
    for listing in sorted(corpus.glob(f"**/{split}/**/*.trans.txt")):
        for line in listing.read_text().splitlines():
            utterance, text = line.split(" ", 1)
            texts[listing.parent / f"{utterance}.flac"] = text
    return texts


@pytest.mark.parametrize("kind", ["rnnt", "tdt"])
def test_fine_tuned_here_and_written_back_transformers_transcribes_as_the_recipe(kind, data_dir, tmp_path):
    from asr_plugin.formats.transformers_recipe import export_transformers

    corpus = data_dir / "mini_librispeech"
    train_texts = [text.lower() for text in _transcripts(corpus, "train").values()]
    source = tmp_path / "parakeet"
    save_directory(decodable_model(kind, vocab_size=PIECES + 1), source, sentencepiece_of(train_texts, PIECES))
    cfg = _compose(
        [
            *TINY_CORPUS,
            f"paths.data_dir={data_dir}",
            "+finetune=from_transformers",
            f"finetune.path={source}",
            "+loss=samplewise",
            *RUN,
        ],
        tmp_path,
    )
    assert cfg.model._target_ == "asr_plugin.formats.transformers_recipe.parakeet_transducer"
    assert cfg.loss.mode == "samplewise"
    result = train(cfg)
    assert result["global_step"] == 3 and torch.isfinite(torch.tensor(result["metrics"]["train/loss_epoch"]))
    assert "val/wer" in result["start_metrics"]  # the directory's own model, validated before the first step
    checkpoint = torch.load(result["last_model_path"], map_location="cpu", weights_only=True)
    assert checkpoint["asr_plugin"]["tokenizer"]["convention"] == "nemo"
    assert checkpoint["hyper_parameters"]["loss_reduction"] == ("mean_volume" if kind == "rnnt" else "mean")

    written = export_transformers(result["last_model_path"], tmp_path / "fine-tuned", like=source)
    reloaded = AutoModel.from_pretrained(written).eval()
    fine_tuned = read_model(result["last_model_path"]).model
    source_state = read_model(source).model.state_dict()
    assert any(not torch.equal(value, source_state[key]) for key, value in fine_tuned.state_dict().items())
    audio = [sf.read(path, dtype="float32")[0] for path in _transcripts(corpus, "dev")]
    batch = ParakeetFeatureExtractor.from_pretrained(written)(audio, sampling_rate=16000, return_tensors="pt")
    batch["labels"] = torch.zeros(len(audio), 1)  # one row per utterance
    assert_same_greedy_transcripts(reloaded, fine_tuned, batch)
