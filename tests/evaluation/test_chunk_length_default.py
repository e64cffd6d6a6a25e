"""transcribe.py cuts a long file into chunks as long as the checkpoint's longest training utterance, at most
30 s, and prints which and why; a checkpoint that records no training durations keeps 30 s and says so
(`asr_plugin.evaluation.chunk_length`)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import soundfile as sf
import torch
from test_evaluation_recipe import save_module_checkpoint

from asr_plugin.evaluation.chunk_length import MAX_CHUNK_SECONDS, default_chunk_seconds
from asr_plugin.training.run_start import LONGEST_UTTERANCE_RECORD


def _checkpoint(tmp_path, datamodule, longest) -> str:
    """A checkpoint of the tiny model recording `longest` as its longest training utterance (None: no record)."""
    path = tmp_path / f"longest-{longest}.ckpt"
    save_module_checkpoint(path, datamodule, seed=0, epoch=0, step=1)
    if longest is not None:
        checkpoint = torch.load(path, weights_only=True)
        checkpoint["asr_plugin"][LONGEST_UTTERANCE_RECORD] = longest
        torch.save(checkpoint, path)
    return str(path)


@pytest.mark.parametrize(
    ("longest", "seconds", "why"),
    [
        (2.5, 2.5, "the longest training utterance"),
        (45.0, MAX_CHUNK_SECONDS, "the longest training utterance is 45.0 s, capped at 30 s"),
        (None, MAX_CHUNK_SECONDS, "records no training durations (an older checkpoint or another format)"),
    ],
)
def test_the_default_is_the_longest_training_utterance_at_most_30_s(corpus, tmp_path, longest, seconds, why):
    path = _checkpoint(tmp_path, corpus[1], longest)
    chosen, reason = default_chunk_seconds(path)
    assert chosen == seconds and reason.endswith(why)


@pytest.mark.parametrize("bad", [-1.0, "long", True])
def test_a_record_that_is_not_seconds_is_refused_naming_the_file(corpus, tmp_path, bad):
    path = _checkpoint(tmp_path, corpus[1], bad)
    with pytest.raises(ValueError, match=rf"{path}: {LONGEST_UTTERANCE_RECORD}=.* not a positive number of seconds"):
        default_chunk_seconds(path)


def test_transcribe_prints_the_chunk_length_and_cuts_with_it(corpus, tmp_path, capsys):
    transcribe = importlib.import_module("transcribe")
    audio = tmp_path / "four-seconds.wav"
    sf.write(audio, 0.1 * np.random.default_rng(0).standard_normal(4 * 16_000), 16_000)
    short, unrecorded = _checkpoint(tmp_path, corpus[1], 2.5), _checkpoint(tmp_path, corpus[1], None)

    assert transcribe.main([str(audio), "--checkpoint", short, "--method", "greedy"]) == 0
    err = capsys.readouterr().err
    assert "chunks of at most 2.5 s (the longest training utterance; --chunk-seconds sets it)" in err
    assert "four-seconds.wav (4 s)" in err  # longer than a chunk: decoded in chunks, with its progress

    assert transcribe.main([str(audio), "--checkpoint", unrecorded, "--method", "greedy"]) == 0
    err = capsys.readouterr().err
    assert f"chunks of at most 30 s ({unrecorded} records no training durations" in err
    assert "four-seconds.wav (4 s)" not in err  # one chunk

    assert transcribe.main([str(audio), "--checkpoint", short, "--method", "greedy", "--chunk-seconds", "3"]) == 0
    err = capsys.readouterr().err
    assert "chunks of at most" not in err and "four-seconds.wav (4 s)" in err  # the option, as given
