"""NeMo's loss reductions in the training module: each against its definition in float64, the hybrid's combination
of the transducer and CTC terms, the legacy ``loss.reduction`` of older checkpoints, and (NeMo stage) NeMo's own
``RNNTLoss.reduce`` and ``CTCLoss``."""

from __future__ import annotations

import pytest
import torch
from train_configs import micro_module_kwargs
from training_synthetic import SyntheticUtterances, collate

from asr_plugin.training import TransducerModule
from asr_plugin.training.loss_reduction import REDUCTIONS, reduce_losses

LOSSES = [3.0, 10.0, 0.5, 7.25]
TOKENS = [2, 5, 1, 4]


def expected(reduction: str, losses: list[float], tokens: list[int]) -> float:
    """The reductions as NeMo's docs define them, in Python floats."""
    return {
        "mean_batch": sum(losses) / len(losses),
        "mean_volume": sum(losses) / sum(tokens),
        "mean": sum(loss / n for loss, n in zip(losses, tokens)) / len(losses),
        "sum": sum(losses),
    }[reduction]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_each_reduction_is_its_definition(reduction):
    losses, tokens = torch.tensor(LOSSES, dtype=torch.float64), torch.tensor(TOKENS)
    assert float(reduce_losses(losses, tokens, reduction)) == pytest.approx(expected(reduction, LOSSES, TOKENS))


@pytest.mark.parametrize(("loss_reduction", "ctc_reduction"), [("mean_volume", "mean_batch"), ("sum", "mean")])
def test_the_hybrid_combines_each_term_reduced_by_its_own_reduction(loss_reduction, ctc_reduction):
    torch.manual_seed(0)
    module = TransducerModule(
        **micro_module_kwargs("batched"), ctc_weight=0.3, loss_reduction=loss_reduction, ctc_reduction=ctc_reduction
    ).train()
    batch = collate([SyntheticUtterances(3, seed=1)[i] for i in range(3)])
    torch.manual_seed(1)
    losses, frames, lengths = module.utterance_losses(batch, batch.features)
    ctc = module.ctc(frames, lengths, batch.targets, batch.target_lengths)
    tokens = batch.target_lengths.tolist()
    want_transducer = expected(loss_reduction, losses.tolist(), tokens)
    want_ctc = expected(ctc_reduction, ctc.tolist(), tokens)
    torch.manual_seed(1)  # the same dropout draws
    total, parts = module.training_loss(batch, batch.features)
    assert float(parts["transducer_loss"]) == pytest.approx(want_transducer, rel=1e-5)
    assert float(parts["ctc_loss"]) == pytest.approx(want_ctc, rel=1e-5)
    assert float(total) == pytest.approx(0.7 * want_transducer + 0.3 * want_ctc, rel=1e-5)
    assert module.hparams.loss_reduction == loss_reduction  # what checkpoints record


def test_validation_loss_is_per_utterance_whatever_the_training_reduction():
    torch.manual_seed(0)
    kwargs = micro_module_kwargs("batched")
    per_token = TransducerModule(**kwargs, loss_reduction="mean_volume").eval()
    batch = collate([SyntheticUtterances(3, seed=2)[i] for i in range(3)])
    losses, _, _ = per_token.utterance_losses(batch, batch.features)
    assert losses.shape == (3,)
    training = per_token.compute_loss(batch, batch.features)[0]
    assert float(training) == pytest.approx(float(losses.sum() / batch.target_lengths.sum()), rel=1e-6)


def test_legacy_loss_reduction_of_older_checkpoints_and_conflicts():
    kwargs = micro_module_kwargs("batched")
    legacy = {**kwargs, "loss": {**kwargs["loss"], "reduction": "sum"}}
    assert TransducerModule(**legacy).loss_reduction == "sum"
    assert (
        TransducerModule(**{**kwargs, "loss": {**kwargs["loss"], "reduction": "mean"}}).loss_reduction == "mean_batch"
    )
    assert TransducerModule(**kwargs).loss_reduction == "mean_batch"
    with pytest.raises(ValueError, match="loss.reduction='sum' and loss_reduction='mean_volume' disagree"):
        TransducerModule(**legacy, loss_reduction="mean_volume")
    with pytest.raises(ValueError, match="loss_reduction='per_frame': choose one of"):
        TransducerModule(**kwargs, loss_reduction="per_frame")
    with pytest.raises(ValueError, match="ctc_reduction='token': choose one of"):
        TransducerModule(**kwargs, ctc_reduction="token")


@pytest.mark.nemo
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_reductions_equal_nemos_rnnt_and_ctc_losses(reduction):
    pytest.importorskip("nemo.collections.asr")
    from nemo.collections.asr.losses.ctc import CTCLoss
    from nemo.collections.asr.losses.rnnt import RNNTLoss

    from asr_plugin.training.ctc_auxiliary import AuxiliaryCTC

    losses, tokens = torch.tensor(LOSSES), torch.tensor(TOKENS)
    nemo_rnnt = RNNTLoss(num_classes=4, loss_name="pytorch", reduction=reduction)
    torch.testing.assert_close(reduce_losses(losses, tokens, reduction), nemo_rnnt.reduce(losses, tokens))

    torch.manual_seed(0)
    vocab, frames = 5, 9
    head = AuxiliaryCTC(encoder_dim=6, vocab_size=vocab)  # blank 0; NeMo's CTC blank is its last id
    encoder_out, lengths = torch.randn(4, frames, 6), torch.tensor([9, 8, 6, 9])
    targets = torch.randint(1, vocab, (4, 5))
    ours = reduce_losses(head(encoder_out, lengths, targets, tokens), tokens, reduction)
    log_probs = head.output(encoder_out).log_softmax(-1)  # (B, T, V), blank first
    nemo_order = torch.cat([log_probs[..., 1:], log_probs[..., :1]], dim=-1)  # blank last, token k -> k - 1
    nemo_ctc = CTCLoss(num_classes=vocab - 1, zero_infinity=True, reduction=reduction)
    theirs = nemo_ctc(log_probs=nemo_order, targets=targets - 1, input_lengths=lengths, target_lengths=tokens)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
