"""SampleWiseRNNTJoint and use_samplewise against NeMo itself, on shrunk NeMo-built (Fast)Conformer-RNNT models.

Each comparison runs NeMo's own training_step / validation_step / transcribe on the same weights and batch
with NeMo's RNNTJoint (fused path off, and on with fused_batch_size=2) and with the sample-wise joint.
"""

from __future__ import annotations

import copy
from unittest import mock

import pytest
import torch

pytest.importorskip("nemo.collections.asr")
pytestmark = pytest.mark.nemo

from nemo.collections.asr.models import EncDecRNNTBPEModel  # noqa: E402
from nemo.collections.asr.modules import RNNTJoint  # noqa: E402
from nemo_plugin_models import (  # noqa: E402
    ARCHITECTURES,
    BATCH_SECONDS,
    assert_same_step,
    attach_trainer,
    build_model,
    make_batch,
    shrunk_config,
    training_step,
)

from asr_plugin.integrations.nemo import SampleWiseRNNTJoint, allow_in_nemo_configs, use_samplewise  # noqa: E402
from asr_plugin.integrations.nemo.joint import TARGET  # noqa: E402
from asr_plugin.integrations.nemo.network import JointNetwork  # noqa: E402
from asr_plugin.losses import RNNT, TDT, SamplewiseOptions, StandardJoint, TransducerLoss  # noqa: E402
from benchmarks.nemo_examples import train_nemo_style_tokenizer  # noqa: E402

SMALL_BUDGET = "32KiB"  # a few hundred lattice cells: several groups, longer samples split over T


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return train_nemo_style_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture
def allowed(monkeypatch):
    """NeMo's target allow-list with SampleWiseRNNTJoint added, for this test only."""
    from nemo.core.classes import common

    monkeypatch.setattr(common, "ALLOWED_TARGET_PREFIXES", list(common.ALLOWED_TARGET_PREFIXES))
    allow_in_nemo_configs()


def nemo_fused(config: dict) -> dict:
    """`config` with NeMo's own fused path on, in sub-batches of 2."""
    config = copy.deepcopy(config)
    config["joint"].update(fuse_loss_wer=True, fused_batch_size=2)
    return config


def samplewise(config: dict, **joint) -> dict:
    """`config` selecting the sample-wise joint (the config way in)."""
    config = copy.deepcopy(config)
    config["joint"].update(_target_=TARGET, fuse_loss_wer=True, fused_batch_size=2, **joint)
    return config


def batch_for(model) -> tuple:
    return make_batch(model.tokenizer.vocab_size)


def assert_same_weights(model, other) -> None:
    other_state = other.state_dict()
    for key, value in model.state_dict().items():
        assert torch.equal(value, other_state[key]), key


@pytest.fixture(scope="module", params=ARCHITECTURES)
def nemo_steps(request, tokenizer_dir):
    """(config, {"unfused": step, "fused": step}) of NeMo's RNNTJoint on one architecture."""
    config = shrunk_config(request.param, tokenizer_dir)
    steps = {}
    for name, variant in (("unfused", config), ("fused", nemo_fused(config))):
        model = build_model(variant)
        steps[name] = training_step(model, batch_for(model))
    return config, steps


@pytest.mark.parametrize("memory_budget", [None, SMALL_BUDGET])
def test_training_step_equals_nemo(nemo_steps, memory_budget, allowed):
    config, steps = nemo_steps
    model = build_model(samplewise(config, memory_budget=memory_budget))
    assert type(model.joint) is SampleWiseRNNTJoint
    assert_same_weights(model, build_model(config))
    ours = training_step(model, batch_for(model))
    assert_same_step(steps["fused"], steps["unfused"])  # NeMo's two paths agree
    for name in ("unfused", "fused"):
        assert_same_step(ours, steps[name])


@pytest.mark.parametrize(
    "changes, fused_activation",
    [
        (dict(activation="tanh"), "tanh"),
        (dict(activation="sigmoid"), None),  # not fused: NeMo's joint through its autograd graph
        (dict(rnnt_reduction="mean"), "relu"),  # per-sample weights 1 / (B * U_b): the loss recomputes in backward
        (dict(rnnt_reduction="mean_volume"), "relu"),
        (dict(rnnt_reduction="sum", log_softmax=False, clamp=0.05), "relu"),
    ],
    ids=["tanh", "sigmoid", "mean", "mean_volume", "clamp"],
)
def test_joint_and_loss_options_equal_nemo(tokenizer_dir, allowed, changes, fused_activation):
    changes = dict(changes)
    config = shrunk_config("conformer_transducer", tokenizer_dir, activation=changes.pop("activation", "relu"))
    if "rnnt_reduction" in changes:
        config["rnnt_reduction"] = changes.pop("rnnt_reduction")
    if "log_softmax" in changes:
        config["joint"]["log_softmax"] = changes.pop("log_softmax")
    if "clamp" in changes:
        unclamped_model = build_model(config)
        unclamped = training_step(unclamped_model, batch_for(unclamped_model))
        config["loss"]["warprnnt_numba_kwargs"]["clamp"] = changes.pop("clamp")
    reference = build_model(config)
    expected = training_step(reference, batch_for(reference))
    model = build_model(samplewise(config, memory_budget=SMALL_BUDGET))
    model.train()
    assert JointNetwork(model.joint).fused_activation == fused_activation
    ours = training_step(model, batch_for(model))
    assert_same_step(ours, expected)
    if config["loss"]["warprnnt_numba_kwargs"]["clamp"] > 0:  # the clamp changed the gradients
        name = "joint.joint_net.1.weight"
        assert (unclamped[1][name] - expected[1][name]).norm() > 1e-3 * expected[1][name].norm()


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_dropout_on_both_train(tokenizer_dir, allowed, architecture):
    config = shrunk_config(architecture, tokenizer_dir, dropout=0.1)
    for variant in (config, samplewise(config)):
        model = build_model(variant)
        if type(model.joint) is SampleWiseRNNTJoint:
            model.train()
            network = JointNetwork(model.joint)
            assert (network.fused_activation, network.fused_dropout) == ("relu", 0.1)  # dropout run fused
        batch = batch_for(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(5):
            loss, _ = training_step(model, batch)
            optimizer.step()
            losses.append(loss.item())
        assert all(torch.isfinite(torch.tensor(losses))), losses
        assert losses[-1] < losses[0], (type(model.joint).__name__, losses)


@pytest.fixture
def restored(tokenizer_dir, tmp_path, request):
    """A NeMo model of `request.param`'s architecture saved to a .nemo and restored by NeMo."""
    model = build_model(shrunk_config(request.param, tokenizer_dir))
    path = tmp_path / "model.nemo"
    model.save_to(str(path))
    return attach_trainer(EncDecRNNTBPEModel.restore_from(str(path), map_location="cpu"))


@pytest.mark.parametrize("restored", ARCHITECTURES, indirect=True)
def test_use_samplewise_on_restored_model(restored, tmp_path):
    batch = batch_for(restored)
    expected = training_step(restored, batch)
    assert type(restored.joint) is RNNTJoint and not restored.joint.fuse_loss_wer
    joint, weight = restored.joint, restored.joint.joint_net[-1].weight
    assert use_samplewise(restored, memory_budget=SMALL_BUDGET) is restored
    assert restored.joint is joint and type(joint) is SampleWiseRNNTJoint and joint.fuse_loss_wer
    assert joint.joint_net[-1].weight is weight  # the same parameters: an optimizer built before still holds them
    assert_same_step(training_step(restored, batch), expected)
    # the config is untouched: what is saved now restores as a plain NeMo checkpoint
    path = tmp_path / "again.nemo"
    restored.save_to(str(path))
    again = EncDecRNNTBPEModel.restore_from(str(path), map_location="cpu")
    assert type(again.joint) is RNNTJoint
    assert_same_weights(again, restored)


def validation(model, batch) -> dict:
    model.eval()
    with torch.no_grad():
        return model.validation_step(batch, 0)


def transcripts(model, batch) -> list[str]:
    audio, lengths = batch[0], batch[1]
    signals = [audio[row, :length].numpy() for row, length in enumerate(lengths.tolist())]
    return [hypothesis.text for hypothesis in model.transcribe(signals, batch_size=2, verbose=False)]


@pytest.mark.parametrize("restored", ARCHITECTURES, indirect=True)
def test_validation_and_transcribe_unchanged(restored, tokenizer_dir):
    with torch.no_grad():  # make blank less likely, so that random weights transcribe some tokens
        restored.joint.joint_net[-1].bias[-1] -= 3.0
    batch = batch_for(restored)
    unfused, texts = validation(restored, batch), transcripts(restored, batch)
    assert any(texts), "the comparison must decode some tokens"
    restored.joint.set_fuse_loss_wer(True, restored.loss, restored.wer)
    restored.joint.set_fused_batch_size(2)
    fused = validation(restored, batch)  # NeMo's fused path: WER averaged over sub-batches
    use_samplewise(restored, memory_budget=SMALL_BUDGET)
    ours = validation(restored, batch)
    assert ours.keys() == fused.keys() == unfused.keys()
    for key in ("val_wer_num", "val_wer_denom"):
        assert ours[key] == fused[key] == unfused[key]
    assert ours["val_wer"] == fused["val_wer"]
    for expected in (fused, unfused):
        torch.testing.assert_close(ours["val_loss"], expected["val_loss"], rtol=1e-5, atol=0.0)
    assert transcripts(restored, batch) == texts
    assert len(texts) == len(BATCH_SECONDS)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_blank_last_in_both_loss_modes(tokenizer_dir, architecture):
    """NeMo's blank is its last output (V-1); the loss takes it as an argument, in both modes, fused joint included."""
    model = build_model(shrunk_config(architecture, tokenizer_dir)).eval()
    audio, audio_lengths, targets, target_lengths = batch_for(model)
    with torch.no_grad():
        encoded, encoded_lengths = model(input_signal=audio, input_signal_length=audio_lengths)
        decoded, _, _ = model.decoder(targets=targets, target_length=target_lengths)
        model.loss.reduction = None  # NeMo's per-sample losses
        expected = model.loss(
            log_probs=model.joint(encoder_outputs=encoded, decoder_outputs=decoded),
            targets=targets,
            input_lengths=encoded_lengths,
            target_lengths=target_lengths,
        )
        encoder_out, predictor_out = encoded.transpose(1, 2), decoded.transpose(1, 2)
        network = JointNetwork(model.joint)
        assert isinstance(network, StandardJoint) and network.fused_activation == "relu"  # run fused
        blank = model.joint.num_classes_with_blank - 1
        lattice = (targets, encoded_lengths, target_lengths)
        batched = TransducerLoss("batched", blank=blank, reduction="none")
        samplewise = TransducerLoss("samplewise", blank=blank, reduction="none", memory_budget=SMALL_BUDGET)
        for loss in (batched, samplewise):
            torch.testing.assert_close(
                loss(encoder_out, predictor_out, network, *lattice), expected, rtol=1e-5, atol=0.0
            )


def test_unfused_joint_is_nemo_joint(tokenizer_dir, allowed):
    config = shrunk_config("fast_conformer_transducer", tokenizer_dir)
    reference, model = build_model(config), build_model(samplewise(config))
    model.joint.set_fuse_loss_wer(False)
    encoder_outputs = torch.randn(2, config["model_defaults"]["enc_hidden"], 5)
    decoder_outputs = torch.randn(2, config["model_defaults"]["pred_hidden"], 3)
    for mode in ("train", "eval"):
        getattr(reference, mode)(), getattr(model, mode)()
        expected = reference.joint(encoder_outputs=encoder_outputs, decoder_outputs=decoder_outputs)
        torch.testing.assert_close(
            model.joint(encoder_outputs=encoder_outputs, decoder_outputs=decoder_outputs), expected
        )


def test_config_way_in_saves_and_restores(tokenizer_dir, allowed, tmp_path, monkeypatch):
    model = build_model(
        samplewise(shrunk_config("conformer_transducer", tokenizer_dir), memory_budget="2MiB", max_samples_per_group=3)
    )
    path = tmp_path / "samplewise.nemo"
    model.save_to(str(path))
    restored = EncDecRNNTBPEModel.restore_from(str(path), map_location="cpu")
    assert type(restored.joint) is SampleWiseRNNTJoint
    assert restored.joint.samplewise_options == SamplewiseOptions(memory_budget="2MiB", max_samples_per_group=3)
    assert_same_weights(restored, model)
    from nemo.core.classes import common

    # NeMo refuses the target unless it is allowed
    monkeypatch.setattr(common, "ALLOWED_TARGET_PREFIXES", [p for p in common.ALLOWED_TARGET_PREFIXES if p != TARGET])
    with pytest.raises(common.UnsafeTargetError, match="SampleWiseRNNTJoint"):
        EncDecRNNTBPEModel.restore_from(str(path), map_location="cpu")


def test_fastemit_training_step_equals_nemo(tokenizer_dir, allowed):
    """NeMo's fastemit_lambda is passed through: the step (loss value and every gradient) is NeMo's numba loss's."""
    config = shrunk_config("conformer_transducer", tokenizer_dir)
    config["loss"]["warprnnt_numba_kwargs"]["fastemit_lambda"] = 0.01
    reference = build_model(config)
    expected = training_step(reference, batch_for(reference))
    plain = build_model(shrunk_config("conformer_transducer", tokenizer_dir))
    assert abs(training_step(plain, batch_for(plain))[0] - expected[0]) > 1e-4 * abs(expected[0])  # FastEmit is on
    configured = build_model(samplewise(config, memory_budget=SMALL_BUDGET))
    configured.train()
    assert_same_step(training_step(configured, batch_for(configured)), expected)
    swapped = use_samplewise(build_model(config))
    assert_same_step(training_step(swapped, batch_for(swapped)), expected)
    assert swapped.joint.samplewise_loss.lattice == RNNT(fastemit_lambda=0.01)


TDT_DURATIONS = [0, 1, 2, 3]


def tdt_config(tokenizer_dir) -> dict:
    """The shrunk FastConformer turned TDT as NeMo's TDT configs do (Parakeet-TDT's form)."""
    config = shrunk_config("fast_conformer_transducer", tokenizer_dir)
    config["joint"]["num_extra_outputs"] = len(TDT_DURATIONS)
    config["loss"] = {"loss_name": "tdt", "tdt_kwargs": {"durations": TDT_DURATIONS, "sigma": 0.02, "omega": 0.0}}
    config["decoding"].update(model_type="tdt", durations=TDT_DURATIONS)
    return config


def nemo_tdt_step(model, batch) -> tuple:
    """NeMo's training step with its TDT loss on the CPU, where NeMo's numba TDT loss does not run: its pure-PyTorch
    TDTLossPytorch with the same blank, durations and sigma (its hard-coded .cuda() patched to a no-op, test only)."""
    from nemo.collections.asr.losses.rnnt_pytorch import TDTLossPytorch

    numba = model.loss._loss
    model.loss._loss = TDTLossPytorch(blank=numba.blank, durations=numba.durations, reduction=None, sigma=numba.sigma)
    with mock.patch.object(torch.Tensor, "cuda", lambda self, *args, **kwargs: self):
        return training_step(model, batch)


def test_tdt_training_step_equals_nemo(tokenizer_dir, allowed):
    config = tdt_config(tokenizer_dir)
    reference = build_model(config)
    expected = nemo_tdt_step(reference, batch_for(reference))
    configured = build_model(samplewise(config, memory_budget=SMALL_BUDGET))
    configured.train()
    network = JointNetwork(configured.joint)
    assert isinstance(network, StandardJoint) and network.num_extra_outputs == len(TDT_DURATIONS)  # run fused
    assert_same_step(training_step(configured, batch_for(configured)), expected)
    swapped = use_samplewise(build_model(config))
    assert_same_step(training_step(swapped, batch_for(swapped)), expected)
    assert swapped.joint.samplewise_loss.lattice == TDT(TDT_DURATIONS, 0.02)


def test_tdt_fastemit_is_refused_by_name(tokenizer_dir, allowed):
    config = tdt_config(tokenizer_dir)
    config["loss"]["tdt_kwargs"]["fastemit_lambda"] = 0.001
    model = build_model(config)
    with pytest.raises(
        ValueError, match=r"loss\.tdt_kwargs\.fastemit_lambda = 0\.001: FastEmit is implemented for the RNN-T"
    ):
        use_samplewise(model)
    assert type(model.joint) is RNNTJoint and not model.joint.fuse_loss_wer  # unchanged


def test_hybrid_tdt_ctc_model_equals_nemo(tokenizer_dir):
    """A hybrid TDT-CTC model (Parakeet-TDT-CTC's form): the transducer loss sample-wise, NeMo's CTC loss added."""
    from nemo.collections.asr.models import EncDecHybridRNNTCTCBPEModel

    config = tdt_config(tokenizer_dir)
    config["aux_ctc"] = {
        "ctc_loss_weight": 0.3,
        "use_cer": False,
        "ctc_reduction": "mean_batch",
        "decoding": {"strategy": "greedy"},
        "decoder": {
            "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
            "feat_in": None,
            "num_classes": -1,
            "vocabulary": [],
        },
    }
    reference = build_model(config, model_class=EncDecHybridRNNTCTCBPEModel)
    expected = nemo_tdt_step(reference, batch_for(reference))
    model = use_samplewise(build_model(config, model_class=EncDecHybridRNNTCTCBPEModel), memory_budget=SMALL_BUDGET)
    assert_same_step(training_step(model, batch_for(model)), expected)


def test_bad_arguments_leave_the_model_unchanged(tokenizer_dir):
    model = build_model(shrunk_config("conformer_transducer", tokenizer_dir))
    with pytest.raises(ValueError, match="memory_budget"):
        use_samplewise(model, memory_budget="lots")
    with pytest.raises(ValueError, match="max_samples_per_group"):
        use_samplewise(model, max_samples_per_group=0)
    assert type(model.joint) is RNNTJoint
    with pytest.raises(TypeError, match="EncDecRNNTModel"):
        use_samplewise(torch.nn.Linear(2, 2))
