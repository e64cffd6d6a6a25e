"""Every entry point reads its model through the seam, so a `.nemo` (laid out as NeMo writes one, no NeMo needed) and
a format this test adds (`BundleFormat`: one class and one line in ``FORMATS``) work wherever a training checkpoint
does: transcribe.py, export_model.py, export_nemo.py, export_onnx.py, eval.py and fine-tuning read the same weights,
tokenizer, front end and settings; ``ckpt_path`` refuses them, naming the preset that starts a run from them."""

from __future__ import annotations

import importlib
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import soundfile as sf
import torch
from hydra import compose, initialize_config_dir
from nemo_models import OUR_FRONTEND, our_model_and_tokenizer, write_synthetic_nemo
from omegaconf import OmegaConf

from asr_plugin.decoding import greedy_search
from asr_plugin.evaluation import evaluate
from asr_plugin.finetune import apply_finetune
from asr_plugin.formats import FORMATS, LoadedModel, ModelFormat, Settings, Weights, format_of, read_model
from asr_plugin.formats.checkpoint import build_checked_model, model_node
from asr_plugin.formats.nemo import import_nemo
from asr_plugin.frontend.spec import build_frontend
from asr_plugin.models import Transducer, build_transducer
from asr_plugin.text import Tokenizer
from asr_plugin.training.ckpt_path import resolve_ckpt_path
from asr_plugin.training.finetune_settings import module_settings

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
BUNDLE_SETTINGS = {"max_symbols_per_frame": 3, "loss_reduction": "mean_volume"}


class BundleFormat(ModelFormat):
    """A format of this test's own: a torch file ``*.bundle`` holding the architecture, the weights, the tokenizer
    record, the front-end spec and `BUNDLE_SETTINGS`. All it needs is this class and its line in ``FORMATS``."""

    name = "bundle"
    description = "a test bundle"

    def claims(self, path: Path) -> bool:
        return path.suffix == ".bundle" and path.is_file()

    def read_model(self, paths, device="cpu") -> LoadedModel:
        content = torch.load(paths[0], weights_only=True)
        model = build_checked_model(model_node(content["architecture"]), content["weights"], str(paths[0]))
        model.load_state_dict(content["weights"])
        tokenizer, settings = Tokenizer.from_record(content["tokenizer"]), self.read_settings(paths[0])
        frontend = content["frontend"]
        return LoadedModel(
            model.to(device).eval(), content["architecture"], tokenizer, frontend, settings, None, tuple(paths)
        )

    def read_weights(self, path: Path, blank_id: int | None = None) -> Weights:
        return Weights(torch.load(path, weights_only=True)["weights"])

    def read_settings(self, path: Path) -> Settings:
        return Settings(dict(BUNDLE_SETTINGS), source=str(path))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> tuple[Path, Transducer]:
    """A bundle of a NeMo-expressible model of this project's own (random weights that emit tokens)."""
    directory = tmp_path_factory.mktemp("bundle")
    model, architecture, tokenizer = our_model_and_tokenizer(directory)
    with torch.no_grad():
        model.joint.output.weight.mul_(8.0)
    content = {"architecture": architecture, "weights": model.state_dict(), "tokenizer": tokenizer.record()}
    torch.save({**content, "frontend": OUR_FRONTEND}, directory / "model.bundle")
    return directory / "model.bundle", model


@pytest.fixture(scope="module")
def nemo(tmp_path_factory) -> tuple[Path, Transducer]:
    return write_synthetic_nemo(tmp_path_factory.mktemp("nemo"), "fast_conformer_transducer")


@pytest.fixture(params=["nemo", "bundle"])
def model_file(request, monkeypatch) -> tuple[Path, Transducer]:
    """(file, the model it holds) of each kind; the bundle's format registered for the test."""
    monkeypatch.setitem(FORMATS, BundleFormat.name, BundleFormat)
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> tuple[Path, Path]:
    """A wav file and a NeMo manifest of it."""
    directory = tmp_path_factory.mktemp("audio")
    audio = torch.sin(torch.arange(24_000) * 0.05) * 0.3 + 0.05 * torch.randn(
        24_000, generator=torch.Generator().manual_seed(0)
    )
    sf.write(directory / "a.wav", audio.numpy(), 16_000)
    entry = {"audio_filepath": "a.wav", "duration": 1.5, "text": "the quick brown fox"}
    (directory / "test.json").write_text(json.dumps(entry) + "\n")
    return directory / "a.wav", directory / "test.json"


def script(name: str):
    """A command line of scripts/ (on the tests' path), its ``main`` called in this process."""
    return importlib.import_module(name)


def same_weights(ours: torch.nn.Module, theirs: torch.nn.Module, skip: tuple[str, ...] = ()) -> bool:
    state = theirs.state_dict()
    return all(torch.equal(value, state[key]) for key, value in ours.state_dict().items() if not key.startswith(skip))


def test_read_model_gives_the_files_model_tokenizer_and_front_end(model_file):
    path, model = model_file
    loaded = read_model(path)
    assert same_weights(loaded.model, model) and not loaded.model.training
    assert loaded.require_tokenizer().vocab_size == model.vocab_size
    assert loaded.require_frontend_spec()["options"]["num_mel_bins"] == loaded.feature_dim


def test_transcribe_decodes_with_the_files_tokenizer_and_features(model_file, speech, capsys):
    path, model = model_file
    wav, _ = speech
    assert script("transcribe").main([str(wav), "--checkpoint", str(path), "--method", "greedy"]) == 0
    printed = capsys.readouterr().out.strip().split("\t")
    loaded = read_model(path)  # the reference: the known model, through the file's tokenizer and front end
    waveform = torch.from_numpy(sf.read(wav, dtype="float32")[0])[None]
    features, lengths = build_frontend(loaded.require_frontend_spec()).eval()(
        waveform, torch.tensor([waveform.shape[1]])
    )
    with torch.no_grad():
        hypothesis = greedy_search(model, *model.encode(features, lengths), **loaded.decoding)[0]
    assert printed == [str(wav), loaded.require_tokenizer().decode(hypothesis.tokens)]


def test_transcribe_keeps_a_path_with_a_tab_or_newline_on_one_line(nemo, speech, tmp_path, capsys):
    wav, _ = speech
    odd = tmp_path / "a\tb\nc.wav"
    odd.write_bytes(wav.read_bytes())
    assert script("transcribe").main([str(odd), "--checkpoint", str(nemo[0]), "--method", "greedy"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    path, text = line.rsplit("\t", 1)
    assert json.loads(path) == str(odd) and "\t" not in text


@pytest.mark.slow  # torch.export
def test_export_model_records_the_files_feature_size_and_greedy_cap(model_file, tmp_path):
    path, _ = model_file
    assert script("export_model").main(["--checkpoint", str(path), "--out", str(tmp_path / "export")]) == 0
    meta = json.loads((tmp_path / "export" / "transducer.json").read_text())
    loaded = read_model(path)
    assert (meta["max_symbols_per_frame"], meta["feature_dim"]) == (
        loaded.decoding["max_symbols_per_frame"],
        loaded.feature_dim,
    )


def test_export_nemo_writes_what_nemo_reads_back(model_file, tmp_path):
    path, model = model_file
    script("export_nemo").main([str(path), str(tmp_path / "out.nemo")])
    again = import_nemo(tmp_path / "out.nemo")
    # this project's own tokenizer gets one NeMo class more (never emitted: test_nemo_export.py)
    assert same_weights(again.model, model, skip=("predictor.embedding.", "joint.output."))
    assert again.config["decoding"]["greedy"]["max_symbols"] == read_model(path).decoding["max_symbols_per_frame"]


def test_fine_tuning_loads_the_files_weights_and_takes_its_settings(model_file, tmp_path):
    path, model = model_file
    fresh = build_transducer(**read_model(path).architecture)
    apply_finetune(fresh, {"path": str(path), "strict": True})
    assert same_weights(fresh, model)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "train", overrides=["+finetune=from_checkpoint", f"finetune.path={path}", f"paths.root_dir={tmp_path}"]
        )
    settings, origins = module_settings(cfg)
    expected = read_model(path).settings
    assert settings["loss_reduction"] == expected.get("loss_reduction") and origins["loss_reduction"] == "checkpoint"


def test_ckpt_path_points_a_model_file_of_another_format_to_its_fine_tuning_preset(model_file, tmp_path):
    path, _ = model_file
    preset = format_of(path).finetune_preset
    cfg = OmegaConf.create({"ckpt_path": str(path)})
    trainer = SimpleNamespace(checkpoint_callbacks=[], default_root_dir=str(tmp_path))
    with pytest.raises(ValueError, match=rf"ckpt_path: {path} is .*not a training checkpoint.*\+finetune={preset} "):
        resolve_ckpt_path(cfg, trainer)


@pytest.mark.slow  # the ONNX export
def test_export_onnx_reads_it(model_file, tmp_path, capsys):
    path, model = model_file
    assert script("export_onnx").main([str(path), str(tmp_path / "onnx")]) == 0
    assert (tmp_path / "onnx" / "tokens.txt").read_text().count("\n") == model.vocab_size
    assert f"feature_dim: {read_model(path).feature_dim}" in capsys.readouterr().out


@pytest.mark.slow  # data preparation and decoding
def test_eval_decodes_it_with_its_tokenizer_and_features(model_file, speech, tmp_path, caplog):
    path, _ = model_file
    _, manifest = speech
    overrides = [
        f"checkpoint={path}",
        "data=nemo",
        f"data.test_manifests={{mine: {manifest}}}",
        "data.num_workers=0",
        "data.prepare_num_workers=0",
        "decoding.methods=[greedy]",
        f"paths.root_dir={tmp_path}",
        f"output_dir={tmp_path}/eval",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("eval", overrides=overrides)
    with caplog.at_level(logging.WARNING):
        result = evaluate(cfg)
    assert [(row["set"], row["utterances"]) for row in result["rows"]] == [("mine", 1)]
    assert not any("records no tokenizer" in r.getMessage() for r in caplog.records), "the file's own are used"
    assert result["checkpoints"] == [str(path)]
