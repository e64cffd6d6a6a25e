"""The streaming (sherpa-onnx online) export's encoder run the way sherpa-onnx runs it, and what the export refuses.

sherpa-onnx feeds the encoder windows of ``window_size`` feature frames every ``chunk_shift`` frames from the
stream's first frame, with zero caches and ``cache_last_channel_len`` 0 at the start (its source:
``OnlineRecognizerTransducerNeMoImpl::DecodeStreams``, ``OnlineTransducerNeMoModel``), batching streams by
concatenating their caches. `onnx_fixtures.sherpa_encoder_run` does exactly that under onnxruntime; its frames must be the
step API's frames of the stream's features from frame 2f on, chunk by chunk, the first and last windows included.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
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

from asr_plugin.export import export_onnx, export_onnx_streaming
from asr_plugin.export.onnx_streaming import check_streaming_exportable
from asr_plugin.export.sherpa_decode import onnx_metadata
from asr_plugin.export.sherpa_tokens import sherpa_token_lines

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.filterwarnings("ignore")

ONLINE = {"kind": "sherpa_online", "options": {"num_mel_bins": STREAMING_FEATURES}}


@pytest.fixture(scope="module")
def lookahead_0(tmp_path_factory):
    """(model, the export of its context [4, 0], a one-feature first chunk)."""
    model = streaming_transducer()
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


def test_the_encoder_metadata_holds_what_sherpa_online_reads(lookahead_0):
    import onnx

    model, paths = lookahead_0
    setup = model.encoder.streaming_setup([4, 0])
    meta = onnx_metadata(paths["encoder"])
    assert {key: meta[key] for key in ("window_size", "chunk_shift", "subsampling_factor", "vocab_size")} == {
        "window_size": str(setup.pre_encode_cache_size + setup.chunk_frames),  # NeMo's export: chunk + cache
        "chunk_shift": str(setup.chunk_frames),
        "subsampling_factor": "8",
        "vocab_size": str(VOCAB - 1),
    }
    assert meta["lead_frames"] == "16"  # the 2f feature frames sherpa-onnx's first window masks, at 8x
    layers, d_model = len(model.encoder.layers), model.encoder.output_dim
    assert [int(meta[f"cache_last_channel_dim{i}"]) for i in (1, 2, 3)] == [layers, 4, d_model]
    assert [int(meta[f"cache_last_time_dim{i}"]) for i in (1, 2, 3)] == [layers, d_model, 4]  # kernel 5, causal
    assert (meta["normalize_type"], meta["pred_rnn_layers"], meta["pred_hidden"]) == ("", "1", "12")
    assert "tdt" not in meta["url"]
    graph = onnx.load(str(paths["encoder"])).graph
    assert [i.name for i in graph.input] == ["audio_signal", "length", *CACHES]
    shape = [d.dim_value or d.dim_param for d in graph.input[0].type.tensor_type.shape.dim]
    assert shape[1:] == [STREAMING_FEATURES, setup.window_frames] and isinstance(shape[0], str)  # F read by sherpa
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
