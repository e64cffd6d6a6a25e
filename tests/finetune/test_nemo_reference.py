"""`+finetune=from_nemo` on a model NeMo itself trained (the session's `nemo_reference`, tests/finetune/conftest.py):
the recipe starts where NeMo is (the same dev WER and loss at its first validation), fine-tuning on the training
utterances NeMo's training left out (``data=nemo``) lowers the validation loss in both loss modes, and
`export_nemo` takes the result back to NeMo with the transcripts of our decoding and of eval.py.

NeMo and slow: the reference's .nemo files are committed (tests/nemo_references, scripts/make_nemo_references.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

pytest.importorskip("nemo.collections.asr")
pytestmark = [pytest.mark.nemo, pytest.mark.slow]

from asr_plugin.audio import load_audio  # noqa: E402
from asr_plugin.evaluation.transcriber import Transcriber  # noqa: E402
from asr_plugin.formats import export_nemo  # noqa: E402
from asr_plugin.training import train  # noqa: E402
from benchmarks.nemo_reference import (  # noqa: E402
    EVAL_SPLITS,
    FORMS,
    FineTuneSettings,
    eval_transcripts,
    imported_transcripts,
    nemo_transcripts,
    read_nemo_manifest,
    recipe_overrides,
)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
FINE_TUNING = FineTuneSettings(steps=30)


def recipe_config(reference, form: str, mode: str, directory: Path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=recipe_overrides(reference, form, mode, directory, FINE_TUNING))


def test_nemo_trained_the_reference(nemo_reference):
    for form in FORMS:
        assert all(nemo_reference.wer[form][split] < 0.9 for split in EVAL_SPLITS), form
    # the RNN-T form is the hybrid minus its CTC decoder: NeMo decodes both with the transducer
    assert nemo_reference.transcripts["rnnt"] == nemo_reference.transcripts["hybrid"]
    # our import decodes NeMo's model as NeMo does
    assert (
        imported_transcripts(nemo_reference.models["rnnt"], nemo_reference.manifests["dev"])
        == nemo_reference.transcripts["rnnt"]["dev"]
    )


@pytest.mark.parametrize(("form", "mode"), [("rnnt", "batched"), ("rnnt", "samplewise"), ("hybrid", "samplewise")])
def test_recipe_starts_at_nemo_and_fine_tunes(nemo_reference, tmp_path, form, mode):
    from nemo.collections.asr.models import ASRModel

    result = train(recipe_config(nemo_reference, form, mode, tmp_path))
    start, end = result["start_metrics"], result["metrics"]
    assert start["val/wer"] == pytest.approx(nemo_reference.wer[form]["dev"], abs=1e-6)
    assert start["val/loss"] == pytest.approx(nemo_reference.loss["dev"], rel=1e-4)
    assert result["global_step"] == FINE_TUNING.steps
    assert end["val/loss"] < start["val/loss"]

    exported = export_nemo(result["last_model_path"], tmp_path / "finetuned.nemo")
    restored = ASRModel.restore_from(str(exported), map_location="cpu")
    assert type(restored).__name__ == ("EncDecHybridRNNTCTCBPEModel" if form == "hybrid" else "EncDecRNNTBPEModel")
    manifest = nemo_reference.manifests["dev"]
    ours = Transcriber([result["last_model_path"]], method="greedy", max_symbols_per_frame=10)  # the checkpoint's own
    paths = [entry["audio_filepath"] for entry in read_nemo_manifest(manifest)]
    theirs = nemo_transcripts(restored, manifest)
    assert theirs == [ours.decode_pieces([load_audio(path)])[0] for path in paths]
    # eval.py (data=nemo, the dev manifest as its test set) writes NeMo's transcripts too
    assert eval_transcripts(result["last_model_path"], manifest, tmp_path / "eval") == theirs
