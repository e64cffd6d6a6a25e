"""One owner of the lattice: the training module hands the model's lattice to the loss, a loss config cannot
contradict it, and checkpoints written before the model owned it load in today's layout."""

from __future__ import annotations

import pytest
from train_configs import micro_module_kwargs

from asr_plugin.config_nodes import ConfigError
from asr_plugin.formats.checkpoint import (
    CheckpointInfo,
    build_model,
    with_model_lattice,
)
from asr_plugin.losses import RNNT, TDT
from asr_plugin.training import TransducerModule

TDT_RECORD = {"kind": "tdt", "durations": [0, 1, 2, 3, 4], "sigma": 0.02, "clamp": None}


def tdt_kwargs(**loss) -> dict:
    kwargs = micro_module_kwargs()
    kwargs["model"]["lattice"] = dict(TDT_RECORD)
    kwargs["loss"].update(loss)
    return kwargs


def test_the_loss_trains_the_models_lattice():
    module = TransducerModule(**tdt_kwargs(omega=0.1))
    assert module.loss_fn.lattice == module.model.lattice == TDT([0, 1, 2, 3, 4], 0.02)
    assert module.loss_fn.omega == 0.1 and module.model.joint.num_extra_outputs == 5
    assert "lattice" not in module.hparams["loss"]  # stored once, in the model node
    same = TransducerModule(**tdt_kwargs(lattice=dict(TDT_RECORD)))  # a loss.lattice equal to the model's is fine
    assert same.loss_fn.lattice == same.model.lattice


def test_a_loss_lattice_that_contradicts_the_model_is_refused_naming_both():
    """The issue's case: a model of durations [0, 1, 2, 3, 4] with a loss configured for other durations."""
    other = {**TDT_RECORD, "durations": [0, 1, 2, 4, 8]}
    with pytest.raises(
        ValueError, match=r"loss.lattice = .*\[0, 1, 2, 4, 8\].* contradicts model.lattice = .*\[0, 1, 2, 3, 4\]"
    ):
        TransducerModule(**tdt_kwargs(lattice=other))
    with pytest.raises(ValueError, match=r"loss.lattice = .*'rnnt'.* contradicts model.lattice"):
        TransducerModule(**tdt_kwargs(lattice={"kind": "rnnt"}))


def test_the_loss_node_has_no_lattice_parameters_of_its_own():
    with pytest.raises(ConfigError, match="durations"):
        TransducerModule(**tdt_kwargs(durations=[0, 2, 4, 6, 8]))


def old_nodes() -> tuple[dict, dict]:
    """A TDT run's model and loss nodes as checkpoints stored them before the model owned the lattice."""
    kwargs = micro_module_kwargs()
    model, loss = kwargs["model"], kwargs["loss"]
    del model["lattice"]
    model["durations"] = [0, 1, 2, 3, 4]
    loss.update(clamp=0.5, durations=[0, 1, 2, 3, 4], sigma=0.02, omega=0.1)
    return model, loss


def test_old_checkpoint_nodes_are_converted():
    model, loss = old_nodes()
    new_model, new_loss = with_model_lattice(model, loss)
    assert new_model["lattice"] == {"kind": "tdt", "durations": [0, 1, 2, 3, 4], "sigma": 0.02, "clamp": 0.5}
    assert "durations" not in new_model and not {"clamp", "durations", "sigma"} & set(new_loss)
    assert new_loss["omega"] == 0.1 and with_model_lattice(new_model, new_loss) == (new_model, new_loss)
    rnnt_model, rnnt_loss = with_model_lattice({k: v for k, v in model.items() if k != "durations"}, {"clamp": 1.0})
    assert rnnt_model["lattice"] == {"kind": "rnnt", "clamp": 1.0, "fastemit_lambda": 0.0} and rnnt_loss == {}


def test_an_old_checkpoint_loads_rebuilds_and_decodes_with_its_lattice(tmp_path):
    model, loss = old_nodes()
    kwargs = {**micro_module_kwargs(), "model": model, "loss": loss}
    module = TransducerModule(**kwargs)  # what load_from_checkpoint does with the stored nodes
    assert module.model.lattice == module.loss_fn.lattice == TDT([0, 1, 2, 3, 4], 0.02, clamp=0.5)
    assert module.hparams["model"]["lattice"]["kind"] == "tdt"  # saved again in today's layout
    assert build_model(model).lattice == TDT([0, 1, 2, 3, 4])  # the model node alone: sigma is the loss's
    info = CheckpointInfo.of({"hyper_parameters": kwargs}, tmp_path / "old.ckpt")
    assert build_model(info.hyper_parameters["model"]).lattice == module.model.lattice


def test_old_nodes_with_two_lattices_cannot_be_converted():
    model, loss = old_nodes()
    loss["durations"] = [0, 1, 2, 4, 8]
    with pytest.raises(
        ValueError, match=r"model.durations \[0, 1, 2, 3, 4\] and loss.durations \[0, 1, 2, 4, 8\] differ"
    ):
        with_model_lattice(model, loss)


def test_an_rnnt_model_with_fastemit_trains_it():
    kwargs = micro_module_kwargs()
    kwargs["model"]["lattice"] = {"kind": "rnnt", "clamp": None, "fastemit_lambda": 0.01}
    module = TransducerModule(**kwargs)
    assert module.loss_fn.lattice == RNNT(fastemit_lambda=0.01)
