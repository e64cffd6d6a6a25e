"""Auxiliary CTC: its loss against torch's per-utterance CTC, and how the module mixes it into training."""

from __future__ import annotations

import pytest
import torch
from train_configs import micro_module_kwargs
from training_synthetic import SyntheticUtterances, collate

from asr_plugin.training import TransducerModule
from asr_plugin.training.ctc_auxiliary import AuxiliaryCTC


def test_per_utterance_losses_are_torchs_ctc_of_the_heads_log_probs():
    torch.manual_seed(0)
    ctc = AuxiliaryCTC(encoder_dim=6, vocab_size=5)
    frames, frame_lengths = torch.randn(3, 9, 6), torch.tensor([9, 7, 4])
    targets, target_lengths = torch.tensor([[1, 2, 2], [3, 0, 0], [4, 1, 0]]), torch.tensor([3, 1, 2])
    expected = []
    for b in range(3):  # one utterance at a time, unpadded: the padding must not matter
        log_probs = ctc.output(frames[b, : frame_lengths[b]]).log_softmax(-1)[:, None]  # (T_b, 1, V)
        expected.append(
            torch.nn.functional.ctc_loss(
                log_probs,
                targets[b : b + 1, : target_lengths[b]],
                frame_lengths[b : b + 1],
                target_lengths[b : b + 1],
                reduction="sum",
            )
        )
    torch.testing.assert_close(ctc(frames, frame_lengths, targets, target_lengths), torch.stack(expected))


def test_impossible_alignment_counts_zero():
    ctc = AuxiliaryCTC(encoder_dim=4, vocab_size=3)
    loss = ctc(torch.randn(1, 2, 4), torch.tensor([2]), torch.tensor([[1, 2, 1]]), torch.tensor([3]))
    assert loss.tolist() == [0.0]  # 3 tokens cannot be emitted in 2 frames


def test_training_loss_mixes_transducer_and_ctc_and_the_head_learns():
    torch.manual_seed(0)
    kwargs = micro_module_kwargs("batched")
    module = TransducerModule(**kwargs, ctc_weight=0.25)
    plain = TransducerModule(**kwargs)
    plain.model.load_state_dict(module.model.state_dict())
    batch = collate([SyntheticUtterances(3, seed=1)[i] for i in range(3)])
    module.train()
    plain.train()
    transducer, encoder_out, encoder_lengths = plain.compute_loss(batch, batch.features)
    ctc = module.ctc(encoder_out, encoder_lengths, batch.targets, batch.target_lengths).mean()  # mean_batch
    mixed, parts = module.training_loss(batch, batch.features)
    torch.testing.assert_close(mixed, 0.75 * transducer + 0.25 * ctc)
    torch.testing.assert_close(parts["ctc_loss"], ctc.detach())
    torch.testing.assert_close(parts["transducer_loss"], transducer.detach())
    assert plain.training_loss(batch, batch.features)[1] == {}
    mixed.backward()
    assert module.ctc.output.weight.grad is not None and module.ctc.output.weight.grad.abs().sum() > 0
    assert "ctc.output.weight" in module.state_dict() and "ctc.output.weight" not in plain.state_dict()


@pytest.mark.parametrize("weight", [-0.1, 1.0])
def test_weight_outside_zero_one_is_refused(weight):
    with pytest.raises(ValueError, match="ctc_weight must lie in"):
        TransducerModule(**micro_module_kwargs("batched"), ctc_weight=weight)
