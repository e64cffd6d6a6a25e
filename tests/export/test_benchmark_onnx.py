"""scripts/benchmark_onnx.py as documented, at a tiny size: offline, on a manifest of this project and on the same
utterances as a NeMo manifest in lower case, its table has the same WERs (references normalised by the model's
tokenizer, as eval.py scores them), and the script exits 0 after printing it."""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict

import pytest
import torch
from tiny_models import MICRO_LOGMEL

from asr_plugin.data import read_manifest
from asr_plugin.formats.checkpoint import model_node
from asr_plugin.models import build_transducer

pytest.importorskip("sherpa_onnx")
pytestmark = pytest.mark.filterwarnings("ignore")


def _wers(table: str) -> dict[str, str]:
    rows = [line.strip("|").split("|") for line in table.splitlines() if line.startswith("| ")][2:]  # no header
    return {cells[0].strip(): cells[1].strip() for cells in rows}


def test_the_script_scores_nemo_and_lower_case_manifests_as_its_own(corpus, tmp_path, capsys):
    datamodule, _ = corpus
    tokenizer = datamodule.tokenizer
    architecture = {"vocab_size": tokenizer.vocab_size, **MICRO_LOGMEL}
    torch.manual_seed(0)
    model = build_transducer(**architecture).eval()
    with torch.no_grad():
        model.joint.output.bias[0] -= 2.0  # emit some tokens
    checkpoint = tmp_path / "micro.ckpt"
    torch.save(
        {
            "hyper_parameters": {"model": model_node(architecture)},
            "state_dict": {f"model.{key}": value for key, value in model.state_dict().items()},
            "asr_plugin": {"tokenizer": tokenizer.record(), "frontend": datamodule.frontend_spec},
        },
        checkpoint,
    )
    entries = read_manifest(next(iter(datamodule.test_manifests.values())))[:3]
    ours, nemo = tmp_path / "ours.jsonl", tmp_path / "nemo.json"
    ours.write_text("".join(json.dumps({**asdict(e), "text": e.text.upper()}) + "\n" for e in entries))
    nemo.write_text(
        "".join(
            json.dumps({"audio_filepath": e.path, "duration": e.duration, "text": e.text.lower()}) + "\n"
            for e in entries
        )
    )
    script = importlib.import_module("benchmark_onnx")
    tables = []
    for manifest in (ours, nemo):
        assert script.main([str(checkpoint), str(manifest), "--out", str(tmp_path / "onnx")]) == 0
        tables.append(_wers(capsys.readouterr().out))
    assert set(tables[0]) == {"ours greedy", "sherpa-onnx float", "sherpa-onnx int8"}
    assert tables[0] == tables[1]
