"""eval.py decoding.hotwords=FILE decoding.hotwords_score=S on the tiny mini corpus: both methods boost the phrase
(it appears more often in the recogs), the summary records the list and score, streaming evaluation takes it too,
and a bad file is refused before anything is decoded."""

from __future__ import annotations

import json

import pytest
from eval_setup import eval_cfg

from asr_plugin.evaluation import evaluate


def recog_texts(path) -> list[str]:
    return [line.split("\t")[2] if line.count("\t") >= 2 else "" for line in path.read_text().splitlines()[1:]]


def test_eval_boosts_the_hotwords_in_both_methods(corpus, checkpoint, tmp_path) -> None:
    root, datamodule = corpus
    word = datamodule.eval_entries("dev")[0].text.split()[0]
    hotwords = tmp_path / "hotwords.txt"
    hotwords.write_text(f"{word} :4\n", encoding="utf-8")
    methods = [
        "decoding.methods=[greedy,beam]",
        "decoding.beam=2",
        "decoding.max_symbols_per_frame=2",
        "manifests=[dev]",
    ]
    plain = evaluate(eval_cfg(root, checkpoint, *methods, f"output_dir={tmp_path}/plain"))
    boosted = evaluate(
        eval_cfg(
            root, checkpoint, *methods, f"output_dir={tmp_path}/boost", f"decoding.hotwords={hotwords}",
            "decoding.hotwords_score=2",
        )
    )  # fmt: skip
    for method in ("greedy", "beam"):
        with_boost = recog_texts(tmp_path / "boost" / f"recogs-dev-{method}.txt")
        without = recog_texts(tmp_path / "plain" / f"recogs-dev-{method}.txt")
        assert sum(t.split().count(word) for t in with_boost) > sum(t.split().count(word) for t in without)
    summary = json.loads((tmp_path / "boost" / "wer-summary.json").read_text())
    assert (summary["hotwords"], summary["hotwords_score"]) == (str(hotwords), 2.0)
    assert "hotwords" not in json.loads((tmp_path / "plain" / "wer-summary.json").read_text())
    assert len(boosted["rows"]) == len(plain["rows"]) == 2


def test_buffered_streaming_evaluation_takes_the_hotwords(corpus, checkpoint, tmp_path) -> None:
    root, datamodule = corpus
    word = datamodule.eval_entries("dev")[0].text.split()[0]
    hotwords = tmp_path / "hotwords.txt"
    hotwords.write_text(f"{word} :4\n", encoding="utf-8")
    common = ["streaming=buffered", "manifests=[dev]"]
    evaluate(eval_cfg(root, checkpoint, *common, f"output_dir={tmp_path}/plain"))
    evaluate(eval_cfg(root, checkpoint, *common, f"output_dir={tmp_path}/boost", f"decoding.hotwords={hotwords}"))
    [boosted] = (tmp_path / "boost").glob("recogs-dev-*.txt")
    [plain] = (tmp_path / "plain").glob("recogs-dev-*.txt")
    count = [sum(t.split().count(word) for t in recog_texts(p)) for p in (boosted, plain)]
    assert count[0] > count[1]


def test_a_bad_hotwords_file_is_refused_naming_its_line(corpus, checkpoint, tmp_path) -> None:
    root, _ = corpus
    hotwords = tmp_path / "hotwords.txt"
    hotwords.write_text("HELLO\nWORLD :zero\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"hotwords.txt:2: the score ':zero' of 'WORLD :zero' is not a number"):
        evaluate(eval_cfg(root, checkpoint, f"decoding.hotwords={hotwords}", f"output_dir={tmp_path}/x"))
    assert not (tmp_path / "x" / "wer-summary.json").exists()
    with pytest.raises(ValueError, match="hotwords_score is -1.0"):
        evaluate(eval_cfg(root, checkpoint, f"decoding.hotwords={hotwords}", "decoding.hotwords_score=-1"))
