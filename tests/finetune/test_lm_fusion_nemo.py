"""n-gram LM shallow fusion against NeMo's NGPU-LM on the NeMo-trained reference (the session's `nemo_reference`,
tests/finetune/conftest.py): one token-level ARPA of its training transcripts in NeMo's words (IRSTLM), fused at
the same weight into NeMo's ``greedy_batch`` and into our greedy search of the imported model; the dev
transcripts are identical on at least 95 % of the utterances and the WERs within 0.2 points."""

from __future__ import annotations

import pytest

pytest.importorskip("nemo.collections.asr")
pytestmark = [pytest.mark.nemo, pytest.mark.slow]

from asr_plugin.decoding.ngram_build import build_arpa, irstlm_installed, token_sentences  # noqa: E402
from asr_plugin.formats.nemo import import_nemo  # noqa: E402
from benchmarks.nemo_reference import (  # noqa: E402
    imported_transcripts,
    manifest_texts,
    nemo_transcripts,
    word_error_rate,
)

LM_WEIGHT = 0.5


def nemo_fused_transcripts(path, manifest, arpa, weight: float) -> list[str]:
    """NeMo's ``transcribe`` with ``greedy_batch`` and the ARPA fused (``ngram_lm_model``, ``ngram_lm_alpha``)."""
    from nemo.collections.asr.models import ASRModel
    from omegaconf import open_dict

    nemo = ASRModel.restore_from(str(path), map_location="cpu").eval()
    config = nemo.cfg.decoding
    with open_dict(config):
        config.strategy = "greedy_batch"
        config.greedy.ngram_lm_model = str(arpa)
        config.greedy.ngram_lm_alpha = weight
    nemo.change_decoding_strategy(config, verbose=False)
    return nemo_transcripts(nemo, manifest)


@pytest.mark.skipif(not irstlm_installed(), reason="IRSTLM (Debian's irstlm) is not installed")
def test_greedy_fusion_transcripts_match_nemo_greedy_batch(nemo_reference, tmp_path):
    model, dev = nemo_reference.models["rnnt"], nemo_reference.manifests["dev"]
    tokenizer = import_nemo(model).tokenizer
    arpa = build_arpa(
        token_sentences(manifest_texts(nemo_reference.manifests["train"]), tokenizer, words="nemo"),
        tmp_path / "lm.arpa",
    )
    ours = imported_transcripts(model, dev, lm=arpa, lm_weight=LM_WEIGHT)
    theirs = nemo_fused_transcripts(model, dev, arpa, LM_WEIGHT)
    plain = nemo_reference.transcripts["rnnt"]["dev"]
    assert ours != plain  # the LM changed something, or the comparison says nothing
    same = sum(a == b for a, b in zip(ours, theirs))
    assert same >= 0.95 * len(theirs), [(a, b) for a, b in zip(ours, theirs) if a != b]
    references = manifest_texts(dev)
    assert abs(word_error_rate(ours, references) - word_error_rate(theirs, references)) <= 0.002
