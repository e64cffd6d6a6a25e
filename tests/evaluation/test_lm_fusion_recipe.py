"""eval.py decoding.lm.path=FILE decoding.lm.weight=W and transcribe.py --lm FILE --lm-weight W on the tiny mini
corpus: an LM of the dev references moves both methods' recogs of an untrained model towards them (more of the
references' words recognised), the summary records the LM, and a missing file or a NaN weight is refused naming its option before anything is decoded."""

from __future__ import annotations

import json

import pytest
from eval_setup import eval_cfg

from asr_plugin.evaluation import evaluate
from tests.decoding.random_arpa import write_counted_arpa


def word_hits(hypotheses: list[str], references: list[str]) -> int:
    """How many of each reference's words its hypothesis has, summed."""
    return sum(len(set(h.split()) & set(r.split())) for h, r in zip(hypotheses, references))


def recogs(path) -> tuple[list[str], list[str]]:
    """(references, hypotheses) of a recogs file."""
    rows = [(line.split("\t") + ["", ""])[1:3] for line in path.read_text().splitlines()[1:]]
    return [ref for ref, _ in rows], [hyp for _, hyp in rows]


METHODS = ["decoding.methods=[greedy,beam]", "decoding.beam=2", "decoding.max_symbols_per_frame=2", "manifests=[dev]"]


@pytest.fixture(scope="module")
def reference_lm(corpus, tmp_path_factory):
    """The 3-gram of the dev references' pieces."""
    _, datamodule = corpus
    tokenizer = datamodule.tokenizer
    sentences = [[tokenizer.id_to_piece(k) for k in tokenizer.encode(e.text)] for e in datamodule.eval_entries("dev")]
    return write_counted_arpa(tmp_path_factory.mktemp("lm") / "dev.arpa", sentences, order=3)


def test_eval_with_an_lm_of_the_references_moves_towards_them(corpus, checkpoint, reference_lm, tmp_path) -> None:
    root, _ = corpus
    evaluate(eval_cfg(root, checkpoint, *METHODS, f"output_dir={tmp_path}/plain"))
    evaluate(
        eval_cfg(
            root, checkpoint, *METHODS, f"output_dir={tmp_path}/lm", f"decoding.lm.path={reference_lm}",
            "decoding.lm.weight=1.5",
        )
    )  # fmt: skip
    for method in ("greedy", "beam"):
        hits = [word_hits(*recogs(tmp_path / run / f"recogs-dev-{method}.txt")[::-1]) for run in ("lm", "plain")]
        assert hits[0] > hits[1], (method, hits)
    summary = json.loads((tmp_path / "lm" / "wer-summary.json").read_text())
    assert (summary["lm"], summary["lm_weight"]) == (str(reference_lm), 1.5)
    assert "lm" not in json.loads((tmp_path / "plain" / "wer-summary.json").read_text())


def test_a_missing_lm_or_a_nan_weight_is_refused_naming_its_option(corpus, checkpoint, reference_lm, tmp_path):
    root, _ = corpus
    with pytest.raises(FileNotFoundError, match=r"decoding\.lm\.path=.*missing\.arpa: no such ARPA file"):
        evaluate(eval_cfg(root, checkpoint, f"decoding.lm.path={tmp_path}/missing.arpa", f"output_dir={tmp_path}/x"))
    with pytest.raises(ValueError, match=r"decoding\.lm\.weight=nan: a finite number"):
        evaluate(eval_cfg(root, checkpoint, f"decoding.lm.path={reference_lm}", "decoding.lm.weight=nan"))
    assert not (tmp_path / "x").exists()


def test_transcribe_with_the_lm_moves_towards_the_references(corpus, checkpoint, reference_lm, capsys) -> None:
    import transcribe

    _, datamodule = corpus
    entries = datamodule.eval_entries("dev")
    audio = [entry.path for entry in entries]

    def texts(*options: str) -> list[str]:
        assert transcribe.main([*audio, "--checkpoint", str(checkpoint), "--method", "greedy", *options]) == 0
        return [line.split("\t")[1] for line in capsys.readouterr().out.splitlines()]

    references = [entry.text for entry in entries]
    plain, fused = texts(), texts("--lm", str(reference_lm), "--lm-weight", "1.5")
    assert word_hits(fused, references) > word_hits(plain, references)
    with pytest.raises(SystemExit) as exit_info:
        transcribe.main([*audio, "--checkpoint", str(checkpoint), "--lm-weight", "1"])
    assert exit_info.value.code == 2 and "--lm-weight needs --lm" in capsys.readouterr().err


def test_buffered_streaming_evaluation_takes_the_lm(corpus, checkpoint, reference_lm, tmp_path) -> None:
    root, _ = corpus
    common = ["streaming=buffered", "manifests=[dev]"]
    evaluate(eval_cfg(root, checkpoint, *common, f"output_dir={tmp_path}/plain"))
    evaluate(eval_cfg(root, checkpoint, *common, f"output_dir={tmp_path}/lm", f"decoding.lm.path={reference_lm}"))
    hits = [word_hits(*recogs(next((tmp_path / run).glob("recogs-dev-*.txt")))[::-1]) for run in ("lm", "plain")]
    assert hits[0] > hits[1], hits
