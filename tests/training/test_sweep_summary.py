"""After a Hydra multirun, one row per job (its own overrides, status, best validation metric, test WERs, run
directory), printed and written as summary.tsv (``asr_plugin.training.sweep_summary``), read from the files the
jobs leave: their ``.hydra/overrides.yaml`` and the ``result.json`` that ``train(cfg)`` writes."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from hydra.utils import instantiate
from omegaconf import OmegaConf
from train_configs import compose_train

from asr_plugin.training import train
from asr_plugin.training.run_result import read_run_result, write_run_result
from asr_plugin.training.sweep_summary import SUMMARY_FILE, SweepSummary


def _job(sweep_dir, number: int, overrides: list[str], result: dict | None = None) -> None:
    job_dir = sweep_dir / str(number)
    (job_dir / ".hydra").mkdir(parents=True)
    (job_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))  # as Hydra writes it
    if result is not None:
        write_run_result({"output_dir": str(job_dir), **result})


def _result(best: float, tests: dict[str, float], stop: dict | None = None) -> dict:
    metrics = {"val/wer": best + 0.01, **{f"test/{name}/wer": wer for name, wer in tests.items()}}
    return {"monitor": "val/wer", "best_model_score": best, "metrics": {**metrics, "train/loss": 3.0}, "stop": stop}


def test_the_summary_lists_every_job_with_its_own_overrides_metrics_and_directory(tmp_path, capsys):
    sweep = tmp_path / "multiruns" / "2026-12-04_20-00-00"
    _job(sweep, 0, ["experiment=mini_tiny", "seed=1"], _result(0.25, {"dev": 0.3, "test-piper": 0.45}))
    _job(sweep, 10, ["experiment=mini_tiny", "seed=3"], _result(0.5, {"dev": 0.6}, {"signal": 15, "step": 7}))
    _job(sweep, 2, ["experiment=mini_tiny", "seed=2"])  # failed: no result.json
    SweepSummary().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))

    with open(sweep / SUMMARY_FILE, newline="") as table:
        rows = list(csv.reader(table, delimiter="\t"))
    assert rows == [
        ["job", "overrides", "status", "best val/wer", "test/dev/wer", "test/test-piper/wer", "run directory"],
        ["0", "seed=1", "done", "0.2500", "0.3000", "0.4500", str(sweep / "0")],
        ["2", "seed=2", "no result.json (failed or not ended)", "", "", "", str(sweep / "2")],
        ["10", "seed=3", "stopped by signal 15 at step 7", "0.5000", "0.6000", "", str(sweep / "10")],
    ]
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"sweep summary ({sweep / SUMMARY_FILE}):"
    assert printed[1] == "every job: experiment=mini_tiny"
    assert printed[2].split() == ["job", "overrides", "status", "best", "val/wer", *rows[0][4:6], "run", "directory"]
    assert [line.split()[:2] for line in printed[3:]] == [["0", "seed=1"], ["2", "seed=2"], ["10", "seed=3"]]


def test_a_single_job_shows_all_its_overrides_and_no_jobs_write_nothing(tmp_path, capsys):
    _job(tmp_path / "one", 0, ["seed=1"], _result(0.2, {"mine": 0.25}))
    SweepSummary().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "one")}}}))
    rows = (tmp_path / "one" / SUMMARY_FILE).read_text().splitlines()
    assert rows[1].split("\t")[:5] == ["0", "seed=1", "done", "0.2000", "0.2500"]
    (tmp_path / "empty").mkdir()
    capsys.readouterr()
    SweepSummary().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "empty")}}}))
    assert capsys.readouterr().out == "" and not (tmp_path / "empty" / SUMMARY_FILE).exists()


def test_a_result_that_is_not_a_json_object_is_named(tmp_path):
    (tmp_path / "result.json").write_text("[1, 2]")
    try:
        read_run_result(tmp_path)
    except ValueError as err:
        assert str(tmp_path / "result.json") in str(err) and "JSON object" in str(err)
    else:
        raise AssertionError("a list was read as a run result")


def test_the_training_recipe_has_the_callback(tmp_path):
    cfg = compose_train(tmp_path=tmp_path, with_hydra=True)
    assert isinstance(instantiate(cfg.hydra.callbacks.sweep_summary), SweepSummary)
    assert OmegaConf.to_container(cfg.hydra.sweep)["subdir"] == "${hydra.job.num}"  # and conf/hydra/default.yaml's


def test_train_writes_what_it_returns_as_result_json(tiny_run):
    cfg = tiny_run(["trainer.limit_train_batches=1", "trainer.max_epochs=1"])  # one step, then a validation
    result = train(cfg)
    assert read_run_result(cfg.paths.output_dir) == json.loads(json.dumps(result))
    assert result["monitor"] == "val/wer"
    assert result["best_model_score"] == pytest.approx(result["metrics"]["val/wer"])  # its one validation
