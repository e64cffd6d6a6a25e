"""Our import of a NeMo transducer against NeMo's own model on one batch: the differences, stage by stage (needs NeMo).

Front-end features, encoder output, joint log-probabilities (max abs difference over valid frames), NeMo's
per-sample loss against ours in both modes, and greedy transcripts; RNN-T and TDT models.
scripts/compare_nemo_import.py prints them; tests/finetune/test_nemo_equivalence.py asserts on them.

NeMo's loss is the model's own ``model.loss`` for RNN-T. NeMo's TDT losses do not run on a CPU as shipped:
its numba ``TDTLossNumba`` is CUDA-only and its pure-PyTorch ``TDTLossPytorch`` (the reference its tests use)
moves two tensors with ``.cuda()``; on a CPU that call is made a no-op while it runs (`nemo_tdt_losses`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from unittest import mock

import torch

from asr_plugin.decoding import greedy_search
from asr_plugin.formats.nemo.importer import NemoImport, import_nemo
from asr_plugin.formats.nemo.weights import blank_first_to_last
from asr_plugin.losses import TDT, TransducerLoss

SHARPEN = 6.0  # joint output scale for the greedy comparison, so that random weights emit tokens


def speech_like_audio(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) 16 kHz audio (harmonics of a wandering pitch plus noise), zero-padded, and (B,) lengths."""
    generator = torch.Generator().manual_seed(seed)
    audio = torch.zeros(len(lengths), max(lengths))
    for b, length in enumerate(lengths):
        t = torch.arange(length) / 16000
        pitch = 120 + 40 * torch.sin(2 * torch.pi * 0.7 * t + b)
        phase = 2 * torch.pi * torch.cumsum(pitch, 0) / 16000
        voiced = sum(torch.sin(k * phase) / k for k in range(1, 6))
        audio[b, :length] = 0.3 * voiced + 0.05 * torch.randn(length, generator=generator)
    return audio, torch.tensor(lengths)


def random_targets(vocab: int, lengths: list[int], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, U) NeMo token ids in [0, vocab) (its blank is `vocab`), 0-padded, and (B,) lengths."""
    generator = torch.Generator().manual_seed(seed)
    targets = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for b, length in enumerate(lengths):
        targets[b, :length] = torch.randint(0, vocab, (length,), generator=generator)
    return targets, torch.tensor(lengths)


def _max_diff(ours: torch.Tensor, reference: torch.Tensor, lengths: torch.Tensor) -> float:
    """Max |ours - reference| over the valid frames of (B, T, ...) tensors."""
    return max(float((ours[b, :n] - reference[b, :n]).abs().max()) for b, n in enumerate(lengths.tolist()))


def nemo_tdt_losses(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int,
    durations: list[int],
    sigma: float,
) -> torch.Tensor:
    """(B,) NeMo's TDT loss per sample (``TDTLossPytorch``) of NeMo's (B, T, U+1, V + D) joint output."""
    from nemo.collections.asr.losses.rnnt_pytorch import TDTLossPytorch

    loss = TDTLossPytorch(blank=blank, durations=durations, reduction="none", sigma=sigma)
    on_cpu = mock.patch.object(torch.Tensor, "cuda", lambda self, *args, **kwargs: self)
    with on_cpu if not log_probs.is_cuda else contextlib.nullcontext():
        return loss(acts=log_probs, labels=targets, act_lens=lengths, label_lens=target_lengths)


@torch.no_grad()
def compare(nemo, ours: NemoImport, audio: torch.Tensor, lengths: torch.Tensor, target_lengths: list[int]) -> dict:
    """Differences between NeMo's `EncDecRNNTBPEModel` (eval mode) and `ours` on one batch."""
    result = {}
    features, feature_lengths = nemo.preprocessor(input_signal=audio, length=lengths)  # (B, F, T)
    our_features, our_feature_lengths = ours.frontend(audio, lengths)
    result["feature_lengths_equal"] = our_feature_lengths.tolist() == feature_lengths.tolist()
    result["features"] = _max_diff(our_features, features.transpose(1, 2), feature_lengths)
    enc, enc_lengths = nemo.encoder(audio_signal=features, length=feature_lengths)  # (B, D, T')
    encoded, encoded_lengths = ours.model.encode(features.transpose(1, 2), feature_lengths)
    result["encoder_lengths_equal"] = encoded_lengths.tolist() == enc_lengths.tolist()
    result["encoder"] = _max_diff(encoded, enc.transpose(1, 2), enc_lengths)
    end_to_end, _ = ours.model.encode(our_features, our_feature_lengths)
    result["encoder_end_to_end"] = _max_diff(end_to_end, enc.transpose(1, 2), enc_lengths)

    lattice = ours.model.lattice
    vocab = ours.model.vocab_size  # tokens and the blank; a TDT joint's D duration scores follow
    targets, target_lengths = random_targets(vocab - 1, target_lengths)
    decoder_out, _, _ = nemo.decoder(targets=targets, target_length=target_lengths)
    reference = nemo.joint(encoder_outputs=enc, decoder_outputs=decoder_out)  # (B, T, U+1, V [+ D]), log-softmaxed
    # NeMo's CPU joint log-softmaxes all its outputs together; the heads' own normalisations follow from it
    log_probs = ours.model.joint(encoded, ours.model.predictor(targets + 1)).log_softmax(-1)
    nemo_order = blank_first_to_last(log_probs.movedim(-1, 0), vocab).movedim(0, -1)  # our blank back to NeMo's
    result["joint_log_probs"] = max(
        float((nemo_order[b, :n, : u + 1] - reference[b, :n, : u + 1]).abs().max())
        for b, (n, u) in enumerate(zip(enc_lengths.tolist(), target_lengths.tolist()))
    )
    if isinstance(lattice, TDT):
        nemo_losses = nemo_tdt_losses(
            reference, targets, enc_lengths, target_lengths, vocab - 1, list(lattice.durations), lattice.sigma
        )
    else:
        reduction, nemo.loss.reduction = nemo.loss.reduction, None  # per sample: NeMo's RNNTLoss reduces otherwise
        nemo_losses = nemo.loss(
            log_probs=reference, targets=targets, input_lengths=enc_lengths, target_lengths=target_lengths
        )
        nemo.loss.reduction = reduction
    result["loss_nemo"] = nemo_losses.tolist()
    for mode in ("batched", "samplewise"):
        loss_fn = TransducerLoss(mode=mode, lattice=lattice, reduction="none")
        result[f"loss_{mode}"] = ours.model.loss_from_encoder(
            encoded, enc_lengths, targets + 1, target_lengths, loss_fn
        ).tolist()

    outputs = (nemo.joint.joint_net[-1], ours.model.joint.output)
    for output in outputs:
        output.weight.mul_(SHARPEN)
    hypotheses = nemo.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_lengths)
    hypotheses = hypotheses[0] if isinstance(hypotheses, tuple) else hypotheses
    ours_hyps = greedy_search(
        ours.model, encoded, encoded_lengths, nemo.cfg.decoding.greedy.max_symbols, ours.tokenizer
    )
    for output in outputs:
        output.weight.div_(SHARPEN)
    result["greedy_tokens"] = sum(len(h.tokens) for h in ours_hyps)
    result["greedy_tokens_equal"] = [[t - 1 for t in h.tokens] for h in ours_hyps] == [
        [int(t) for t in h.y_sequence] for h in hypotheses
    ]
    result["greedy_text_equal"] = [h.text for h in ours_hyps] == [h.text for h in hypotheses]
    return result


def compare_file(path: str | Path) -> dict:
    """`compare` on a 3-utterance batch (1.5, 1.07, 0.62 s) for the .nemo file `path`."""
    from nemo.collections.asr.models import ASRModel

    nemo = ASRModel.restore_from(str(path), map_location="cpu").eval()
    return compare(nemo, import_nemo(path), *speech_like_audio([24000, 17123, 9871]), target_lengths=[7, 4, 5])
