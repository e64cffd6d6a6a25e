"""The attention context a multi-lookahead model trains with: drawn per step from a generator seeded with
(att_context_seed, step), so DDP ranks agree without communicating; it follows att_context_probs and it is the
context the step's forward masks with."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from train_configs import micro_module_kwargs
from training_synthetic import SyntheticUtterances, collate

from asr_plugin.training import TransducerModule, train

CONTEXTS = [[8, 0], [8, 1], [8, 3]]


def streaming_module(seed: int = 0, probs: list[float] | None = None) -> TransducerModule:
    kwargs = micro_module_kwargs()
    kwargs["model"].update(
        attention="rel_pos",
        subsampling="dw_striding",
        subsampling_channels=8,
        causal_downsampling=True,
        conv_context_size="causal",
        conv_norm_type="layer_norm",
        att_context_style="chunked_limited",
        att_context_size=CONTEXTS,
        att_context_probs=probs,
    )
    return TransducerModule(**kwargs, att_context_seed=seed)


def test_two_ranks_with_the_same_seed_draw_the_same_contexts():
    torch.manual_seed(0)
    rank0 = streaming_module(seed=7)
    torch.manual_seed(1)  # another process state: the draw does not depend on it
    rank1 = streaming_module(seed=7)
    drawn = [rank0.training_context(step) for step in range(200)]
    assert drawn == [rank1.training_context(step) for step in range(200)]
    assert len(set(drawn)) == 3
    resumed = [rank1.training_context(step) for step in range(120, 200)]  # a run resumed at step 120
    assert resumed == drawn[120:]
    assert [streaming_module(seed=8).training_context(step) for step in range(200)] != drawn


def test_the_draw_follows_att_context_probs():
    module = streaming_module(probs=[0.7, 0.3, 0.0])
    counts = Counter(module.training_context(step) for step in range(4000))
    assert counts[(8, 3)] == 0
    assert counts[(8, 0)] / 4000 == pytest.approx(0.7, abs=0.04)  # ~5 binomial standard deviations


def test_a_single_context_model_draws_nothing():
    kwargs = micro_module_kwargs()
    assert TransducerModule(**kwargs).training_context(5) is None


def test_the_training_step_forward_uses_the_drawn_context():
    module = streaming_module(seed=3)
    batch = collate([SyntheticUtterances(3, seed=1, frames=160)[i] for i in range(3)])
    seen = []
    module.model.encoder.register_forward_pre_hook(lambda _, args: seen.append(args[2]))
    module.train()
    with pytest.warns(UserWarning, match="self.log"):  # no trainer attached: global_step is 0
        module.training_step(batch, 0)
    assert seen == [module.training_context(0)]
    losses = {}
    with torch.no_grad():
        for context in CONTEXTS:
            losses[tuple(context)] = float(module.training_loss(batch, batch.features, tuple(context))[0])
    assert len(set(losses.values())) == 3, losses  # each context masks the forward differently


@pytest.mark.slow
def test_the_streaming_preset_trains_and_validates_end_to_end(tiny_run):
    cfg = tiny_run(["model=tiny_streaming", "trainer.fast_dev_run=2", "test=false"])
    result = train(cfg)
    assert result["global_step"] == 2
    assert torch.isfinite(torch.tensor(result["metrics"]["val/wer"]))
