"""eval.py streaming=true|buffered on the tiny mini corpus: every utterance's audio streamed through the model's
session gives, at each lookahead, the hypotheses of the offline masked forward under that context (and
att_context_size=all adds the offline full-context decoding); buffered streaming with windows that cover the
utterances gives offline evaluation's hypotheses; the summary names each row's mode, context and latency; a .nemo
file goes through it too; the refusals name the key."""

from __future__ import annotations

import csv
import json

import pytest
import torch
from eval_setup import eval_cfg
from nemo_models import write_synthetic_nemo

from asr_plugin.decoding import greedy_search
from asr_plugin.evaluation import evaluate
from asr_plugin.evaluation.decode_sets import RUN_COLUMNS, SUMMARY_COLUMNS, format_table
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend
from benchmarks.tiny_streaming import BINS, FULL_CONTEXT, ONLINE, STREAMING, save_model_checkpoint

SHERPA = {"kind": "sherpa", "options": {"num_mel_bins": BINS}}
SETS = ("dev", "test-espeak", "test-piper")


@pytest.fixture(scope="module")
def checkpoints(corpus, tmp_path_factory):
    """A cache-aware streaming checkpoint (lookaheads 3, 1, 0 and full context) and a full-context one on the sherpa
    front end, both with the corpus's tokenizer."""
    _, datamodule = corpus
    root = tmp_path_factory.mktemp("checkpoints")
    save_model_checkpoint(root / "streaming.ckpt", datamodule.tokenizer, STREAMING, frontend=ONLINE)
    save_model_checkpoint(root / "full.ckpt", datamodule.tokenizer, FULL_CONTEXT, frontend=SHERPA)
    return {"streaming": root / "streaming.ckpt", "full": root / "full.ckpt"}


def hypotheses(path) -> dict[str, str]:
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:]]
    return {row[0]: row[2] if len(row) > 2 else "" for row in rows}


def masked_forward_hypotheses(checkpoint, datamodule, split: str, context) -> dict[str, str]:
    """The reference: each utterance's whole-utterance features, the masked forward under `context`, greedy."""
    loaded = read_model(checkpoint)
    frontend = build_frontend(loaded.frontend_spec).eval()
    texts = {}
    for entry in datamodule.eval_entries(split):
        audio = entry.load_audio(16000)[None]
        features, frames = frontend(audio, torch.tensor([audio.shape[1]]))
        encoded = loaded.model.encode(features, frames, list(context))
        cap = loaded.decoding["max_symbols_per_frame"]  # what eval.py decodes it with
        texts[entry.id] = greedy_search(loaded.model, *encoded, cap, loaded.tokenizer)[0].text
    return texts


def test_every_lookahead_streamed_equals_the_masked_forward_and_full_context_is_decoded_offline(
    corpus, checkpoints, tmp_path
):
    root, datamodule = corpus
    cfg = eval_cfg(root, checkpoints["streaming"], "streaming=true", "att_context_size=all", f"output_dir={tmp_path}")
    rows = evaluate(cfg)["rows"]
    tags = {(8, 3): "streaming-8-3", (8, 1): "streaming-8-1", (8, 0): "streaming-8-0", (-1, -1): "offline-full"}
    assert [(r["set"], r["mode"], r["att_context_size"]) for r in rows] == [
        (split, "offline" if context == (-1, -1) else "cache_aware", list(context))
        for split in SETS
        for context in tags
    ]
    said = 0
    for split in SETS:
        for context, tag in tags.items():
            got = hypotheses(tmp_path / f"recogs-{split}-greedy-{tag}.txt")
            assert got == masked_forward_hypotheses(checkpoints["streaming"], datamodule, split, context), (split, tag)
            said += sum(bool(text) for text in got.values())
    assert said > 40  # the random model says something for most utterances
    # latency: chunked_limited [8, R] steps 8 (R + 1) feature frames of 10 ms; sherpa's window reaches 7.5 ms on
    latencies = {tuple(r["att_context_size"]): r["latency_ms"] for r in rows if r["mode"] == "cache_aware"}
    assert latencies == {(8, 3): 327.5, (8, 1): 167.5, (8, 0): 87.5}
    with open(tmp_path / "wer-summary.tsv") as table:
        header = next(csv.reader(table, delimiter="\t"))
    assert tuple(header) == SUMMARY_COLUMNS + RUN_COLUMNS
    printed = format_table(rows).splitlines()  # eval.py's table
    assert printed[0].split()[-4:] == ["mode", "context", "latency", "ms"]
    assert printed[2].split()[-3:] == ["cache_aware", "8,3", "327.5"] and printed[5].split()[-2:] == [
        "offline",
        "-1,-1",
    ]
    summary = json.loads((tmp_path / "wer-summary.json").read_text())
    assert [run["tag"] for run in summary["streaming"]] == list(tags.values())
    assert summary["streaming"][0]["endpointing"] is False and summary["streaming"][0]["chunk_ms"] == 320.0


def test_the_default_lookahead_and_offline_evaluation_unchanged(corpus, checkpoints, tmp_path):
    root, datamodule = corpus
    streamed = evaluate(eval_cfg(root, checkpoints["streaming"], "streaming=true", f"output_dir={tmp_path}/s"))
    assert {(r["mode"], tuple(r["att_context_size"])) for r in streamed["rows"]} == {("cache_aware", (8, 3))}
    got = hypotheses(tmp_path / "s" / "recogs-dev-greedy-streaming-8-3.txt")
    assert got == masked_forward_hypotheses(checkpoints["streaming"], datamodule, "dev", (8, 3))
    offline = evaluate(eval_cfg(root, checkpoints["streaming"], f"output_dir={tmp_path}/o"))
    assert not any("mode" in row for row in offline["rows"])
    assert hypotheses(tmp_path / "o" / "recogs-dev-greedy.txt") == got  # the default context, offline
    assert (tmp_path / "o" / "wer-summary.tsv").read_text().splitlines()[0] == "\t".join(SUMMARY_COLUMNS)


@pytest.mark.parametrize("source", ["full", "nemo"])
def test_buffered_streaming_with_covering_windows_gives_offline_evaluations_hypotheses(
    corpus, checkpoints, tmp_path, source
):
    """Windows longer than any utterance: each is encoded whole (the sherpa front end's and NeMo's per-utterance
    normalisations run on the window, the whole utterance), so the hypotheses are offline evaluation's."""
    root, _ = corpus
    model = checkpoints["full"] if source == "full" else write_synthetic_nemo(tmp_path, "fast_conformer_tdt")[0]
    windows = ["stream.buffered.chunk_ms=1600", "stream.buffered.right_ms=20000", "stream.batch_size=3"]
    out = [f"output_dir={tmp_path}/buffered", "streaming=buffered", *windows]
    rows = evaluate(eval_cfg(root, model, *out))["rows"]
    frontend_ms = 7.5 if source == "full" else 6.0  # sherpa's window reaches 120 samples past its hop, NeMo's 96
    assert {(r["mode"], r["att_context_size"], r["latency_ms"]) for r in rows} == {
        ("buffered", "", 21600 + frontend_ms)
    }
    evaluate(eval_cfg(root, model, f"output_dir={tmp_path}/offline"))
    for split in SETS:
        offline = hypotheses(tmp_path / "offline" / f"recogs-{split}-greedy.txt")
        assert hypotheses(tmp_path / "buffered" / f"recogs-{split}-greedy-buffered.txt") == offline
        assert len(offline) == 8


@pytest.mark.parametrize(
    "checkpoint, overrides, message",
    [
        ("full", ["streaming=true"], r"full\.ckpt is a full-context model .* eval\.py streaming=buffered"),
        ("streaming", ["streaming=true", "att_context_size=[5,5]"], r"\[5, 5\] is not one of this model's contexts"),
        ("streaming", ["att_context_size=[8,3]"], "set streaming=true with it"),
        ("streaming", ["streaming=buffered", "att_context_size=[8,3]"], "buffered streaming encodes windows"),
        ("streaming", ["streaming=sometimes"], "choose true .cache-aware. or buffered"),
        ("streaming", ["streaming=true", "att_context_size=late"], "give .left, right."),
    ],
)
def test_refusals_name_the_key(corpus, checkpoints, tmp_path, checkpoint, overrides, message):
    root, _ = corpus
    with pytest.raises(ValueError, match=message):
        evaluate(eval_cfg(root, checkpoints[checkpoint], f"output_dir={tmp_path}", *overrides))
