"""Checkpoint selection/averaging and the eval recipe on a generated mini corpus."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import torch
from built_once import copy_of
from hydra import compose, initialize_config_dir
from tiny_models import MICRO_LOGMEL, TINY_CORPUS

from asr_plugin.evaluation import evaluate
from asr_plugin.evaluation.scoring import Recognition, score, write_errs
from asr_plugin.formats.checkpoint import average_state_dicts, select_checkpoints
from asr_plugin.models import build_transducer

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def save_module_checkpoint(path: Path, datamodule, seed: int, epoch: int, step: int, records: bool = True) -> dict:
    """A model saved in TransducerModule's checkpoint layout, with the data module's tokenizer and front-end
    records (as training saves them) unless `records` is False (a checkpoint of an earlier version); returns
    its state dict."""
    torch.manual_seed(seed)
    model_cfg = {
        "_target_": "asr_plugin.models.build_transducer",
        "vocab_size": datamodule.tokenizer.vocab_size,
        **MICRO_LOGMEL,
    }
    model = build_transducer(**{k: v for k, v in model_cfg.items() if k != "_target_"})
    with torch.no_grad():
        model.joint.output.bias[0] -= 2.0  # emit some tokens
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    checkpoint = {"state_dict": state, "epoch": epoch, "global_step": step, "hyper_parameters": {"model": model_cfg}}
    if records:
        checkpoint["asr_plugin"] = {"tokenizer": datamodule.tokenizer.record(), "frontend": datamodule.frontend_spec}
    torch.save(checkpoint, path)
    return model.state_dict()


def test_average_state_dicts_of_known_tensors() -> None:
    states = [
        {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)},
        {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(5)},
    ]
    averaged = average_state_dicts(states)
    assert torch.equal(averaged["w"], torch.tensor([2.0, 4.0]))
    assert int(averaged["n"]) == 5
    with pytest.raises(ValueError, match="different keys"):
        average_state_dicts([{"w": torch.zeros(1)}, {"v": torch.zeros(1)}])


def test_select_checkpoints_orders_by_epoch_and_step(tmp_path) -> None:
    names = ["epoch=10-step=110.ckpt", "epoch=2-step=30.ckpt", "epoch=9-step=100.ckpt", "last.ckpt"]
    for offset, name in enumerate(names):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (time.time() - offset, time.time() - offset))
    assert [p.name for p in select_checkpoints(tmp_path, 2)] == ["epoch=9-step=100.ckpt", "epoch=10-step=110.ckpt"]
    assert [p.name for p in select_checkpoints(tmp_path / "epoch=9-step=100.ckpt", 2)] == [
        "epoch=2-step=30.ckpt",
        "epoch=9-step=100.ckpt",
    ]
    with pytest.raises(ValueError, match="avg=4"):
        select_checkpoints(tmp_path, 4)


def test_errs_file_and_scores(tmp_path) -> None:
    recognitions = [Recognition("u1", "THE CAT SEES A DOG", "THE HAT SEES DOG TOO"), Recognition("u2", "A B", "")]
    counts = score(recognitions)
    assert (counts.substitutions, counts.deletions, counts.insertions, counts.ref_words) == (3, 2, 0, 7)
    assert counts.wer == pytest.approx(100 * 5 / 7)
    text = write_errs(recognitions, tmp_path / "errs.txt").read_text()
    assert text.startswith("%WER 71.43 [ 5 / 7, 0 ins, 2 del, 3 sub ]")
    assert "u1\t3\t0\t0\t5\tTHE (CAT->HAT) SEES (A->DOG) (DOG->TOO)" in text
    assert "u2\t0\t2\t0\t2\t(A->*) (B->*)" in text


def test_eval_recipe_decodes_the_mini_corpus_with_averaged_checkpoints(tiny_corpus, tmp_path, capsys, caplog) -> None:
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="eval",
            overrides=TINY_CORPUS
            + [
                f"paths.root_dir={tmp_path}",
                f"output_dir={tmp_path}/eval",
                f"checkpoint={ckpt_dir}",
                "avg=2",
                "decoding.methods=[greedy,beam]",
                "decoding.beam=3",
                "decoding.timestamps=true",
            ],
        )
    from hydra.utils import instantiate

    datamodule = instantiate(cfg.data)
    copy_of(tiny_corpus, Path(datamodule.root))
    datamodule.prepare_data()
    first = save_module_checkpoint(ckpt_dir / "epoch=0-step=5.ckpt", datamodule, seed=0, epoch=0, step=5)
    second = save_module_checkpoint(ckpt_dir / "epoch=1-step=10.ckpt", datamodule, seed=1, epoch=1, step=10)
    digest = (ckpt_dir / "epoch=1-step=10.ckpt").read_bytes()

    caplog.set_level("INFO")
    result = evaluate(cfg)
    out = tmp_path / "eval"
    for name in ("dev", "test-espeak", "test-piper"):  # progress: a line as each set starts and as it ends
        assert f"decoding {name}: 8 utterances, greedy+beam" in caplog.text
        assert re.search(rf"decoded {name}: greedy WER [\d.]+ %, beam WER [\d.]+ %", caplog.text)
    assert [Path(p).name for p in result["checkpoints"]] == ["epoch=0-step=5.ckpt", "epoch=1-step=10.ckpt"]
    assert (ckpt_dir / "epoch=1-step=10.ckpt").read_bytes() == digest
    summary = json.loads((out / "wer-summary.json").read_text())
    assert (
        summary["weights"] == result["weights"] == "average of 2 checkpoints: epoch=0-step=5.ckpt, epoch=1-step=10.ckpt"
    )
    assert {(r["set"], r["method"]) for r in summary["results"]} == {
        (s, m) for s in ("dev", "test-espeak", "test-piper") for m in ("greedy", "beam")
    }
    assert all(r["utterances"] == 8 and r["ref_words"] > 0 and r["rtf"] > 0 for r in summary["results"])
    assert (out / "wer-summary.tsv").read_text().startswith("set\tmethod\twer")
    recogs = (out / "recogs-test-piper-beam.txt").read_text().splitlines()
    assert recogs[0] == "id\tref\thyp" and len(recogs) == 9
    assert (out / "errs-dev-greedy.txt").read_text().startswith("%WER")
    # decoding.timestamps: one JSON line per utterance beside the recogs, its words in order and the recog's text
    timed = [json.loads(line) for line in (out / "timestamps-test-piper-beam.jsonl").read_text().splitlines()]
    assert {r["id"]: r["text"] for r in timed} == {row.split("\t")[0]: row.split("\t")[2] for row in recogs[1:]}
    for record in timed:
        starts = [w["start"] for w in record["words"]]
        assert starts == sorted(starts) and all(w["start"] <= w["end"] for w in record["words"])
    # The model evaluated is the average of the two checkpoints.
    from asr_plugin.formats.checkpoint import load_model

    model, _ = load_model(result["checkpoints"])
    key = "joint.output.weight"
    torch.testing.assert_close(model.state_dict()[key], (first[key] + second[key]) / 2)

    # scripts/transcribe.py on two corpus files gives the eval recipe's beam hypotheses (the same features,
    # read from the checkpoint: no data config).
    import importlib.util

    spec = importlib.util.spec_from_file_location("transcribe", CONF_DIR.parent / "scripts" / "transcribe.py")
    transcribe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(transcribe)
    rows = [line.split("\t") for line in recogs[1:3]]
    manifest = {
        json.loads(line)["id"]: json.loads(line)["path"]
        for line in Path(datamodule.test_manifests["test-piper"]).read_text().splitlines()
    }
    audio = [manifest[row[0]] for row in rows]
    capsys.readouterr()
    assert transcribe.main(audio + ["--checkpoint", str(ckpt_dir), "--avg", "2", "--beam", "3"]) == 0
    printed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [p[1] if len(p) > 1 else "" for p in printed] == [row[2] if len(row) > 2 else "" for row in rows]
