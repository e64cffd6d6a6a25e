"""scripts/transcribe.py --hotwords FILE --hotwords-score S: the streamed text (cache-aware) is the offline masked
forward with greedy search fused with the same boosting, the buffered stream is the offline greedy transcript with
it, boosting changes the text towards the phrase; bad options and files are refused. The buffered comparison
decodes the cache-aware checkpoint: the tiny full-context one emits only blanks, and greedy boosting (NeMo's rule)
never turns a blank into a token."""

from __future__ import annotations

import pytest
import soundfile as sf
import torch
from test_streaming_transcribe import files, run_script  # noqa: F401 (files: the module's fixture)

from asr_plugin.decoding import greedy_search
from asr_plugin.evaluation.fusion_spec import FusionSpec
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend

PHRASE = "THE QUICK"  # words of the tiny tokenizer's sentences


@pytest.fixture
def hotwords(files, tmp_path):  # noqa: F811
    path = tmp_path / "hotwords.txt"
    path.write_text(f"{PHRASE}\nBROWN FOX :3\n", encoding="utf-8")
    return path


def fused_offline_text(checkpoint, audio, context, spec: FusionSpec) -> str:
    """The whole utterance's features, the masked forward under `context`, greedy search fused with `spec`."""
    loaded = read_model(checkpoint)
    samples = torch.from_numpy(sf.read(audio, dtype="float32")[0])[None]
    features, frames = build_frontend(loaded.frontend_spec).eval()(samples, torch.tensor([samples.shape[1]]))
    encoded = loaded.model.encode(features, frames, list(context))
    cap = loaded.decoding["max_symbols_per_frame"]
    return greedy_search(loaded.model, *encoded, cap, loaded.tokenizer, fusion=spec.scorers(loaded.tokenizer))[0].text


def test_streaming_with_hotwords_is_the_fused_offline_search(files, hotwords, capsys) -> None:  # noqa: F811
    audio = [files["a"], files["b"]]
    boost = ["--hotwords", hotwords, "--hotwords-score", "4"]
    status, out, _ = run_script(capsys, *audio, "--checkpoint", files["streaming"], "--streaming", *boost)
    assert status == 0
    context = read_model(files["streaming"]).model.encoder.att_context_size
    spec = FusionSpec(hotwords, 4.0)
    want = [fused_offline_text(files["streaming"], path, context, spec) for path in audio]
    assert out == [f"{path}\t{text}" for path, text in zip(audio, want)]
    plain = [fused_offline_text(files["streaming"], path, context, FusionSpec()) for path in audio]
    assert sum(t.count("QUICK") for t in want) > sum(t.count("QUICK") for t in plain)


def test_offline_and_buffered_transcripts_with_hotwords_agree(files, hotwords, capsys) -> None:  # noqa: F811
    audio = [files["a"], files["b"]]
    boost = ["--hotwords", hotwords, "--hotwords-score", "4"]
    status, offline, _ = run_script(capsys, *audio, "--checkpoint", files["streaming"], "--method", "greedy", *boost)
    assert status == 0
    status, buffered, _ = run_script(capsys, *audio, "--checkpoint", files["streaming"], "--buffered", *boost)
    assert status == 0 and buffered == offline
    _, plain, _ = run_script(capsys, *audio, "--checkpoint", files["streaming"], "--method", "greedy")
    assert plain != offline
    status, beam, _ = run_script(capsys, *audio, "--checkpoint", files["full"], "--method", "beam", *boost)
    assert status == 0 and len(beam) == 2


def test_bad_hotwords_options_are_refused(files, hotwords, tmp_path, capsys) -> None:  # noqa: F811
    args = [files["a"], "--checkpoint", files["full"]]
    with pytest.raises(SystemExit):
        run_script(capsys, *args, "--hotwords-score", "2")
    assert "--hotwords-score needs --hotwords" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_script(capsys, *args, "--hotwords", hotwords, "--hotwords-score", "nan")
    assert "hotwords_score is nan: a boosting score must be a finite number > 0" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="hotwords file .*missing.txt: no such file"):
        run_script(capsys, *args, "--hotwords", tmp_path / "missing.txt")
    unspellable = tmp_path / "bad.txt"
    unspellable.write_text("THE\nR2D2 :2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:2: phrase 'R2D2': the tokenizer cannot spell"):
        run_script(capsys, *args, "--hotwords", unspellable)
