"""n-gram LM shallow fusion against NeMo's NGPU-LM on the NeMo-trained reference (the session's `nemo_reference`,
tests/finetune/conftest.py): one token-level ARPA of its training transcripts in NeMo's words (IRSTLM), fused at
the same weight into NeMo's ``greedy_batch`` and into our greedy search of the imported model, and into NeMo's
``malsd_batch`` (beam 4, its default ``blank_lm_score_mode=lm_weighted_full`` and ``pruning_mode=late``,
``score_norm`` off) and our beam search (its default blank scoring, the same; ``score_norm`` off;
``lm_final=False``: NeMo adds no end-of-sentence score); the dev transcripts are identical on at least 95 % of the
utterances and the WERs within 0.2 points."""

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


BEAM = 4


def nemo_fused_transcripts(path, manifest, arpa, weight: float, beam: int | None = None) -> list[str]:
    """NeMo's ``transcribe`` with the ARPA fused (``ngram_lm_model``, ``ngram_lm_alpha``) into ``greedy_batch``, or
    into ``malsd_batch`` with `beam` hypotheses when given (the `imported_transcripts` settings: NeMo's
    ``max_symbols``, no length normalisation)."""
    from nemo.collections.asr.models import ASRModel
    from omegaconf import open_dict

    nemo = ASRModel.restore_from(str(path), map_location="cpu").eval()
    config = nemo.cfg.decoding
    with open_dict(config):
        if beam is None:
            config.strategy = "greedy_batch"
            config.greedy.ngram_lm_model = str(arpa)
            config.greedy.ngram_lm_alpha = weight
        else:
            config.strategy = "malsd_batch"
            config.beam = {
                **config.get("beam", {}),
                "beam_size": beam,
                "max_symbols": config.greedy.get("max_symbols") or config.greedy.get("max_symbols_per_step"),
                "score_norm": False,
                "ngram_lm_model": str(arpa),
                "ngram_lm_alpha": weight,
            }
    nemo.change_decoding_strategy(config, verbose=False)
    return nemo_transcripts(nemo, manifest)


@pytest.fixture(scope="module")
def reference_arpa(nemo_reference, tmp_path_factory):
    """The token-level ARPA of the reference's training transcripts, in NeMo's words."""
    if not irstlm_installed():
        pytest.skip("IRSTLM (Debian's irstlm) is not installed")
    tokenizer = import_nemo(nemo_reference.models["rnnt"]).tokenizer
    return build_arpa(
        token_sentences(manifest_texts(nemo_reference.manifests["train"]), tokenizer, words="nemo"),
        tmp_path_factory.mktemp("lm") / "lm.arpa",
    )


@pytest.mark.parametrize("beam", [None, BEAM], ids=["greedy_batch", "malsd_batch"])
def test_fused_transcripts_match_nemo(nemo_reference, reference_arpa, beam):
    model, dev = nemo_reference.models["rnnt"], nemo_reference.manifests["dev"]
    fused = {"lm": reference_arpa, "lm_weight": LM_WEIGHT}
    ours = imported_transcripts(model, dev, **fused, beam=beam, lm_final=False, score_norm=False)
    theirs = nemo_fused_transcripts(model, dev, reference_arpa, LM_WEIGHT, beam)
    plain = imported_transcripts(model, dev, beam=beam, score_norm=False)
    assert ours != plain  # the LM changed something, or the comparison says nothing
    same = sum(a == b for a, b in zip(ours, theirs))
    assert same >= 0.95 * len(theirs), [(a, b) for a, b in zip(ours, theirs) if a != b]
    references = manifest_texts(dev)
    assert abs(word_error_rate(ours, references) - word_error_rate(theirs, references)) <= 0.002
