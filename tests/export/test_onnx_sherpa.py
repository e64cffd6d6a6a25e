"""ONNX export decoded by sherpa-onnx's stock Python API (no network): this project's micro model on the tiny mini
corpus and an imported NeMo-layout TDT model, float and int8; the micro model on the "sherpa" front end, whose
sherpa-onnx transcripts must equal greedy search on its training features; the feature adapter against the
training front ends on speech; a 10-minute input through the encoder.

The models have random weights (no trained model fits in a test's time), so their transcripts are long and
change with any perturbation of the features: the exact check is sherpa-onnx's transcript against
`greedy_search` on the features sherpa-onnx computes (kaldi-native-fbank with its options), which tests
everything the export does; the feature adapter is checked on the features themselves, and the int8 files
on their encoder outputs. `scripts/benchmark_onnx.py` measures WERs on a trained checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("sherpa_onnx")
pytest.importorskip("kaldi_native_fbank")

from nemo_models import write_synthetic_nemo
from onnx_fixtures import LetterPieces
from tiny_models import MICRO_LOGMEL

from asr_plugin.export import export_onnx
from asr_plugin.export.feature_adapter import SherpaFeatureAdapter
from asr_plugin.export.sherpa_decode import (
    greedy_on_sherpa_features,
    greedy_on_training_features,
    sherpa_features,
    sherpa_recognizer,
    sherpa_transcribe,
)
from asr_plugin.formats.nemo import import_nemo
from asr_plugin.frontend.spec import build_frontend, complete_frontend_spec
from asr_plugin.models import build_transducer

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


def _texts(tokenizer, token_lists):
    return [" ".join(tokenizer.decode(tokens).split()) for tokens in token_lists]


def _agreement(a, b) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def _normalised(texts):
    return [" ".join(t.split()) for t in texts]


def _encoder_outputs(path, features):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    lengths = np.array([features.shape[1]], dtype=np.int64)
    return session.run(None, {"audio_signal": features.T[None].numpy(), "length": lengths})[0]


def _check_export(model, spec, tokenizer, waveforms, out_dir):
    """Exports (float and int8), decodes with sherpa-onnx and checks it against greedy search on sherpa's features."""
    paths = export_onnx(model, spec, tokenizer, out_dir, int8=True)
    sherpa_float = _normalised(sherpa_transcribe(sherpa_recognizer(out_dir), waveforms))
    sherpa_int8 = _normalised(sherpa_transcribe(sherpa_recognizer(out_dir, int8=True), waveforms))
    on_sherpa = _texts(tokenizer, [greedy_on_sherpa_features(model, spec, w) for w in waveforms])
    assert sum(len(t) for t in on_sherpa) > 0
    assert _agreement(sherpa_float, on_sherpa) >= 0.99  # the exported files are the model
    assert len(sherpa_int8) == len(waveforms)
    features = sherpa_features(waveforms[0], SherpaFeatureAdapter(spec).sherpa_bins)  # (T, F)
    full, quantised = _encoder_outputs(paths["encoder"], features), _encoder_outputs(paths["encoder.int8"], features)
    assert np.linalg.norm(quantised - full) <= 0.1 * np.linalg.norm(full)
    frontend = build_frontend(spec).eval()
    on_ours = _texts(tokenizer, [greedy_on_training_features(model, frontend, w) for w in waveforms])
    print(
        f"{out_dir.name}: sherpa float = greedy on the training features for {_agreement(sherpa_float, on_ours):.0%}, "
        f"int8 = float for {_agreement(sherpa_int8, sherpa_float):.0%} of the utterances"
    )


def test_micro_model_decodes_in_sherpa_as_greedy_search(corpus, tmp_path):
    datamodule, waveforms = corpus
    torch.manual_seed(0)
    model = build_transducer(vocab_size=datamodule.tokenizer.vocab_size, **MICRO_LOGMEL).eval()
    with torch.no_grad():
        model.joint.output.bias[0] -= 2.0  # emit some tokens
    _check_export(model, datamodule.frontend_spec, datamodule.tokenizer, waveforms, tmp_path / "micro")


def test_imported_nemo_tdt_model_decodes_in_sherpa_as_greedy_search(corpus, tmp_path):
    _, waveforms = corpus
    path, _ = write_synthetic_nemo(tmp_path, "fast_conformer_tdt")
    imported = import_nemo(path)
    assert imported.model.lattice.durations == (0, 1, 2, 3, 4)
    _check_export(imported.model, imported.frontend_spec, imported.tokenizer, waveforms, tmp_path / "tdt")


@pytest.mark.parametrize("normalize", ["per_feature", None])
def test_a_model_on_the_sherpa_front_end_decodes_in_sherpa_as_on_its_training_features(corpus, tmp_path, normalize):
    """No adapter: sherpa-onnx computes the training front end's log filterbank, the encoder normalises it as
    the front end does, so sherpa-onnx's transcripts equal `greedy_search` on the training front end's
    features, for every utterance (a random model, whose transcripts any feature change alters)."""
    import onnx

    datamodule, waveforms = corpus
    spec = complete_frontend_spec({"kind": "sherpa", "options": {"normalize": normalize}})
    torch.manual_seed(0)
    model = build_transducer(vocab_size=datamodule.tokenizer.vocab_size, **MICRO_LOGMEL).eval()
    with torch.no_grad():
        model.joint.output.bias[0] -= 2.0  # emit some tokens
    out_dir = tmp_path / f"sherpa_{normalize}"
    paths = export_onnx(model, spec, datamodule.tokenizer, out_dir, int8=True)
    metadata = {p.key: p.value for p in onnx.load(str(paths["encoder"])).metadata_props}
    assert (metadata["normalize_type"], metadata["feat_dim"]) == ("", "80")
    assert "sherpa-onnx's own features" in metadata["comment"]
    frontend = build_frontend(spec).eval()
    on_training = _texts(datamodule.tokenizer, [greedy_on_training_features(model, frontend, w) for w in waveforms])
    assert sum(len(t) for t in on_training) > 0
    assert _normalised(sherpa_transcribe(sherpa_recognizer(out_dir), waveforms)) == on_training
    sherpa_int8 = _normalised(sherpa_transcribe(sherpa_recognizer(out_dir, int8=True), waveforms))
    print(f"{out_dir.name}: int8 = float for {_agreement(sherpa_int8, on_training):.0%} of the utterances")
    features = sherpa_features(waveforms[0], 80)
    full, quantised = _encoder_outputs(paths["encoder"], features), _encoder_outputs(paths["encoder.int8"], features)
    assert np.linalg.norm(quantised - full) <= 0.1 * np.linalg.norm(full)


@pytest.mark.parametrize("kind", ["logmel", "nemo"])
def test_adapted_sherpa_features_are_close_to_the_training_features_on_speech(corpus, kind):
    datamodule, waveforms = corpus
    spec = datamodule.frontend_spec if kind == "logmel" else {"kind": "nemo", "options": {}}
    adapter, frontend = SherpaFeatureAdapter(spec), build_frontend(spec).eval()
    differences = []
    for waveform in waveforms:
        ours, frames = frontend(torch.from_numpy(waveform)[None], torch.tensor([len(waveform)]))  # (1, T, F)
        sherpa = sherpa_features(waveform, adapter.sherpa_bins)  # (T_s, F)
        with torch.no_grad():
            mapped = adapter(sherpa.T[None], torch.tensor([sherpa.shape[0]]))[0]
        common = min(mapped.shape[0], int(frames))  # sherpa has a frame less ("logmel") or as many ("nemo")
        differences.append((mapped[:common] - ours[0, :common]).abs().mean())
    # both front ends' features are standardised (std ~1): the adapter is within a quarter std on average
    assert float(torch.stack(differences).mean()) < 0.35


def test_ten_minutes_of_features_run_through_the_encoder(tmp_path):
    """A one-head FastConformer-style encoder (relative positions, 8x subsampling): attention memory grows with
    heads x frames^2, about 3 GB here for 7,500 encoder frames."""
    import onnxruntime

    torch.manual_seed(0)
    model = build_transducer(
        vocab_size=7,
        **{**MICRO_LOGMEL, "d_model": 16, "num_heads": 1},
        attention="rel_pos",
        subsampling="dw_striding",
        subsampling_factor=8,
        subsampling_channels=8,
    ).eval()
    paths = export_onnx(model, {"kind": "nemo", "options": {}}, LetterPieces(7), tmp_path / "long")
    session = onnxruntime.InferenceSession(str(paths["encoder"]), providers=["CPUExecutionProvider"])
    frames = 60_000  # 10 minutes of 10 ms frames
    features = np.random.default_rng(0).normal(-5.0, 2.0, (1, 80, frames)).astype(np.float32)
    out, lengths = session.run(None, {"audio_signal": features, "length": np.array([frames], dtype=np.int64)})
    expected = int(model.encoder.output_lengths(torch.tensor([frames])))
    assert lengths.tolist() == [expected] and out.shape == (1, model.joint.hidden_dim, expected)
    assert np.isfinite(out).all()


def test_a_large_model_gets_its_weights_in_an_external_file_that_sherpa_reads(monkeypatch, corpus, tmp_path):
    from asr_plugin.export import onnx_files

    datamodule, waveforms = corpus
    torch.manual_seed(0)
    model = build_transducer(vocab_size=datamodule.tokenizer.vocab_size, **MICRO_LOGMEL).eval()
    monkeypatch.setattr(onnx_files, "EXTERNAL_DATA_BYTES", 0)  # every piece counts as large
    spec = datamodule.frontend_spec
    paths = export_onnx(model, spec, datamodule.tokenizer, tmp_path / "large", int8=True)
    assert (tmp_path / "large" / "encoder.onnx.data").is_file()
    assert not [p for p in (tmp_path / "large").iterdir() if p.name.startswith(".")]  # no temporary left
    texts = _normalised(sherpa_transcribe(sherpa_recognizer(paths["encoder"].parent), waveforms[:2]))
    assert texts == _texts(datamodule.tokenizer, [greedy_on_sherpa_features(model, spec, w) for w in waveforms[:2]])
