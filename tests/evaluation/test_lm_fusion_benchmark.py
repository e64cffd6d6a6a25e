"""scripts/benchmark_lm_fusion.py on the tiny corpus: at weight 0 the fused searches give the plain WER (the LM is
advanced but adds nothing); the script's table has a row per search and weight."""

from __future__ import annotations

from pathlib import Path

import benchmark_lm_fusion

from benchmarks.lm_fusion import benchmark_fusion
from tests.decoding.random_arpa import write_counted_arpa


def test_fusion_benchmark_rows(corpus, checkpoint, tmp_path, capsys) -> None:
    _, datamodule = corpus
    tokenizer = datamodule.tokenizer
    entries = datamodule.eval_entries("dev")
    lm = write_counted_arpa(
        tmp_path / "dev.arpa", [[tokenizer.id_to_piece(k) for k in tokenizer.encode(e.text)] for e in entries], 2
    )
    manifest = Path(datamodule.work_dir, "dev.jsonl")
    rows = benchmark_fusion(checkpoint, manifest, lm, [0.0], batch_size=4, beam=2, rounds=1, limit=4)
    assert [r.method for r in rows] == ["greedy", "beam 2"]
    assert all(r.wer == r.wer_fused and r.seconds > 0 and r.seconds_fused > 0 for r in rows)
    options = [
        "--lm",
        str(lm),
        "--lm-weight",
        "1.5",
        "3",
        "--rounds",
        "1",
        "--limit",
        "4",
        "--beam",
        "2",
    ]
    assert benchmark_lm_fusion.main([str(checkpoint), "--manifest", str(manifest), *options]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| method | LM weight | WER % | WER % with the LM |") and len(table) == 6
    assert [line.split(" | ")[:2] for line in table[2:]] == [
        ["| greedy", "1.5"],
        ["| greedy", "3"],
        ["| beam 2", "1.5"],
        ["| beam 2", "3"],
    ]
