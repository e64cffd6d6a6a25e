"""use_samplewise on transformers' ParakeetForRNNT / ParakeetForTDT against transformers itself: the same loss and
gradients as transformers' own loss (tiny models from transformers' config classes, random weights, no hub),
generate unchanged, undo, and the Trainer."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers.models.parakeet")

from transformers_models import (  # noqa: E402
    BLANK,
    KINDS,
    assert_same_gradients,
    build_model,
    loss_and_gradients,
    make_batch,
)

from asr_plugin.integrations.transformers import ParakeetJoint, undo_samplewise, use_samplewise  # noqa: E402
from asr_plugin.losses import StandardJoint  # noqa: E402

SMALL_BUDGET = "4KiB"  # a few dozen lattice cells: one sample per group, the longer ones split over T


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reduction", [None, "mean_volume", "mean_batch", "mean", "sum"])
def test_loss_and_gradients_equal_transformers(kind, reduction):
    model, batch = build_model(kind), make_batch(kind)
    options = {} if reduction is None else {"reduction": reduction}  # None: the model's default reduction
    expected, expected_grads = loss_and_gradients(model, batch, **options)
    use_samplewise(model, memory_budget=SMALL_BUDGET)
    loss, grads = loss_and_gradients(model, batch, **options)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=0.0)
    assert_same_gradients(grads, expected_grads)
    assert len(model.samplewise_loss.last_plan.groups) > 1


@pytest.mark.parametrize("kind", KINDS)
def test_per_utterance_losses_equal_transformers(kind):
    model, batch = build_model(kind), make_batch(kind)
    with torch.no_grad():
        expected = model(**batch, reduction="none").loss
        use_samplewise(model, memory_budget=SMALL_BUDGET)
        losses = model(**batch, reduction="none").loss
    assert losses.shape == (len(batch["labels"]),)
    torch.testing.assert_close(losses, expected, rtol=1e-5, atol=0.0)


def test_tdt_sigma_is_passed_on():
    model, batch = build_model("tdt"), make_batch("tdt")
    expected, expected_grads = loss_and_gradients(model, batch, sigma=0.05)
    use_samplewise(model)
    loss, grads = loss_and_gradients(model, batch, sigma=0.05)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=0.0)
    assert_same_gradients(grads, expected_grads)


@pytest.mark.parametrize("kind", KINDS)
def test_the_joint_output_of_the_batch_is_never_built(kind):
    model, batch = build_model(kind), make_batch(kind)
    sizes = []
    model.joint.register_forward_hook(lambda module, args, out: sizes.append(out.numel()))
    model(**batch).loss.backward()
    whole = sizes[-1]  # transformers' forward: the (B, T, U+1, V [+ D]) joint output, once
    sizes.clear()
    use_samplewise(model, memory_budget=SMALL_BUDGET)
    model(**batch).loss.backward()
    assert sizes and max(sizes) < whole / len(batch["labels"])


@pytest.mark.parametrize("kind", KINDS)
def test_another_activation_runs_the_models_own_joint(kind):
    """A joint the fused runner does not compute (GELU) is called as transformers computes it, per group."""
    model, batch = build_model(kind, hidden_act="gelu"), make_batch(kind)
    expected, expected_grads = loss_and_gradients(model, batch)
    use_samplewise(model, memory_budget=SMALL_BUDGET)
    loss, grads = loss_and_gradients(model, batch)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=0.0)
    assert_same_gradients(grads, expected_grads)
    assert model.samplewise_loss.last_plan.runner == "graph"


@pytest.mark.parametrize("kind", KINDS)
def test_the_joint_view_is_a_standard_joint(kind):
    model = build_model(kind)
    joint = ParakeetJoint(model.joint, 5 if kind == "tdt" else 0)
    assert isinstance(joint, StandardJoint)
    assert joint.fused_activation == "relu" and joint.output is model.joint.head
    assert not list(joint.named_parameters(recurse=False))  # a view: the parameters stay the model's


def test_decoder_inputs_default_to_blank_then_labels():
    model, batch = build_model("rnnt"), make_batch("rnnt")
    expected = model(**batch).loss
    use_samplewise(model)
    batch.pop("decoder_input_ids")
    torch.testing.assert_close(model(**batch).loss, expected, rtol=1e-5, atol=0.0)


@pytest.mark.parametrize("kind", KINDS)
def test_generate_is_unchanged(kind):
    model, batch = build_model(kind), make_batch(kind)
    if kind == "tdt":
        # transformers' generate picks the next token by the argmax over the token *and* duration scores, which
        # with random weights is often a duration (an id past the vocabulary); lowering every duration score by
        # the same amount keeps the duration argmax and makes the token argmax a token
        with torch.no_grad():
            model.joint.head.bias[model.config.vocab_size :] -= 100.0
    inputs = {"input_features": batch["input_features"], "attention_mask": batch["attention_mask"]}
    with torch.no_grad():
        expected = model.generate(**inputs)
        use_samplewise(model)
        generated = model.generate(**inputs)
    assert torch.equal(generated.sequences, expected.sequences)
    assert torch.equal(generated.durations, expected.durations)


@pytest.mark.parametrize("kind", KINDS)
def test_undo_restores_transformers_forward(kind, tmp_path):
    model, batch = build_model(kind), make_batch(kind)
    expected = model(**batch)
    use_samplewise(model)
    assert model(**batch).logits is None
    assert undo_samplewise(model) is model
    restored = model(**batch)
    assert "forward" not in vars(model) and not hasattr(model, "samplewise_loss")
    assert torch.equal(restored.logits, expected.logits) and torch.equal(restored.loss, expected.loss)


def test_saved_model_is_unchanged(tmp_path):
    model = build_model("tdt")
    model.save_pretrained(tmp_path / "before")
    use_samplewise(model).save_pretrained(tmp_path / "after")
    read = lambda name: json.loads((tmp_path / name / "config.json").read_text())
    assert read("after") == read("before")
    assert (tmp_path / "after" / "model.safetensors").read_bytes() == (
        tmp_path / "before" / "model.safetensors"
    ).read_bytes()


def test_calling_it_again_changes_the_budget():
    model, batch = build_model("rnnt"), make_batch("rnnt")
    use_samplewise(model)
    model(**batch)
    assert len(model.samplewise_loss.last_plan.groups) == 1
    use_samplewise(model, memory_budget=SMALL_BUDGET)
    model(**batch)
    assert len(model.samplewise_loss.last_plan.groups) > 1


def test_refusals_name_the_problem():
    from transformers import ParakeetTDTConfig

    with pytest.raises(TypeError, match="ParakeetForRNNT or ParakeetForTDT"):
        use_samplewise(torch.nn.Linear(2, 2))
    model = build_model("rnnt")
    with pytest.raises(ValueError, match="use_samplewise was not applied"):
        undo_samplewise(model)
    model.loss_function = lambda **kwargs: 0.0
    with pytest.raises(ValueError, match="model.loss_function is"):
        use_samplewise(model)
    tdt = build_model("tdt")
    tdt.config = ParakeetTDTConfig(**{**tdt.config.to_dict(), "durations": [1, 2, 3]})
    with pytest.raises(ValueError, match=r"config.durations = \[1, 2, 3\]"):
        use_samplewise(tdt)
    assert "forward" not in vars(tdt)  # refused before anything changed


def test_bad_batches_name_the_problem():
    model, batch = build_model("rnnt"), make_batch("rnnt")
    use_samplewise(model)
    with pytest.raises(ValueError, match=r"labels\[1, 3\] = -100 is not a token id"):
        model(**{**batch, "labels": batch["labels"].masked_fill(batch["labels"] == BLANK, -100)})
    with pytest.raises(ValueError, match="decoder_input_ids only 2 positions"):
        model(**{**batch, "decoder_input_ids": batch["decoder_input_ids"][:, :2]})
    with pytest.raises(ValueError, match="reduction = 'average'"):
        model(**batch, reduction="average")


@pytest.mark.cuda
@pytest.mark.parametrize("kind", KINDS)
def test_loss_and_gradients_equal_transformers_on_cuda(kind):
    """On CUDA (RNN-T: the flash joint, no logits at all; TDT: the fused joint)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    model = build_model(kind).cuda()
    batch = {key: value.cuda() for key, value in make_batch(kind).items()}
    expected, expected_grads = loss_and_gradients(model, batch)
    use_samplewise(model, memory_budget=SMALL_BUDGET)
    loss, grads = loss_and_gradients(model, batch)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=0.0)
    assert_same_gradients(grads, expected_grads)
    assert model.samplewise_loss.last_plan.runner == ("flash" if kind == "rnnt" else "fused")
