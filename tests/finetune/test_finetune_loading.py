"""Fine-tuning: checkpoint formats, include/exclude, load report, strict mode, vocabulary change, freezing."""

from __future__ import annotations

import hashlib
import logging

import pytest
import torch
import torchaudio
from tiny_models import tiny_transducer

from asr_plugin.finetune import (
    apply_finetune,
    finetune_report,
    freeze_encoder_layers,
    key_matcher,
    load_pretrained,
)
from asr_plugin.formats.state_dict import extract_model_state


def lightning_checkpoint(model: torch.nn.Module) -> dict:
    """The layout TransducerModule checkpoints have: model.* keys plus non-model state and metadata."""
    state = {f"model.{k}": v.clone() for k, v in model.state_dict().items()}
    state["wer.val.errors"] = torch.tensor(3.0)
    return {"state_dict": state, "epoch": 1, "global_step": 10, "hyper_parameters": {"model": {"vocab_size": 7}}}


def save(obj: object, path) -> str:
    torch.save(obj, path)
    return str(path)


def rnnt_loss(model, features, lengths, targets, target_lengths) -> torch.Tensor:
    encoder_out, encoder_lengths = model.encode(features, lengths)
    logits = model.joint(encoder_out, model.predictor(targets))  # (B, T, U+1, V)
    return torchaudio.functional.rnnt_loss(
        logits, targets.int(), encoder_lengths.int(), target_lengths.int(), blank=0, reduction="mean"
    )


def test_checkpoint_formats_are_detected() -> None:
    model = tiny_transducer()
    plain = model.state_dict()
    for obj in (lightning_checkpoint(model), plain, {"model": plain}, {f"model.{k}": v for k, v in plain.items()}):
        state = extract_model_state(obj, "x.ckpt")
        assert set(state) == set(plain)
    with pytest.raises(ValueError, match="x.ckpt"):
        extract_model_state({"epoch": 3}, "x.ckpt")
    with pytest.raises(ValueError, match="lightning"):
        extract_model_state(plain, "x.ckpt", "lightning")


def test_key_matcher_glob_and_regex() -> None:
    match = key_matcher(["encoder.*", r"re:joint\.(encoder|predictor)_proj"])
    assert match("encoder.subsampling.out.weight")
    assert match("joint.encoder_proj.bias")
    assert not match("joint.output.weight")
    assert key_matcher(None) is None
    with pytest.raises(ValueError, match="re:\\("):
        key_matcher(["re:("])


def test_report_lists_missing_unexpected_and_mismatched(caplog) -> None:
    source = tiny_transducer(seed=1).state_dict()
    source.pop("joint.output.bias")
    source["extra.weight"] = torch.zeros(2)
    source["predictor.lstm.weight_hh_l0"] = torch.zeros(3, 3)
    model = tiny_transducer(seed=2)
    before = model.predictor.lstm.weight_hh_l0.clone()
    with caplog.at_level(logging.WARNING):
        report = load_pretrained(model, source, exclude=["encoder.conformer.*"])
    assert report.missing == ["joint.output.bias"]
    assert report.unexpected == ["extra.weight"]
    assert report.mismatched == [("predictor.lstm.weight_hh_l0", (3, 3), tuple(before.shape))]
    assert all(k.startswith("encoder.conformer.") for k in report.excluded) and report.excluded
    assert "joint.output.bias" in caplog.text and "extra.weight" in caplog.text and "shape mismatch" in caplog.text
    assert torch.equal(model.predictor.lstm.weight_hh_l0, before)
    assert torch.equal(model.joint.output.weight, source["joint.output.weight"])
    excluded_weight = "encoder.conformer.conformer_layers.0.ffn1.sequential.1.weight"
    assert excluded_weight in report.excluded
    assert not torch.equal(model.state_dict()[excluded_weight], source[excluded_weight])
    with pytest.raises(ValueError, match="strict loading failed"):
        load_pretrained(tiny_transducer(seed=3), source, strict=True)


def test_apply_finetune_from_lightning_checkpoint_never_touches_the_file(tmp_path) -> None:
    source = tiny_transducer(seed=4)
    path = save(lightning_checkpoint(source), tmp_path / "epoch=1-step=10.ckpt")
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    model = tiny_transducer(seed=5)
    loaded = apply_finetune(model, {"path": path, "strict": True})
    assert loaded == {name for name, _ in model.named_parameters()}
    for key, value in source.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == digest
    with pytest.raises(ValueError, match="unknown key"):
        apply_finetune(model, {"path": path, "stirct": True})
    with pytest.raises(ValueError, match="finetune.path"):
        apply_finetune(model, {"path": None})


def test_vocabulary_change_keeps_encoder_and_reinitialises_token_layers(tmp_path, caplog) -> None:
    source = tiny_transducer(vocab_size=7, seed=6)
    path = save(lightning_checkpoint(source), tmp_path / "old.ckpt")
    model = tiny_transducer(vocab_size=11, seed=7)
    with caplog.at_level(logging.WARNING):
        report = finetune_report(model, {"path": path, "strict": True})
    assert "vocabulary change" in caplog.text and "11" in caplog.text
    assert report.mismatched == [] and {"predictor.embedding.weight", "joint.output.weight"} <= set(report.excluded)
    assert torch.equal(model.encoder.subsampling.out.weight, source.encoder.subsampling.out.weight)
    assert torch.equal(model.predictor.lstm.weight_ih_l0, source.predictor.lstm.weight_ih_l0)
    assert torch.equal(model.joint.encoder_proj.weight, source.joint.encoder_proj.weight)
    assert model.joint.output.weight.shape[0] == 11
    # Same size but a new tokenizer: forced re-initialisation of the token layers only.
    same = tiny_transducer(vocab_size=7, seed=8)
    fresh_embedding = same.predictor.embedding.weight.clone()
    loaded = apply_finetune(same, {"path": path, "new_vocabulary": True})
    assert "predictor.embedding.weight" not in loaded and "encoder.subsampling.out.weight" in loaded
    assert not torch.equal(same.predictor.embedding.weight, source.predictor.embedding.weight)
    assert not torch.equal(same.predictor.embedding.weight, fresh_embedding)  # re-initialised, not kept
    with pytest.raises(ValueError, match="new_vocabulary=false"):
        apply_finetune(tiny_transducer(vocab_size=11), {"path": path, "new_vocabulary": False})


def test_freeze_encoder_layers_and_frozen_parameters_do_not_move() -> None:
    model = tiny_transducer(num_layers=2).train()
    frozen = freeze_encoder_layers(model, 1)
    assert any(n.startswith("encoder.subsampling.") for n in frozen)
    assert any(n.startswith("encoder.conformer.conformer_layers.0.") for n in frozen)
    assert not any(n.startswith("encoder.conformer.conformer_layers.1.") for n in frozen)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    features, lengths = torch.randn(2, 40, 16), torch.tensor([40, 31])
    targets, target_lengths = torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([3, 2])
    rnnt_loss(model, features, lengths, targets, target_lengths).backward()
    optimizer.step()
    after = model.state_dict()
    for key in before:
        changed = not torch.equal(before[key], after[key])
        frozen_key = key.startswith(("encoder.subsampling.", "encoder.conformer.conformer_layers.0."))
        if frozen_key:
            assert not changed, f"frozen {key} changed"  # batch-norm statistics included
    assert not torch.equal(
        before["encoder.conformer.conformer_layers.1.ffn1.sequential.1.weight"],
        after["encoder.conformer.conformer_layers.1.ffn1.sequential.1.weight"],
    )
    everything = tiny_transducer(num_layers=2)
    assert len(freeze_encoder_layers(everything, -1)) == len(list(everything.encoder.parameters()))
    with pytest.raises(ValueError, match="freeze_encoder_layers"):
        freeze_encoder_layers(everything, 3)
