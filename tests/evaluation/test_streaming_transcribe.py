"""scripts/transcribe.py as a stream: --streaming on a tiny cache-aware model gives, at every lookahead, the text of
the offline masked forward under that context plus greedy search (exact by construction), with endpointing on and
off; --partials lines are prefixes of the final text; endpoints' segments are joined; --buffered decodes any model
(full-context checkpoints, NeMo-layout .nemo files, TDT included) as the offline model does when its windows cover
the utterance; the refusals name the problem (a full-context model offers --buffered, a lookahead the model was not
trained with names those it was, a front end that cannot stream)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import soundfile as sf
import torch
from nemo_models import write_synthetic_nemo

from asr_plugin.decoding import encoder_frame_shift, greedy_search, subsampling_factor
from asr_plugin.decoding.timestamps import hypothesis_timing
from asr_plugin.evaluation.streaming_session import BufferedWindows, StreamingMode
from asr_plugin.evaluation.streaming_transcriber import StreamingTranscriber
from asr_plugin.evaluation.transcriber import Transcriber
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend
from benchmarks.tiny_streaming import (
    BINS,
    CONTEXTS,
    FULL_CONTEXT,
    STREAMING,
    save_model_checkpoint,
    small_tokenizer,
    speechlike_audio,
    write_audio,
)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "transcribe.py"
SHERPA = {"kind": "sherpa", "options": {"num_mel_bins": BINS}}  # per-utterance normalisation
LOOKAHEADS = [tuple(context) for context in CONTEXTS if context[1] >= 0]


def load_script():
    spec = importlib.util.spec_from_file_location("transcribe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{name: path}: a cache-aware streaming checkpoint (three lookaheads and full context, sherpa_online front end),
    a full-context checkpoint and a streaming one on the sherpa front end (per-utterance normalisation), and two
    audio files (3.2 s and 2.5 s)."""
    root = tmp_path_factory.mktemp("streaming")
    tokenizer = small_tokenizer(root)
    save_model_checkpoint(root / "streaming.ckpt", tokenizer, STREAMING)
    save_model_checkpoint(root / "full.ckpt", tokenizer, FULL_CONTEXT, frontend=SHERPA)
    save_model_checkpoint(root / "sherpa_streaming.ckpt", tokenizer, STREAMING, frontend=SHERPA)
    return {
        "root": root,
        "tokenizer": tokenizer,
        "streaming": root / "streaming.ckpt",
        "full": root / "full.ckpt",
        "sherpa_streaming": root / "sherpa_streaming.ckpt",
        "a": write_audio(root / "a.wav", speechlike_audio(3.2, 0)),
        "b": write_audio(root / "b.wav", speechlike_audio(2.5, 1)),
    }


def offline_text(checkpoint: Path, audio: Path, context) -> str:
    """The reference: the whole utterance's features, the encoder's masked forward under `context`, greedy search
    with the checkpoint's cap (what transcribe.py decodes it with)."""
    loaded = read_model(checkpoint)
    samples = torch.from_numpy(sf.read(audio, dtype="float32")[0])[None]
    features, frames = build_frontend(loaded.frontend_spec).eval()(samples, torch.tensor([samples.shape[1]]))
    encoded = loaded.model.encode(features, frames, list(context))
    return greedy_search(loaded.model, *encoded, loaded.decoding["max_symbols_per_frame"], loaded.tokenizer)[0].text


def run_script(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    capsys.readouterr()
    status = load_script().main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


@pytest.mark.parametrize("endpointing", [True, False])
@pytest.mark.parametrize("context", LOOKAHEADS)
def test_streaming_gives_the_masked_forward_text_at_every_lookahead(files, capsys, context, endpointing) -> None:
    flags = ["--endpointing"] if endpointing else []
    lookahead = ["--att-context-size", f"{context[0]},{context[1]}"]
    audio = [files["a"], files["b"]]
    status, out, err = run_script(
        capsys, *audio, "--checkpoint", files["streaming"], "--streaming", *lookahead, "--partials", *flags
    )
    assert status == 0
    want = [offline_text(files["streaming"], path, context) for path in audio]
    assert out == [f"{path}\t{text}" for path, text in zip(audio, want)]
    assert all(len(text.split()) >= 3 for text in want), want  # the random model says something
    for path, text in zip(audio, want):
        partials = [line.split("\t")[2] for line in err if line.startswith(f"partial\t{path}\t")]
        assert len(partials) >= 2 and len(set(partials)) == len(partials)  # a line per change
        assert all(text.startswith(partial) for partial in partials), (partials, text)


def test_the_default_lookahead_is_the_models_default_context(files, capsys) -> None:
    status, out, err = run_script(capsys, files["a"], "--checkpoint", files["streaming"], "--streaming")
    assert status == 0 and err == [f"model: {files['streaming']}"]  # the file it used, nothing else
    assert out == [f"{files['a']}\t{offline_text(files['streaming'], files['a'], CONTEXTS[0])}"]


def test_endpoints_close_segments_whose_texts_are_joined(files) -> None:
    """A model that emits blanks through 2 s of silence between two bursts: rule 2 (1.2 s of silence after a
    token) closes a segment there; the final text is the segments' texts joined, and without endpointing the
    text is the offline one."""
    root = files["root"]
    checkpoint = root / "blanks.ckpt"
    save_model_checkpoint(checkpoint, files["tokenizer"], STREAMING, blank_bias=3.0)
    audio = write_audio(root / "pause.wav", speechlike_audio(5.0, 2, pause=(1.5, 3.5)))
    transcriber = StreamingTranscriber([checkpoint], StreamingMode("cache_aware", (8, 1), endpointing=True))
    session = transcriber.session.recognizer
    samples = torch.from_numpy(sf.read(audio, dtype="float32")[0])[None]
    state = session.initial_state(1)
    for start in range(0, samples.shape[1], 1600):
        piece = samples[:, start : start + 1600]
        state = session.accept(piece, torch.tensor([piece.shape[1]]), state)
    segments = session.segments(session.finish(state))[0]
    assert len(segments) >= 2 and 2 in {segment.rule for segment in segments}
    assert transcriber.transcribe_file(audio) == " ".join(segment.hypothesis.text for segment in segments)
    whole = StreamingTranscriber([checkpoint], StreamingMode("cache_aware", (8, 1), endpointing=False))
    assert whole.transcribe_file(audio) == offline_text(checkpoint, audio, (8, 1))


def test_buffered_streaming_decodes_a_full_context_model_as_offline_when_windows_cover_the_audio(files, capsys):
    """NeMo's default windows (10 s left, 2 s chunks, 2 s right) cover these 2.5-3.2 s files whole; the sherpa
    front end's per-utterance normalisation runs per window, here the whole utterance."""
    audio = [files["a"], files["b"]]
    status, out, _ = run_script(capsys, *audio, "--checkpoint", files["full"], "--buffered", "--no-endpointing")
    offline = Transcriber([files["full"]], method="greedy").transcribe(audio)
    assert status == 0 and out == [f"{path}\t{text}" for path, text in zip(audio, offline)]
    # short windows: the same number of lines, another (approximate) text
    status, out, _ = run_script(
        capsys, files["a"], "--checkpoint", files["full"], "--buffered", "--buffer-chunk-ms", "320",
        "--buffer-left-ms", "640", "--buffer-right-ms", "160",
    )  # fmt: skip
    assert status == 0 and len(out) == 1 and out[0].startswith(f"{files['a']}\t")


@pytest.mark.parametrize("name", ["fast_conformer_transducer", "fast_conformer_tdt"])
def test_a_nemo_file_streams_buffered_and_is_refused_cache_aware(files, capsys, tmp_path, name) -> None:
    nemo, _ = write_synthetic_nemo(tmp_path, name)
    status, out, _ = run_script(capsys, files["b"], "--checkpoint", nemo, "--buffered", "--no-endpointing")
    assert status == 0 and out == [f"{files['b']}\t{Transcriber([nemo], method='greedy').transcribe_file(files['b'])}"]
    with pytest.raises(SystemExit):
        run_script(capsys, files["b"], "--checkpoint", nemo, "--streaming")
    assert "is a full-context model" in capsys.readouterr().err


@pytest.mark.parametrize(
    "checkpoint, options, message",
    [
        ("full", ["--streaming"], r"full\.ckpt is a full-context model .* --buffered"),
        ("streaming", ["--streaming", "--att-context-size", "5,5"], r"\[5, 5\] is not one of this model's contexts "
         r"\[\[8, 3\], \[8, 1\], \[8, 0\], \[-1, -1\]\]"),
        ("streaming", ["--streaming", "--att-context-size=-1,-1"], r"\[-1, -1\] has an unlimited right context"),
        ("sherpa_streaming", ["--streaming"], r"kind 'sherpa', normalize='per_feature'.* --buffered"),
        ("streaming", ["--att-context-size", "8,3"], "need --streaming or --buffered"),
        ("streaming", ["--streaming", "--method", "beam"], "streaming decodes with greedy search"),
        ("streaming", ["--buffered", "--att-context-size", "8,3"], "buffered streaming encodes windows"),
        ("full", ["--buffered", "--buffer-chunk-ms", "100"], r"chunk_ms=100: must be a multiple of 80 ms"),
        ("streaming", ["--streaming", "--att-context-size", "8"], "give the context as L,R"),
        ("streaming", ["--streaming", "--chunk-ms", "nan"], r"\(--chunk-ms\) nan: audio is fed in pieces of a finite"),
        ("streaming", ["--streaming", "--chunk-ms", "inf"], r"\(--chunk-ms\) inf: audio is fed in pieces of a finite"),
        ("full", ["--buffered", "--buffer-chunk-ms", "nan"], r"chunk_ms=nan: must be a multiple of 80 ms"),
    ],
)  # fmt: skip
def test_refusals_name_the_problem(files, capsys, checkpoint, options, message) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_script(capsys, files["a"], "--checkpoint", files[checkpoint], *options)
    assert exit_info.value.code == 2
    assert len(re.findall(message, capsys.readouterr().err)) == 1


@pytest.mark.slow
def test_a_long_file_streams_from_disk_in_flat_memory(files, tmp_path) -> None:
    """Ten minutes of 48 kHz stereo audio (decoded whole: 220 MiB of float32, 37 MiB resampled to 16 kHz mono): the
    resident set size sampled as the text grows stays within a few MiB of its value after the first minute, and
    far below a whole decode above its value before the file was opened."""
    from test_long_audio import write_speech_like

    from benchmarks.streaming import resident_bytes

    path = write_speech_like(tmp_path / "ten-minutes.wav", 600.0)
    transcriber = StreamingTranscriber([files["streaming"]], StreamingMode("cache_aware", (8, 3), endpointing=True))
    samples: list[int] = []
    before = resident_bytes()
    text = transcriber.transcribe_file(path, lambda _: samples.append(resident_bytes()))
    assert len(text.split()) > 100 and len(samples) > 100
    mib = 2**20
    after_a_minute = samples[len(samples) // 10 :]
    assert max(after_a_minute) - after_a_minute[0] < 16 * mib, [s // mib for s in after_a_minute[::50]]
    assert max(samples) - before < 64 * mib, (before // mib, max(samples) // mib)


def test_streamed_timestamps_equal_offline_ones_within_one_encoder_frame(files) -> None:
    """Cache-aware streaming without endpoints: every word's start and end equals the offline greedy search's
    (masked forward under the same context) within one encoder frame."""
    context = (8, 3)
    mode = StreamingMode("cache_aware", context, BufferedWindows(), endpointing=False)
    transcriber = StreamingTranscriber([files["streaming"]], mode)
    loaded = read_model(files["streaming"])
    frontend = build_frontend(loaded.frontend_spec).eval()
    shift = encoder_frame_shift(subsampling_factor(loaded.model), frontend.hop_length, frontend.sample_rate)
    assert transcriber.frame_shift == shift
    for audio in (files["a"], files["b"]):
        text, timing = transcriber.transcribe_timed(audio)
        samples = torch.from_numpy(sf.read(audio, dtype="float32")[0])[None]
        encoded = loaded.model.encode(*frontend(samples, torch.tensor([samples.shape[1]])), list(context))
        offline = greedy_search(loaded.model, *encoded, loaded.decoding["max_symbols_per_frame"], loaded.tokenizer)[0]
        want = hypothesis_timing(offline, loaded.tokenizer, shift)
        assert text == offline.text and len(timing.words) >= 3
        assert [w.text for w in timing.words] == [w.text for w in want.words]
        for got, ref in zip(timing.words, want.words):
            assert abs(got.start - ref.start) <= shift and abs(got.end - ref.end) <= shift


SRT_CUE = r"(\d+)\n(\d\d:[0-5]\d:[0-5]\d,\d{3}) --> (\d\d:[0-5]\d:[0-5]\d,\d{3})\n([^\n]+)\n\n"


def test_timestamps_option_writes_subtitles_and_json_lines(files, capsys, tmp_path) -> None:
    audio = [files["a"], files["b"]]
    out_dir = tmp_path / "timed"
    status, out, _ = run_script(capsys, *audio, "--checkpoint", files["streaming"], "--timestamps", out_dir)
    transcriber = Transcriber([files["streaming"]])
    assert status == 0 and out == [f"{path}\t{transcriber.transcribe_file(path)}" for path in audio]
    lines = (out_dir / "timestamps.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["audio"] for r in records] == [str(path) for path in audio]
    for path, record in zip(audio, records):
        text, timing = transcriber.transcribe_timed(path)
        assert record["text"] == text and record == {"audio": str(path), "text": text, **timing.record()}
        assert "".join(w["text"] for w in record["words"]).replace(" ", "") == text.replace(" ", "") and record["words"]
        last = sf.info(path).duration + 2 * transcriber.frame_shift  # the encoder's last frame may pass the audio
        assert all(0 <= w["start"] <= w["end"] <= last for w in record["words"])
        srt = (out_dir / f"{path.stem}.srt").read_text(encoding="utf-8")
        cues = re.findall(SRT_CUE, srt)
        assert cues and "".join(f"{n}\n{a} --> {b}\n{t}\n\n" for n, a, b, t in cues) == srt
        assert "".join(t for *_, t in cues).replace(" ", "") == text.replace(" ", "")
        assert (out_dir / f"{path.stem}.vtt").read_text(encoding="utf-8").startswith("WEBVTT\n\n")
    assert sorted(p.name for p in out_dir.iterdir()) == ["a.srt", "a.vtt", "b.srt", "b.vtt", "timestamps.jsonl"]
    with pytest.raises(SystemExit):
        run_script(capsys, files["a"], "--checkpoint", files["streaming"], "--segment-pause", "1")
    assert "--segment-pause needs --timestamps" in capsys.readouterr().err


def test_a_tdt_nemo_file_decodes_with_beam_search(files, capsys, tmp_path) -> None:
    nemo, _ = write_synthetic_nemo(tmp_path, "fast_conformer_tdt")
    status, out, _ = run_script(capsys, files["b"], "--checkpoint", nemo, "--method", "beam", "--beam", "3")
    assert status == 0 and out == [
        f"{files['b']}\t{Transcriber([nemo], method='beam', beam=3).transcribe_file(files['b'])}"
    ]


def test_files_stream_as_one_segment_by_default_as_eval_streams_them() -> None:
    """One endpointing default for files: transcribe.py --streaming and eval.py streaming=true both decode a file
    as one segment unless asked (--endpointing, stream.endpointing=true), and --help says so."""
    from hydra import compose, initialize_config_dir

    script = load_script()
    args = script.parser().parse_args(["a.wav", "--checkpoint", "x.ckpt", "--streaming"])
    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        eval_default = compose("eval").stream.endpointing
    assert script.streaming_mode(args).endpointing is eval_default is False
    assert script.streaming_mode(
        script.parser().parse_args(["a.wav", "--checkpoint", "x", "--streaming", "--endpointing"])
    ).endpointing
    assert "(default: off, one segment per file, as eval.py streaming=true)" in " ".join(
        script.parser().format_help().split()
    )
