"""scripts/build_ngram_lm.py on the tiny corpus' training transcripts: IRSTLM's ARPA over the tokenizer's pieces
(and NeMo's words) loads into NgramLM and scores as kenlm does; a missing IRSTLM is named with its Debian package."""

from __future__ import annotations

import math
from pathlib import Path

import build_ngram_lm
import pytest
import torch

from asr_plugin.data.sources.manifest import read_manifest
from asr_plugin.decoding import ngram_build
from asr_plugin.decoding.ngram_lm import NgramLM


def sentence_scores(lm: NgramLM, sentences: list[list[int]]) -> list[float]:
    """Natural-log probability of each token sequence (after <s>, </s> included), the batch advanced together."""
    longest = max(map(len, sentences))
    ids = torch.tensor([s + [0] * (longest - len(s)) for s in sentences])  # padded with the blank: score 0
    states, total = lm.initial_states(len(sentences), torch.device("cpu")), torch.zeros(len(sentences))
    for step in range(longest):
        scores, next_states = lm.advance(states)
        total += scores.gather(1, ids[:, step : step + 1])[:, 0]
        states = next_states.gather(1, ids[:, step : step + 1])[:, 0]
    return (total + lm.final(states)).tolist()


@pytest.mark.skipif(not ngram_build.irstlm_installed(), reason="IRSTLM (Debian's irstlm) is not installed")
def test_built_lm_scores_as_kenlm_and_as_its_nemo_spelling(corpus, tmp_path, capsys):
    kenlm = pytest.importorskip("kenlm")
    _, datamodule = corpus
    manifest, tokenizer = Path(datamodule.work_dir, "train.jsonl"), datamodule.tokenizer
    pieces_arpa, nemo_arpa = tmp_path / "lm.arpa", tmp_path / "lm-nemo.arpa"
    common = ["--manifest", str(manifest), "--tokenizer", str(datamodule.tokenizer_path), "--order", "3"]
    assert build_ngram_lm.main([*common, "--output", str(pieces_arpa)]) == 0
    assert "3-gram LM of 24 sentences" in capsys.readouterr().err
    assert build_ngram_lm.main([*common, "--output", str(nemo_arpa), "--words", "nemo"]) == 0
    assert not list(tmp_path.glob(".*"))  # written atomically: no temporary left
    assert pieces_arpa.read_text(encoding="utf-8").startswith("\\data\\\n")  # as NeMo's reader needs it

    pieces = [tokenizer.id_to_piece(k) for k in range(tokenizer.vocab_size)]
    lm, nemo_lm = NgramLM.from_arpa(pieces_arpa, pieces), NgramLM.from_arpa(nemo_arpa, pieces)
    assert lm.order == 3 and lm.num_arcs > tokenizer.vocab_size
    sentences = [tokenizer.encode(entry.text) for entry in read_manifest(manifest)]
    reference = kenlm.Model(str(pieces_arpa))
    expected = [
        math.log(10) * reference.score(" ".join(tokenizer.id_to_piece(k) for k in s), bos=True, eos=True)
        for s in sentences
    ]
    ours = sentence_scores(lm, sentences)
    assert ours == pytest.approx(expected, abs=1e-4)
    assert sentence_scores(nemo_lm, sentences) == pytest.approx(ours, abs=1e-5)
    # the LM of these sentences prefers them to the same tokens reversed
    backwards = sentence_scores(lm, [s[::-1] for s in sentences])
    assert sum(o > b for o, b in zip(ours, backwards)) > 0.8 * len(sentences)


def test_missing_irstlm_named_with_its_debian_package(tmp_path, monkeypatch):
    monkeypatch.delenv("IRSTLM", raising=False)
    monkeypatch.setattr(ngram_build, "IRSTLM_HOMES", (str(tmp_path / "nowhere"),))
    with pytest.raises(FileNotFoundError, match=r"install Debian's package irstlm \(apt-get install irstlm\)"):
        ngram_build.build_arpa(["▁HELLO ▁WORLD"], tmp_path / "lm.arpa")
    assert not (tmp_path / "lm.arpa").exists()
