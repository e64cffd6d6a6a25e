"""The round trip on 100 utterances of random lengths, both lattices: a transformers Parakeet directory read by
the seam gives transformers' encoder output (within 1e-5) and `generate`'s greedy transcripts on every one; changed
as a fine-tune changes it and written back, transformers loads it and its `generate` transcribes every one as our
greedy search does (its weights are loaded exactly as written; its encoder output then differs from ours by
float32 rounding of the changed weights, ~2e-5 at these weights' scale)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers.models.parakeet")

from transformers import AutoModel  # noqa: E402
from transformers_models import (  # noqa: E402
    KINDS,
    assert_same_greedy_transcripts,
    decodable_model,
    make_batch,
    save_directory,
)

from asr_plugin.formats import format_of, read_model  # noqa: E402
from asr_plugin.formats.transformers_parakeet import parakeet_state_dict  # noqa: E402

UTTERANCES = 100
ROWS = 25  # utterances per encoder call (generate decodes one at a time: assert_same_greedy_transcripts)
CAP = 3  # tokens per frame, generate's and ours: 100 generate calls of transformers' default 10 take a minute


def _utterances(kind: str) -> dict[str, torch.Tensor]:
    """`UTTERANCES` random feature sequences of 12 to 48 frames."""
    frames = torch.randint(12, 49, (UTTERANCES,), generator=torch.Generator().manual_seed(7)).tolist()
    return make_batch(kind, frames=frames, labels=[1] * UTTERANCES, seed=8)


def _assert_same_encoder_output(model, ours, batch, rows: int = ROWS) -> None:
    """Encoder outputs of `ours` (our Transducer) and `model` (transformers') within 1e-5 of each utterance's
    largest output, `rows` at a time (ragged batches: each spans several lengths). These weights are far from
    transformers' scale (the transcripts need it): outputs of up to ~30, float32 rounding ~2e-5."""
    for start in range(0, UTTERANCES, rows):
        features = batch["input_features"][start : start + rows]
        mask = batch["attention_mask"][start : start + rows]
        with torch.no_grad():
            expected = model.get_audio_features(input_features=features, attention_mask=mask)
            encoded, lengths = ours.encode(features, mask.sum(-1))
        assert lengths.tolist() == expected.attention_mask.sum(-1).tolist()
        for row, length in enumerate(lengths.tolist()):
            theirs = expected.last_hidden_state[row, :length]
            error = float((encoded[row, :length] - theirs).abs().max())
            assert error <= 1e-5 * float(theirs.abs().max()), f"utterance {start + row}: max error {error:.3g}"


@pytest.mark.parametrize("kind", KINDS)
def test_read_and_written_back_on_100_utterances(kind, tmp_path):
    model = decodable_model(kind)
    model.config.max_symbols_per_step = model.max_symbols_per_step = CAP  # the saved config and the live model
    save_directory(model, tmp_path / "source")
    batch = _utterances(kind)
    loaded = read_model(tmp_path / "source")
    _assert_same_encoder_output(model, loaded.model, batch)
    assert_same_greedy_transcripts(model, loaded.model, batch)

    generator = torch.Generator().manual_seed(9)
    with torch.no_grad():  # as a fine-tune changes it
        for parameter in loaded.model.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=generator))
    reloaded = AutoModel.from_pretrained(format_of(tmp_path / "source").write(loaded, tmp_path / "back")).eval()
    written = parakeet_state_dict(loaded.model, loaded.architecture)
    assert all(torch.equal(value, written[key]) for key, value in reloaded.state_dict().items())  # loaded as written
    assert_same_greedy_transcripts(reloaded, loaded.model, batch)
