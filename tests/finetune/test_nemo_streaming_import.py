"""Cache-aware streaming `.nemo` checkpoints (NeMo's ``*_streaming`` FastConformers) through the seam, without NeMo:
every lookahead is the imported model's, each one streams, the export writes the streaming keys back in NeMo's
spelling, and what we cannot express is refused naming the file and the key.

NeMo's own cache-aware inference on these files is tested in test_nemo_streaming.py (-m nemo).
"""

from __future__ import annotations

import pytest
import torch
from nemo_models import write_synthetic_nemo

from asr_plugin.decoding import CacheAwareEncoder
from asr_plugin.formats import LoadedModel, export_nemo, read_model
from asr_plugin.formats.nemo import import_nemo, nemo_frontend_spec, nemo_transducer_kwargs
from asr_plugin.models import build_transducer, encode_in_chunks
from benchmarks.nemo_examples import ARCHITECTURES

STREAMING = "fast_conformer_streaming"
CONTEXTS = [tuple(context) for context in ARCHITECTURES[STREAMING]["att_context_size"]]  # the first: the default
STREAMING_KEYS = ("att_context_size", "att_context_style", "conv_context_size", "conv_norm_type", "causal_downsampling")


@pytest.fixture(scope="module")
def streaming_nemo(tmp_path_factory):
    return write_synthetic_nemo(tmp_path_factory.mktemp("streaming"), STREAMING)


def test_every_lookahead_is_the_models_and_the_first_its_default(streaming_nemo):
    path, reference = streaming_nemo
    imported = import_nemo(path)
    for key, value in reference.state_dict().items():
        assert torch.equal(imported.model.state_dict()[key], value), key
    assert not imported.report.lost
    assert {key: imported.model_kwargs[key] for key in STREAMING_KEYS} == {
        "att_context_size": [list(context) for context in CONTEXTS],
        "att_context_style": "chunked_limited",
        "conv_context_size": "causal",
        "conv_norm_type": "layer_norm",
        "causal_downsampling": True,
    }
    encoder = imported.model.encoder
    assert encoder.att_context_sizes == CONTEXTS and encoder.att_context_size == CONTEXTS[0]
    assert encoder.att_context_probs == pytest.approx([1 / 3] * 3)  # NeMo's null: uniform
    assert imported.frontend_spec["options"]["normalize"] is None  # NeMo's "NA"
    # the architecture fine-tuning trains (conf/model/nemo.yaml) and what the seam reads are the same
    assert {key: nemo_transducer_kwargs(path)[key] for key in STREAMING_KEYS} == {
        key: imported.model_kwargs[key] for key in STREAMING_KEYS
    }
    assert read_model(path).model.encoder.att_context_sizes == CONTEXTS


@pytest.mark.parametrize("context", CONTEXTS)
def test_each_lookahead_streams_as_its_masked_forward(streaming_nemo, context):
    model = import_nemo(streaming_nemo[0]).model
    encoder = CacheAwareEncoder(model, list(context))  # the session's encoder stream takes it
    features, lengths = torch.randn(2, 150, 80), torch.tensor([150, 97])
    with torch.no_grad():
        whole, whole_lengths = model.encoder(features, lengths, context)
        streamed, streamed_lengths = encode_in_chunks(model.encoder, features, lengths, encoder.setup)
    assert streamed_lengths.tolist() == whole_lengths.tolist()
    for row, length in enumerate(whole_lengths.tolist()):
        torch.testing.assert_close(streamed[row, :length], whole[row, :length], atol=1e-5, rtol=0)


def test_a_lookahead_the_model_was_not_trained_with_is_refused(streaming_nemo):
    model = import_nemo(streaming_nemo[0]).model
    with pytest.raises(ValueError, match=r"att_context_size=\[16, 2\] is not one of this model's contexts"):
        CacheAwareEncoder(model, [16, 2])


def test_the_export_writes_the_streaming_keys_in_nemos_spelling(streaming_nemo, tmp_path):
    path, reference = streaming_nemo
    imported = import_nemo(path)
    again = import_nemo(export_nemo(imported, tmp_path / "again.nemo"))
    encoder = again.config["encoder"]
    assert encoder["att_context_size"] == [list(context) for context in CONTEXTS]
    assert (encoder["att_context_style"], encoder["att_context_probs"]) == ("chunked_limited", None)
    assert (encoder["conv_context_size"], encoder["conv_norm_type"]) == ("causal", "layer_norm")
    assert encoder["causal_downsampling"] is True
    assert again.model_kwargs == imported.model_kwargs and again.frontend_spec == imported.frontend_spec
    for key, value in reference.state_dict().items():
        assert torch.equal(again.model.state_dict()[key], value), key


def test_one_context_and_its_probabilities_round_trip(tmp_path):
    def edit(config):
        config["encoder"].update(att_context_size=[[16, 1], [8, 0]], att_context_probs=[0.75, 0.25])
        config["encoder"].update(att_context_style="regular", conv_context_size=[4, 2])

    path, _ = write_synthetic_nemo(tmp_path, STREAMING, config_edit=edit)
    imported = import_nemo(path)
    assert imported.model.encoder.att_context_probs == [0.75, 0.25]
    assert imported.model.encoder.conv_context == (4, 2)
    again = import_nemo(export_nemo(imported, tmp_path / "again.nemo"))
    assert again.config["encoder"]["att_context_probs"] == [0.75, 0.25]
    assert again.config["encoder"]["conv_context_size"] == [4, 2]
    assert again.model_kwargs == imported.model_kwargs


@pytest.mark.parametrize("spelling", ["NA", "None"])
def test_nemos_no_normalisation_spellings_are_none(tmp_path, spelling):
    path, _ = write_synthetic_nemo(
        tmp_path, STREAMING, config_edit=lambda config: config["preprocessor"].update(normalize=spelling)
    )
    assert nemo_frontend_spec(path)["options"]["normalize"] is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("att_context_style", "chunked_limited_with_rc", r"encoder.att_context_style='chunked_limited_with_rc'"),
        ("att_chunk_context_size", [16, 4, 2], r"encoder.att_chunk_context_size=\[16, 4, 2\] is not supported"),
        ("conv_context_style", "dcc", "encoder.conv_context_style='dcc' is not supported"),
        ("conv_norm_type", "group_norm4", "encoder.conv_norm_type='group_norm4' is not supported"),
        ("conv_context_size", [2, 2], r"encoder.conv_context_size=\[2, 2\] .*left \+ right \+ 1 = conv_kernel_size"),
        ("att_context_size", [[6, 3]], r"encoder.att_context_size=\[\[6, 3\]\] .*multiple of the chunk"),
        ("att_context_probs", [0.5, 0.5], r"encoder.att_context_probs=\[0.5, 0.5\] .*2 entries for 3"),
        ("stochastic_depth_drop_prob", 0.1, "encoder.stochastic_depth_drop_prob=0.1 is not supported"),
    ],
)
def test_what_we_cannot_express_is_refused_naming_the_file_and_the_key(tmp_path, key, value, message):
    path, _ = write_synthetic_nemo(
        tmp_path, STREAMING, config_edit=lambda config: config["encoder"].update({key: value})
    )
    for read in (import_nemo, nemo_transducer_kwargs, read_model):
        with pytest.raises(ValueError, match=f"{path}: NeMo config: {message}"):
            read(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"att_context_probs": [0.7, 0.2, 0.1]},
            r"att_context_probs=\[0.7, 0.2, 0.1\] \(NeMo's ConformerEncoder wants",
        ),
        (
            {"att_context_size": [16, -1], "att_context_probs": None},
            "a single chunked_limited att_context_size with an",
        ),
    ],
)
def test_what_nemo_refuses_is_not_exported(streaming_nemo, tmp_path, change, message):
    loaded = read_model(streaming_nemo[0])  # our probabilities sum to 1 within rounding, NeMo's exactly
    architecture = {**loaded.architecture, **change}
    source = LoadedModel(build_transducer(**architecture), architecture, loaded.tokenizer, loaded.frontend_spec)
    with pytest.raises(ValueError, match=f"NeMo cannot express {message}"):
        export_nemo(source, tmp_path / "x.nemo")
    assert not (tmp_path / "x.nemo").exists()
