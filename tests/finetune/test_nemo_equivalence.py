"""Our import of NeMo-built (Fast)Conformer-RNNT checkpoints against NeMo itself (skipped without NeMo).

Run in an environment with ``pip install -e '.[nemo]'``. The checkpoints are NeMo's example configs
shrunk, with random weights, written by scripts/make_nemo_fixtures.py at the start of the session.
"""

from __future__ import annotations

import pytest
import torch

from asr_plugin.decoding import greedy_search
from asr_plugin.finetune import import_nemo
from asr_plugin.losses import TransducerLoss

from nemo_fixtures import fixture_script

nemo_asr = pytest.importorskip("nemo.collections.asr")

ARCHITECTURES = ["conformer_transducer", "fast_conformer_transducer"]
MAX_SYMBOLS = 10  # the fixtures' decoding.greedy.max_symbols


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict:
    script, out = fixture_script(), tmp_path_factory.mktemp("nemo")
    return {name: script.make_fixture(name, out) for name in ARCHITECTURES}


def _audio(batch_lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) speech-like audio (harmonics with a wandering pitch, plus noise), zero-padded, and (B,) lengths."""
    generator = torch.Generator().manual_seed(seed)
    audio = torch.zeros(len(batch_lengths), max(batch_lengths))
    for b, length in enumerate(batch_lengths):
        t = torch.arange(length) / 16000
        pitch = 120 + 40 * torch.sin(2 * torch.pi * 0.7 * t + b)
        phase = 2 * torch.pi * torch.cumsum(pitch, 0) / 16000
        voiced = sum(torch.sin(k * phase) / k for k in range(1, 6))
        audio[b, :length] = 0.3 * voiced + 0.05 * torch.randn(length, generator=generator)
    return audio, torch.tensor(batch_lengths)


def _targets(vocab: int, lengths: list[int], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, U) NeMo token ids in [0, vocab) (its blank is `vocab`), 0-padded, and (B,) lengths."""
    generator = torch.Generator().manual_seed(seed)
    targets = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for b, length in enumerate(lengths):
        targets[b, :length] = torch.randint(0, vocab, (length,), generator=generator)
    return targets, torch.tensor(lengths)


@pytest.fixture(scope="module", params=ARCHITECTURES)
def pair(request, checkpoints):
    path = checkpoints[request.param]
    nemo = nemo_asr.models.EncDecRNNTBPEModel.restore_from(str(path), map_location="cpu").eval()
    return nemo, import_nemo(path)


@pytest.fixture(scope="module")
def batch():
    return _audio([24000, 17123, 9871])


def _valid(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Concatenated valid frames of (B, T, ...) -> (sum(lengths), ...)."""
    return torch.cat([x[b, : int(n)] for b, n in enumerate(lengths)])


def test_frontend_matches_nemo_preprocessor(pair, batch):
    nemo, ours = pair
    audio, lengths = batch
    with torch.no_grad():
        reference, reference_lengths = nemo.preprocessor(input_signal=audio, length=lengths)  # (B, F, T)
        features, feature_lengths = ours.frontend(audio, lengths)
    assert feature_lengths.tolist() == reference_lengths.tolist()
    torch.testing.assert_close(_valid(features, feature_lengths),
                               _valid(reference.transpose(1, 2), reference_lengths), atol=2e-4, rtol=1e-4)


def test_encoder_output_matches_within_1e_4(pair, batch):
    nemo, ours = pair
    audio, lengths = batch
    with torch.no_grad():
        features, feature_lengths = nemo.preprocessor(input_signal=audio, length=lengths)
        reference, reference_lengths = nemo.encoder(audio_signal=features, length=feature_lengths)  # (B, D, T')
        encoded, encoded_lengths = ours.model.encode(features.transpose(1, 2), feature_lengths)
        end_to_end, _ = ours.model.encode(*ours.frontend(audio, lengths))
    assert encoded_lengths.tolist() == reference_lengths.tolist()
    reference = _valid(reference.transpose(1, 2), reference_lengths)
    assert (_valid(encoded, encoded_lengths) - reference).abs().max() <= 1e-4
    assert (_valid(end_to_end, encoded_lengths) - reference).abs().max() <= 1e-3  # front end's float noise included


def _nemo_joint_and_ours(nemo, ours, batch):
    audio, lengths = batch
    vocab = nemo.joint.num_classes_with_blank - 1
    targets, target_lengths = _targets(vocab, [7, 4, 5])
    with torch.no_grad():
        features, feature_lengths = nemo.preprocessor(input_signal=audio, length=lengths)
        enc, enc_lengths = nemo.encoder(audio_signal=features, length=feature_lengths)
        decoder_out, _, _ = nemo.decoder(targets=targets, target_length=target_lengths)
        reference = nemo.joint(encoder_outputs=enc, decoder_outputs=decoder_out)  # (B, T, U+1, V) log-probs
        encoded, _ = ours.model.encode(features.transpose(1, 2), feature_lengths)
        predicted = ours.model.predictor(targets + 1)  # our ids are NeMo's + 1 (blank 0)
    return reference, enc, enc_lengths, targets, target_lengths, encoded, predicted


def test_joint_log_probs_and_loss_match(pair, batch):
    nemo, ours = pair
    reference, enc, enc_lengths, targets, target_lengths, encoded, predicted = _nemo_joint_and_ours(nemo, ours, batch)
    with torch.no_grad():
        log_probs = ours.model.joint(encoded, predicted).log_softmax(-1)
    nemo_order = torch.cat([log_probs[..., 1:], log_probs[..., :1]], dim=-1)  # blank back to the end
    for b, n in enumerate(enc_lengths.tolist()):
        u = int(target_lengths[b]) + 1
        torch.testing.assert_close(nemo_order[b, :n, :u], reference[b, :n, :u], atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        nemo_loss = nemo.loss(log_probs=reference, targets=targets, input_lengths=enc_lengths,
                              target_lengths=target_lengths)
    for mode in ("batched", "samplewise"):
        ours_loss = ours.model.loss_from_encoder(encoded, enc_lengths, targets + 1, target_lengths,
                                                 TransducerLoss(mode=mode, reduction="mean"))
        torch.testing.assert_close(ours_loss, nemo_loss.to(ours_loss.dtype), atol=1e-4, rtol=1e-5)


def test_greedy_transcripts_match(pair, batch):
    nemo, ours = pair
    audio, lengths = batch
    with torch.no_grad():
        # A sharper joint than the random init so that both searches emit tokens, not only blanks.
        for model, output in ((nemo, nemo.joint.joint_net[-1]), (ours.model, ours.model.joint.output)):
            output.weight.mul_(6.0)
        features, feature_lengths = nemo.preprocessor(input_signal=audio, length=lengths)
        enc, enc_lengths = nemo.encoder(audio_signal=features, length=feature_lengths)
        reference = nemo.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_lengths)
        encoded, encoded_lengths = ours.model.encode(features.transpose(1, 2), feature_lengths)
        hyps = greedy_search(ours.model, encoded, encoded_lengths, MAX_SYMBOLS, ours.tokenizer)
        for model, output in ((nemo, nemo.joint.joint_net[-1]), (ours.model, ours.model.joint.output)):
            output.weight.div_(6.0)
    reference = reference[0] if isinstance(reference, tuple) else reference
    assert sum(len(h.tokens) for h in hyps) > 0
    assert [[t - 1 for t in h.tokens] for h in hyps] == [[int(t) for t in r.y_sequence] for r in reference]
    assert [h.text for h in hyps] == [r.text for r in reference]
