"""The transformers format (asr_plugin.formats.transformers_parakeet) against transformers itself: a Parakeet
directory saved by ``save_pretrained`` (tiny models from transformers' config classes, random weights, no hub)
read into our Transducer gives transformers' encoder output, features and greedy transcripts; hostile directories
are refused by name."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers.models.parakeet")

from transformers import ParakeetFeatureExtractor  # noqa: E402
from transformers_models import (  # noqa: E402
    KINDS,
    assert_same_greedy_transcripts,
    build_model,
    decodable_model,
    make_batch,
    save_directory,
)  # noqa: E402

from asr_plugin.data import build_frontend  # noqa: E402
from asr_plugin.formats import format_of, read_model, read_weights  # noqa: E402


@pytest.fixture(scope="module", params=KINDS)
def saved(request, tmp_path_factory):
    """(kind, the transformers model, its saved directory)."""
    model = build_model(request.param)
    directory = tmp_path_factory.mktemp(request.param)
    save_directory(model, directory)
    return request.param, model.eval(), directory


def test_the_directory_is_the_transformers_format(saved):
    _, _, directory = saved
    assert format_of(directory).name == "transformers"


def test_encoder_output_equals_transformers(saved):
    kind, model, directory = saved
    loaded = read_model(directory)
    batch = make_batch(kind)
    with torch.no_grad():
        expected = model.get_audio_features(
            input_features=batch["input_features"], attention_mask=batch["attention_mask"]
        )
        ours, lengths = loaded.model.encode(batch["input_features"], batch["attention_mask"].sum(-1))
    assert lengths.tolist() == expected.attention_mask.sum(-1).tolist()
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(ours[row, :length], expected.last_hidden_state[row, :length], rtol=1e-5, atol=1e-5)


def test_read_weights_are_the_models(saved):
    _, _, directory = saved
    state = read_model(directory).model.state_dict()
    weights = read_weights(directory).model
    assert weights.keys() == state.keys() and all(torch.equal(weights[k], state[k]) for k in state)


def test_features_equal_transformers(saved):
    _, _, directory = saved
    generator = torch.Generator().manual_seed(4)
    audio = [0.1 * torch.randn(samples, generator=generator) for samples in (16000, 11000)]
    expected = ParakeetFeatureExtractor.from_pretrained(directory)(
        [a.numpy() for a in audio], sampling_rate=16000, return_tensors="pt"
    )
    frontend = build_frontend(read_model(directory).require_frontend_spec()).eval()
    padded = torch.nn.utils.rnn.pad_sequence(audio, batch_first=True)
    features, lengths = frontend(padded, torch.tensor([len(a) for a in audio]))
    assert lengths.tolist() == expected["attention_mask"].sum(-1).tolist()
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(
            features[row, :length], expected["input_features"][row, :length], rtol=1e-4, atol=1e-4
        )


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_transcripts_equal_transformers_generate(kind, tmp_path):
    model = decodable_model(kind)
    save_directory(model, tmp_path)
    batch = make_batch(kind, frames=[48, 40, 25, 33, 44, 29], labels=[5, 3, 4, 1, 2, 2])
    assert_same_greedy_transcripts(model, read_model(tmp_path).model, batch)


def _hostile(directory, tmp_path, edit=None, remove=None):
    """A copy of the saved `directory` with its config edited by `edit` and the file `remove` removed."""
    copy = tmp_path / "hostile"
    copy.mkdir()
    for path in directory.iterdir():
        if path.name != remove:
            (copy / path.name).write_bytes(path.read_bytes())
    if edit is not None:
        config = json.loads((copy / "config.json").read_text())
        edit(config)
        (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(auto_map={"AutoModel": "modeling.Model"}), "auto_map asks for the directory's own code"),
        (lambda c: c["encoder_config"].update(hidden_size=24), r"weight encoder\..* has shape"),
        (lambda c: c["encoder_config"].update(num_hidden_layers=10**6), "num_layers=1000000 is outside"),
        (lambda c: c["encoder_config"].update(hidden_act="gelu"), "encoder_config.hidden_act='gelu'"),
        (lambda c: c.update(blank_token_id=0), "blank_token_id=0"),
        (lambda c: c.update(architectures=["ParakeetForCTC"]), "architectures="),
    ],
)
def test_hostile_configs_are_refused_by_name(saved, tmp_path, edit, message):
    _, _, directory = saved
    with pytest.raises(ValueError, match=message):
        read_model(_hostile(directory, tmp_path, edit=edit), format="transformers")


def test_missing_files_are_refused_by_name(saved, tmp_path):
    _, model, directory = saved
    copy = _hostile(directory, tmp_path, remove="model.safetensors")
    torch.save(model.state_dict(), copy / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"model.safetensors: no such file \(the pickle\(s\) \['pytorch_model.bin'\]"):
        read_model(copy)
    (copy / "config.json").unlink()
    with pytest.raises(ValueError, match="config.json: no such file"):
        read_model(copy, format="transformers")


def test_non_finite_weights_are_refused_by_name(saved, tmp_path):
    from safetensors.torch import load_file, save_file

    _, _, directory = saved
    copy = _hostile(directory, tmp_path)
    state = load_file(copy / "model.safetensors")
    state["joint.head.bias"][0] = float("nan")
    save_file(state, copy / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="weight joint.head.bias holds 1 NaN"):
        read_model(copy)


def test_a_truncated_weights_file_is_refused_by_name(saved, tmp_path):
    _, _, directory = saved
    copy = _hostile(directory, tmp_path)
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        read_model(copy)


def test_the_tokenizer_is_reported_missing(saved):
    _, _, directory = saved
    loaded = read_model(directory)
    with pytest.raises(ValueError, match="it has no tokenizer.json"):
        loaded.require_tokenizer()


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_changed_here_and_written_back_loads_in_transformers(kind, tmp_path):
    """Read, changed as a fine-tune would change it, written: transformers loads it and computes what we do."""
    from transformers import AutoModel

    source = tmp_path / "source"
    model = decodable_model(kind)
    save_directory(model, source)
    loaded = read_model(source)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for parameter in loaded.model.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=generator))
    written = format_of(source).write(loaded, tmp_path / "fine-tuned")
    reloaded = AutoModel.from_pretrained(written).eval()
    assert type(reloaded) is type(model)
    assert sorted(p.name for p in written.iterdir()) == sorted(p.name for p in source.iterdir())
    batch = make_batch(kind)
    with torch.no_grad():
        theirs = reloaded.get_audio_features(
            input_features=batch["input_features"], attention_mask=batch["attention_mask"]
        )
        ours, lengths = loaded.model.encode(batch["input_features"], batch["attention_mask"].sum(-1))
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(ours[row, :length], theirs.last_hidden_state[row, :length], rtol=1e-5, atol=1e-5)
    assert_same_greedy_transcripts(
        reloaded, loaded.model, make_batch(kind, frames=[48, 40, 25, 33, 44, 29], labels=[5, 3, 4, 1, 2, 2])
    )
    assert json.loads((written / "config.json").read_text())["pad_token_id"] == model.config.pad_token_id
    with pytest.raises(FileExistsError, match="exists"):
        format_of(source).write(loaded, written)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left


def test_an_architecture_parakeet_cannot_express_is_not_written(saved, tmp_path):
    _, _, directory = saved
    loaded = read_model(directory)
    loaded.architecture = {**loaded.architecture, "att_context_size": [[64, 0]]}
    with pytest.raises(ValueError, match="att_context_size"):
        format_of(directory).write(loaded, tmp_path / "out")
    assert not (tmp_path / "out").exists()
