"""NgramLM against NeMo's NGPU-LM (``NGramGPULanguageModel``) on the same ARPA in NeMo's words (chr(k + 100) for its
token k, our k + 1): the same natural-log score for every token of random sequences and for </s>."""

from __future__ import annotations

import random

import pytest
import torch

pytest.importorskip("nemo.collections.asr")
pytestmark = pytest.mark.nemo

from nemo.collections.asr.parts.submodules.ngram_lm import NGramGPULanguageModel  # noqa: E402

from asr_plugin.decoding.ngram_lm import NgramLM  # noqa: E402
from tests.decoding.random_arpa import write_random_arpa  # noqa: E402

NEMO_VOCAB = 12  # NeMo's tokens 0..11 (its blank 12); token 11 is in no ARPA below
PIECES = ["<blk>", *(f"p{k}" for k in range(NEMO_VOCAB))]  # our token k + 1 is NeMo's k


def ours_per_token(lm: NgramLM, nemo_ids: torch.Tensor) -> torch.Tensor:
    """(B, L) NeMo ids -> (B, L + 1) our score of each token (our id = NeMo's + 1), then of </s>."""
    states, columns = lm.initial_states(nemo_ids.shape[0], torch.device("cpu")), []
    for step in range(nemo_ids.shape[1]):
        scores, next_states = lm.advance(states)
        ids = nemo_ids[:, step : step + 1] + 1
        columns.append(scores.gather(1, ids)[:, 0])
        states = next_states.gather(1, ids)[:, 0]
    return torch.stack([*columns, lm.final(states)], dim=1)


@pytest.mark.parametrize("order", [2, 3, 4])
def test_scores_equal_nemo_ngpu_lm(tmp_path, order):
    words = [chr(100 + k) for k in range(NEMO_VOCAB - 1)]
    path = write_random_arpa(tmp_path / "lm.arpa", words, order, seed=order)
    ours = NgramLM.from_arpa(path, PIECES, words="nemo")
    # NeMo's default normalize_unk=True spreads <unk>'s probability over the tokens the LM lacks; kenlm and ours
    # give each of them <unk>'s whole probability (normalize_unk=False)
    theirs = NGramGPULanguageModel.from_arpa(path, vocab_size=NEMO_VOCAB, normalize_unk=False, use_triton=False)
    rng = random.Random(order)
    labels = torch.tensor([[rng.randrange(NEMO_VOCAB) for _ in range(10)] for _ in range(32)])
    with torch.no_grad():
        expected = theirs.score_sentences(labels, bos=True, eos=True)
    torch.testing.assert_close(ours_per_token(ours, labels), expected, atol=1e-5, rtol=0)
