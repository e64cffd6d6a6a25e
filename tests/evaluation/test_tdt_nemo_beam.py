"""A Parakeet-TDT-layout ``.nemo`` (NeMo's FastConformer-TDT layout, durations 0-4, random weights: tests/nemo_models.py)
decodes with beam search through eval.py (``decoding.methods=[greedy,beam]``) and scripts/transcribe.py
(``--method beam``): each gives, utterance by utterance, what `beam_search` gives on the file's own front end and
encoder output, with NeMo's length normalisation (``decoding.score_norm``, ``--score-norm``; the default) and
without it, where beam search's hypotheses are at least as likely as greedy's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from eval_setup import eval_cfg
from nemo_models import write_synthetic_nemo

from asr_plugin.decoding import beam_search, greedy_search
from asr_plugin.evaluation import evaluate
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "transcribe.py"
BEAM = 3


def recogs(path: Path) -> dict[str, str]:
    """{id: hypothesis} of a recogs file."""
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    return {row[0]: row[2] if len(row) > 2 else "" for row in rows}


@pytest.mark.parametrize("score_norm", [True, False])
def test_eval_and_transcribe_decode_a_tdt_nemo_with_beam_search(corpus, tmp_path, capsys, score_norm: bool) -> None:
    root, datamodule = corpus
    nemo, _ = write_synthetic_nemo(tmp_path, "fast_conformer_tdt")
    norm = f"decoding.score_norm={str(score_norm).lower()}"
    evaluate(eval_cfg(root, nemo, "decoding.methods=[greedy,beam]", f"decoding.beam={BEAM}", norm))
    assert json.loads((root / "eval" / "wer-summary.json").read_text())["score_norm"] is score_norm
    loaded = read_model(nemo)
    assert loaded.model.lattice.num_extra_outputs == 5  # the TDT durations 0-4
    frontend = build_frontend(loaded.require_frontend_spec()).eval()
    cap = loaded.decoding["max_symbols_per_frame"]
    entries = datamodule.eval_entries("dev")
    want, tokens = {}, 0
    with torch.no_grad():
        for entry in entries:
            audio = entry.load_audio(frontend.sample_rate)[None]
            encoded = loaded.model.encode(*frontend(audio, torch.tensor([audio.shape[1]])))
            beam = beam_search(loaded.model, *encoded, BEAM, loaded.tokenizer, cap, score_norm=score_norm)[0]
            greedy = greedy_search(loaded.model, *encoded, cap)[0]
            assert score_norm or beam.score >= greedy.score - 1e-4  # normalised, it may choose a less likely one
            want[entry.id], tokens = beam.text, tokens + len(beam.tokens)
    assert tokens > 2 * len(entries)
    assert recogs(root / "eval" / "recogs-dev-beam.txt") == want

    spec = importlib.util.spec_from_file_location("transcribe", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    paths = [entry.path for entry in entries[:3]]
    capsys.readouterr()
    flag = "--score-norm" if score_norm else "--no-score-norm"
    assert script.main([*paths, "--checkpoint", str(nemo), "--method", "beam", "--beam", str(BEAM), flag]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"{entry.path}\t{want[entry.id]}" for entry in entries[:3]]
