"""The streaming (sherpa-onnx online) export's encoder run the way sherpa-onnx runs it, and what the export refuses.

sherpa-onnx feeds the encoder windows of ``window_size`` feature frames every ``chunk_shift`` frames from the
stream's first frame, with zero caches and ``cache_last_channel_len`` 0 at the start (its source:
``OnlineRecognizerTransducerNeMoImpl::DecodeStreams``, ``OnlineTransducerNeMoModel``), batching streams by
concatenating their caches. `onnx_fixtures.sherpa_encoder_run` does exactly that under onnxruntime; its frames must be the
step API's frames of the stream's features from its first frame on, chunk by chunk, the first and last windows
included.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess

import numpy as np
import pytest
import soundfile
import torch
from onnx_fixtures import (
    CACHES,
    VOCAB,
    LetterPieces,
    largest_difference,
    sherpa_encoder_run,
    step_api_run,
    streaming_transducer,
)
from tiny_models import STREAMING_FEATURES

from asr_plugin.decoding import CacheAwareEncoder, StreamingRecognizer
from asr_plugin.export import export_onnx, export_onnx_streaming
from asr_plugin.export.onnx_streaming import check_streaming_exportable
from asr_plugin.export.sherpa_decode import onnx_metadata
from asr_plugin.export.sherpa_online_decode import sherpa_windows
from asr_plugin.export.sherpa_tokens import sherpa_token_lines
from asr_plugin.frontend.sherpa import SherpaOnlineFbank

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.filterwarnings("ignore")

ONLINE = {"kind": "sherpa_online", "options": {"num_mel_bins": STREAMING_FEATURES}}


@pytest.fixture(scope="module")
def lookahead_0(tmp_path_factory):
    """(model, the export of its context [4, 0], a one-feature first chunk)."""
    model = streaming_transducer()
    with torch.no_grad():  # blanks and tokens mixed, the tokens depending on the frames (the encoder's untouched)
        model.joint.encoder_proj.weight.mul_(5.0)
        model.joint.output.weight.mul_(3.0)
        model.joint.output.bias[0] += 3.0
    out = tmp_path_factory.mktemp("online") / "4_0"
    return model, export_onnx_streaming(model, ONLINE, LetterPieces(VOCAB), out, att_context_size=[4, 0])


def test_sherpas_windows_through_the_encoder_give_the_step_apis_frames(lookahead_0):
    """Streams of several lengths batched as sherpa-onnx batches them (a stream's first window beside another's
    later ones): every window's frames and caches are the step API's, from the first window to the last."""
    model, paths = lookahead_0
    rng = np.random.default_rng(0)
    features = [rng.normal(-4.0, 3.0, (frames, STREAMING_FEATURES)).astype(np.float32) for frames in (300, 121, 57)]
    features[2] = np.concatenate([features[0][:40], features[2]])  # streams that share a start part ways
    runs = sherpa_encoder_run(paths["encoder"], features, starts=[0, 2, 5])
    differences = [largest_difference(run, step_api_run(model, [4, 0], x, len(run))) for x, run in zip(features, runs)]
    print(f"[4, 0]: largest difference from the step API {max(differences):.1e}")
    assert max(differences) <= 1e-4


# the stock program's silence around each file (sherpa-onnx.cc's --left-padding and --right-padding defaults)
PROGRAM_PADDING_SECONDS = (0.5, 0.8)


def test_the_stock_sherpa_onnx_program_hears_every_file_from_its_first_frame(lookahead_0, corpus, tmp_path):
    """sherpa-onnx's own `sherpa-onnx` program (sherpa-onnx-bin, unmodified, its defaults: endpointing on, 0.5 s of
    silence before a file and 0.8 s after it) gives for each file the step API's transcript (sherpa-onnx's greedy
    cap of 10 a frame) of its features from the first frame through the last chunk its windows reach: every token
    and its frame."""
    program = shutil.which("sherpa-onnx")
    if program is None:
        pytest.skip("sherpa-onnx-bin's program is not installed (the dev and onnx extras)")
    model, paths = lookahead_0
    _, waveforms = corpus
    meta, encoder = onnx_metadata(paths["encoder"]), CacheAwareEncoder(model, [4, 0])
    setup, frontend, tokenizer = encoder.setup, SherpaOnlineFbank(STREAMING_FEATURES).eval(), LetterPieces(VOCAB)
    files, ours = [], []
    for index, waveform in enumerate(waveforms[:4]):
        files.append(tmp_path / f"{index}.wav")
        soundfile.write(files[-1], waveform, 16000, subtype="PCM_16")
        samples = soundfile.read(files[-1], dtype="float32")[0]  # what the program reads
        padding = [np.zeros(int(seconds * 16000), np.float32) for seconds in PROGRAM_PADDING_SECONDS]
        padded = torch.from_numpy(np.concatenate([padding[0], samples, padding[1]]))[None]
        features, frames = frontend(padded, torch.tensor([padded.shape[1]]))
        windows = sherpa_windows(int(frames), int(meta["window_size"]), int(meta["chunk_shift"]))
        end = setup.first_chunk_frames + (windows - 1) * setup.chunk_frames  # the chunks its windows reach
        session = StreamingRecognizer(model, encoder, feature_dim=STREAMING_FEATURES, max_symbols_per_frame=10)
        state = session.accept(features[:, :end], torch.tensor([end]), session.initial_state(1))
        hypothesis = session.partial(state)[0]
        ours.append(list(zip([tokenizer.decode([token]) for token in hypothesis.tokens], hypothesis.timestamps)))
    pieces = {name: f"--{name}={paths[name]}" for name in ("tokens", "encoder", "decoder", "joiner")}
    run = subprocess.run([program, *pieces.values(), *map(str, files)], capture_output=True, text=True, check=True)
    results = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]  # its log
    frame_seconds = 0.01 * model.encoder.subsampling.factor
    sherpa = [
        [(piece.strip(), round(time / frame_seconds)) for piece, time in zip(result["tokens"], result["timestamps"])]
        for result in results
    ]
    assert len({tuple(tokens) for tokens in ours}) == len(ours) and min(map(len, ours)) >= 5  # they differ
    assert sherpa == ours


def test_the_encoder_metadata_holds_what_sherpa_online_reads(lookahead_0):
    import onnx

    model, paths = lookahead_0
    setup = model.encoder.streaming_setup([4, 0])
    meta = onnx_metadata(paths["encoder"])
    assert {key: meta[key] for key in ("window_size", "chunk_shift", "subsampling_factor", "vocab_size")} == {
        "window_size": str(setup.chunk_frames),  # the pre-encode frames travel in cache_last_time
        "chunk_shift": str(setup.chunk_frames),
        "subsampling_factor": "8",
        "vocab_size": str(VOCAB - 1),
    }
    assert meta["carried_feature_frames"] == "16"  # the 2f feature frames a window's step reads before it, at 8x
    layers, d_model = len(model.encoder.layers), model.encoder.output_dim
    assert [int(meta[f"cache_last_channel_dim{i}"]) for i in (1, 2, 3)] == [layers, 4, d_model]
    slots = -(-16 * STREAMING_FEATURES // (layers * d_model))  # the carried features, after the kernel-5 causal 4
    assert [int(meta[f"cache_last_time_dim{i}"]) for i in (1, 2, 3)] == [layers, d_model, 4 + slots]
    assert (meta["normalize_type"], meta["pred_rnn_layers"], meta["pred_hidden"]) == ("", "1", "12")
    assert "tdt" not in meta["url"]
    graph = onnx.load(str(paths["encoder"])).graph
    assert [i.name for i in graph.input] == ["audio_signal", "length", *CACHES]
    shape = [d.dim_value or d.dim_param for d in graph.input[0].type.tensor_type.shape.dim]
    assert shape[1:] == [STREAMING_FEATURES, setup.chunk_frames] and isinstance(shape[0], str)  # F read by sherpa
    decoder = onnx.load(str(paths["decoder"])).graph
    assert len(decoder.output) > 1  # what makes sherpa-onnx take its NeMo online path
    lines = paths["tokens"].read_text().splitlines()
    assert lines == sherpa_token_lines(LetterPieces(VOCAB)) and lines[-1] == f"<blk> {VOCAB - 1}"


def test_refusals_name_the_problem(tmp_path):
    model = streaming_transducer(contexts=((4, 1), (-1, -1)))
    assert model.encoder.streaming_contexts == [(4, 1)]
    with pytest.raises(ValueError, match=r"att_context_size=\[-1, -1\] is full context.*without --streaming"):
        check_streaming_exportable(model, ONLINE, [-1, -1])
    with pytest.raises(
        ValueError, match=r"att_context_size=\[4, 3\] is not one of this model's contexts"
    ):  # a lookahead the model lacks
        check_streaming_exportable(model, ONLINE, [4, 3])
    for kind in ("sherpa", "nemo", "logmel"):
        with pytest.raises(ValueError, match=rf"front end of kind '{kind}'.*data.frontend=sherpa_online"):
            check_streaming_exportable(model, {**ONLINE, "kind": kind}, None)
    with pytest.raises(ValueError, match="front end has 80 mel bins, the encoder takes 20"):
        check_streaming_exportable(model, {"kind": "sherpa_online", "options": {"num_mel_bins": 80}}, None)
    tdt = streaming_transducer(contexts=((4, 1),), lattice={"kind": "tdt", "durations": [0, 1, 2]})
    with pytest.raises(ValueError, match=r"TDT lattice \(durations \[0, 1, 2\]\).*RNN-T only"):
        check_streaming_exportable(tdt, ONLINE, None)
    with pytest.raises(ValueError, match=r"att_context_size=\[1, 0\] keeps 1 encoder frames of left context"):
        check_streaming_exportable(streaming_transducer(contexts=((1, 0),)), ONLINE, None)
    with pytest.raises(ValueError, match="causal subsampling"):
        check_streaming_exportable(streaming_transducer(causal_downsampling=False), ONLINE, None)
    with pytest.raises(ValueError, match="kind 'sherpa_online'.*--streaming"):  # the offline export
        export_onnx(model, ONLINE, LetterPieces(VOCAB), tmp_path / "offline")
    with pytest.raises(ValueError, match="full context"):
        export_onnx_streaming(streaming_transducer(contexts=((-1, -1),)), ONLINE, LetterPieces(VOCAB), tmp_path / "x")
    assert not (tmp_path / "offline").exists() and not (tmp_path / "x").exists()


def test_the_script_parses_the_context_and_refuses_streaming_options_without_streaming(capsys):
    script = importlib.import_module("export_onnx")
    assert script.context_argument("32,3") == (32, 3) and script.context_argument("-1,-1") == (-1, -1)
    for arguments, message in (
        (["--att-context-size", "32"], "'32': give the context as L,R"),
        (["--streaming", "--att-context-size", "32,3", "--every-lookahead"], "not allowed with argument"),
        (["--att-context-size", "32,3"], "--att-context-size and --every-lookahead need --streaming"),
    ):
        with pytest.raises(SystemExit):
            script.main(["model.ckpt", "out", *arguments])
        assert message in capsys.readouterr().err
