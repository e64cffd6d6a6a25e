"""A `+finetune=from_nemo` checkpoint carries its architecture: reloading, decoding, exporting and resuming it
never read the `.nemo` again (here it is deleted after training)."""

from __future__ import annotations

import pytest
import torch
from nemo_models import write_synthetic_nemo
from train_configs import MICRO_MODEL, TINY_RUN, compose_train

from asr_plugin.decoding import greedy_search
from asr_plugin.export import ExportedTransducer, export_transducer
from asr_plugin.formats.checkpoint import BUILD_TRANSDUCER, load_model
from asr_plugin.training import TransducerModule, train

pytestmark = pytest.mark.slow  # end-to-end training runs


def test_a_nemo_fine_tune_never_reads_the_nemo_again(data_dir, tmp_path):
    nemo_path, source = write_synthetic_nemo(tmp_path, "fast_conformer_transducer")
    run = [o for o in TINY_RUN if o not in MICRO_MODEL]  # the architecture is the .nemo's
    finetune = [
        *run,
        f"paths.data_dir={data_dir}",
        "+finetune=from_nemo",
        f"finetune.path={nemo_path}",
        "optim.scheduler.warmup_ratio=null",
        "optim.scheduler.warmup_steps=1",
        "callbacks.step_checkpoint.every_n_train_steps=1",
        "trainer.max_epochs=100",
        "validate_first=false",
    ]

    def compose(overrides):
        cfg = compose_train([*finetune, *overrides], tmp_path=tmp_path)
        cfg.paths.output_dir = f"{tmp_path}/logs/train/runs/tuned"
        return cfg

    first = train(compose(["trainer.max_steps=1"]))
    nemo_path.unlink()

    saved = torch.load(first["last_model_path"], weights_only=True)
    model_node = saved["hyper_parameters"]["model"]
    assert model_node["_target_"] == BUILD_TRANSDUCER and "path" not in model_node
    model, _ = load_model([first["last_model_path"]])  # evaluation's and transcribe.py's way in
    reference = source.state_dict()  # NeMo's architecture: every shape but the recipe's vocabulary
    assert {k: v.shape for k, v in model.state_dict().items() if "embedding" not in k and "joint.output" not in k} == {
        k: v.shape for k, v in reference.items() if "embedding" not in k and "joint.output" not in k
    }
    module = TransducerModule.load_from_checkpoint(first["last_model_path"])
    features, lengths = torch.randn(2, 80, model_node["input_dim"]), torch.tensor([80, 61])
    with torch.no_grad():
        ours = greedy_search(model, *model.encode(features, lengths))
        theirs = greedy_search(module.model.eval(), *module.model.encode(features, lengths))
    assert [h.tokens for h in ours] == [h.tokens for h in theirs]
    export_transducer(model, tmp_path / "export", feature_dim=model_node["input_dim"])
    assert ExportedTransducer.load(tmp_path / "export")

    resumed = train(compose(["ckpt_path=last", "trainer.max_steps=2"]))
    assert resumed["global_step"] == 2
