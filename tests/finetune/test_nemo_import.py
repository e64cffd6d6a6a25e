"""`import_nemo` and `.nemo` fine-tuning on archives laid out as NeMo writes them (no NeMo needed).

The exact equivalence with NeMo's own model is tested in test_nemo_equivalence.py (NeMo installed).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from nemo_models import write_synthetic_nemo
from omegaconf import OmegaConf

from asr_plugin.finetune import apply_finetune, finetune_report, freeze_encoder_layers
from asr_plugin.formats.nemo import import_nemo, nemo_transducer
from asr_plugin.formats.nemo.config import transducer_kwargs
from asr_plugin.losses import RNNT, TDT
from benchmarks.nemo_examples import nemo_config

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    directory = tmp_path_factory.mktemp("nemo")
    return {
        name: write_synthetic_nemo(directory, name) for name in ("conformer_transducer", "fast_conformer_transducer")
    }


@pytest.mark.parametrize("name", ["conformer_transducer", "fast_conformer_transducer"])
def test_import_reproduces_the_written_model(archives, name):
    path, reference = archives[name]
    imported = import_nemo(path)
    assert not imported.model.training and not imported.frontend.training
    ours = imported.model.state_dict()
    assert ours.keys() == reference.state_dict().keys()
    for key, value in reference.state_dict().items():
        assert torch.equal(ours[key], value), key
    assert sorted(imported.report.not_imported) == ["preprocessor.featurizer.fb", "preprocessor.featurizer.window"]
    assert not imported.report.lost
    features, lengths = torch.randn(2, 90, 80), torch.tensor([90, 61])
    with torch.no_grad():
        torch.testing.assert_close(imported.model.encode(features, lengths), reference.encode(features, lengths))


def test_tokenizer_ids_are_nemo_ids_plus_one(archives):
    path, _ = archives["conformer_transducer"]
    tokenizer = import_nemo(path).tokenizer
    sp = spm.SentencePieceProcessor(model_file=str(path.parent / "conformer_transducer_tokenizer" / "tokenizer.model"))
    text = "the quick brown fox"
    assert tokenizer.encode(text) == [i + 1 for i in sp.encode(text)]
    assert tokenizer.decode([0] + tokenizer.encode(text) + [0]) == text
    assert tokenizer.vocab_size == sp.get_piece_size() + 1 and tokenizer.blank_id == 0
    assert tokenizer.id_to_piece(0) == "<blk>" and tokenizer.id_to_piece(1) == sp.id_to_piece(0)
    assert pickle.loads(pickle.dumps(tokenizer)).encode(text) == tokenizer.encode(text)  # DataLoader workers


def test_frontend_dithers_only_in_training_mode(archives):
    frontend = import_nemo(archives["conformer_transducer"][0]).frontend
    audio, lengths = torch.randn(2, 8000) * 0.1, torch.tensor([8000, 5000])
    first, frame_lengths = frontend(audio, lengths)
    assert frame_lengths.tolist() == [50, 31] and first.shape == (2, 50, 80)
    assert torch.equal(first, frontend(audio, lengths)[0])
    assert not torch.equal(first, frontend.train()(audio, lengths)[0])
    assert torch.all(first[1, 31:] == 0.0)  # padded frames are zero, as NeMo's pad_value
    with pytest.raises(ValueError, match="utterance 1 has 300 samples"):
        frontend(audio, torch.tensor([8000, 300]))


def test_reading_needs_no_nemo(archives):
    path, _ = archives["fast_conformer_transducer"]
    code = (
        "import sys; sys.modules['nemo'] = None\n"  # any `import nemo` now fails
        "from asr_plugin.formats.nemo import import_nemo\n"
        f"print(import_nemo({str(path)!r}).model.vocab_size)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(result.stdout.strip().splitlines()[-1]) == import_nemo(path).tokenizer.vocab_size


def _edit(section, key, value):
    def edit(config):
        node = config
        for part in section.split("."):
            node = node[part]
        node[key] = value

    return edit


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("encoder", "self_attention_model", "abs_pos", "encoder.self_attention_model='abs_pos' is not supported"),
        ("encoder", "subsampling", "vggnet", "encoder.subsampling='vggnet' is not supported"),
        ("encoder", "untie_biases", False, "encoder.untie_biases=False is not supported"),
        ("encoder", "layer_drop", 0.1, r"encoder.layer_drop is not supported by the importer \(supported keys"),
        ("decoder", "_target_", "nemo.collections.asr.modules.StatelessTransducerDecoder", "decoder._target_="),
        ("joint", "num_extra_outputs", 5, r"joint.num_extra_outputs=5 needs a TDT loss"),
        ("joint.jointnet", "activation", "swish", "joint.jointnet.activation='swish' is not supported"),
        ("decoder.prednet", "rnn_hidden_size", 48, "decoder.prednet.rnn_hidden_size=48 differs from pred_hidden"),
        ("preprocessor", "exact_pad", True, "preprocessor.exact_pad=True is not supported"),
        ("preprocessor", "log_zero_guard_value", "huge", "preprocessor.log_zero_guard_value=.huge. is not supported"),
        ("loss", "loss_name", "multiblank_rnnt", "loss.loss_name='multiblank_rnnt' is neither a plain RNN-T loss"),
        ("tokenizer", "type", "wpe", "tokenizer.type='wpe'"),
    ],
)
def test_unsupported_config_names_the_key(tmp_path, section, key, value, message):
    path, _ = write_synthetic_nemo(tmp_path, config_edit=_edit(section, key, value))
    with pytest.raises(ValueError, match=message):
        import_nemo(path)


def test_the_rnnt_loss_options_become_the_models_lattice(tmp_path):
    """NeMo's clamp and fastemit_lambda are the model's lattice's (and the import's loss's)."""
    options = {"fastemit_lambda": 0.001, "clamp": 0.5}
    path, _ = write_synthetic_nemo(tmp_path, config_edit=_edit("loss", "warprnnt_numba_kwargs", options))
    imported = import_nemo(path)
    assert imported.model.lattice == RNNT(clamp=0.5, fastemit_lambda=0.001)
    assert imported.loss.lattice == imported.model.lattice and imported.loss_options == {}


def test_tensors_without_counterpart_are_reported(tmp_path):
    extra = {"decoder.prediction.norm.weight": torch.zeros(3)}  # e.g. a layer norm we have no module for
    path, reference = write_synthetic_nemo(tmp_path, extra_weights=extra)
    imported = import_nemo(path)
    assert imported.report.lost == {"decoder.prediction.norm.weight": "no counterpart in our model"}
    assert "decoder.prediction.norm.weight (no counterpart in our model)" in imported.report.summary()
    assert torch.equal(imported.model.joint.output.weight, reference.joint.output.weight)
    assert imported.auxiliary_ctc is None


def test_hybrid_ctc_decoder_becomes_the_auxiliary_ctc_head(tmp_path):
    from asr_plugin.training.ctc_auxiliary import AuxiliaryCTC

    generator = torch.Generator().manual_seed(3)
    weight, bias = torch.randn(41, 32, 1, generator=generator), torch.randn(41, generator=generator)  # NeMo: blank last
    ctc = {"ctc_decoder.decoder_layers.0.weight": weight, "ctc_decoder.decoder_layers.0.bias": bias}
    path, _ = write_synthetic_nemo(tmp_path, extra_weights=ctc)
    imported = import_nemo(path)
    assert not imported.report.lost
    head = imported.auxiliary_ctc
    assert torch.equal(head["output.weight"][0], weight[40, :, 0]) and torch.equal(head["output.bias"][0], bias[40])
    assert torch.equal(head["output.weight"][1:], weight[:40, :, 0]) and torch.equal(head["output.bias"][1:], bias[:40])

    model, auxiliary = nemo_transducer(path), AuxiliaryCTC(32, 41)
    apply_finetune(model, {"path": str(path), "strict": True, "new_vocabulary": False}, auxiliary_ctc=auxiliary)
    assert torch.equal(auxiliary.output.weight, head["output.weight"])
    assert torch.equal(auxiliary.output.bias, head["output.bias"])
    renewed = AuxiliaryCTC(32, 41)
    before = renewed.output.weight.clone()
    apply_finetune(nemo_transducer(path), {"path": str(path), "new_vocabulary": True}, auxiliary_ctc=renewed)
    assert torch.equal(renewed.output.weight, before)  # a new vocabulary: token-indexed, so not loaded


def test_interpolations_resolve_and_foreign_ones_are_left(tmp_path):
    def edit(config):
        config["encoder"]["feat_in"] = "${model.preprocessor.features}"  # as NeMo's example configs write it
        config["optim"]["sched"] = {"max_steps": "${trainer.max_steps}"}  # outside the model config

    path, reference = write_synthetic_nemo(tmp_path, config_edit=edit)
    imported = import_nemo(path)
    assert imported.model_kwargs["input_dim"] == 80
    assert imported.config["optim"]["sched"]["max_steps"] == "${trainer.max_steps}"


def test_bad_files_get_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        import_nemo(tmp_path / "missing.nemo")
    (tmp_path / "text.nemo").write_text("not a tar")
    with pytest.raises(ValueError, match="not a .nemo file"):
        import_nemo(tmp_path / "text.nemo")


def test_presets_are_what_the_importer_builds_from_nemo_configs():
    rows = {"small": (176, 4, 16, 320), "medium": (256, 4, 16, 640), "large": (512, 8, 17, 640)}
    for name, (d_model, heads, layers, hidden) in rows.items():
        config = nemo_config("conformer_transducer", "unused")
        config["encoder"].update(d_model=d_model, n_heads=heads, n_layers=layers, subsampling_conv_channels=-1)
        config["decoder"]["prednet"]["pred_hidden"] = hidden
        config["joint"]["jointnet"]["joint_hidden"] = hidden
        preset = OmegaConf.to_container(OmegaConf.load(REPO_ROOT / "conf" / "model" / f"{name}.yaml"))
        preset["subsampling_channels"] = preset["subsampling_channels"] or preset["d_model"]
        kwargs = transducer_kwargs(config)
        assert set(kwargs) - set(preset) == {"predictor_blank_as_pad"}  # NeMo's zero start embedding
        assert {k: preset[k] for k in kwargs if k in preset} == {k: v for k, v in kwargs.items() if k in preset}, name


def test_apply_finetune_loads_everything_but_the_new_vocabulary(archives):
    path, reference = archives["fast_conformer_transducer"]
    model = nemo_transducer(path, vocab_size=30)  # the recipe's own tokenizer: 30 ids
    embedding_before = model.predictor.embedding.weight.clone()
    loaded = apply_finetune(model, {"path": str(path), "format": "nemo", "strict": True, "new_vocabulary": True})
    assert "encoder.layers.1.self_attn.pos_bias_u" in loaded and "joint.encoder_proj.weight" in loaded
    assert not any(name.startswith(("predictor.embedding", "joint.output")) for name in loaded)
    assert torch.equal(
        model.encoder.layers[0].conv.depthwise_conv.weight, reference.encoder.layers[0].conv.depthwise_conv.weight
    )
    assert not torch.equal(model.predictor.embedding.weight, embedding_before)  # re-initialised, not loaded


def test_apply_finetune_detects_nemo_files_and_keeps_the_vocabulary(archives):
    path, reference = archives["conformer_transducer"]
    model = nemo_transducer(path)
    report = finetune_report(model, {"path": str(path), "new_vocabulary": False, "strict": True})
    assert report.clean and not report.excluded
    for key, value in reference.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    frozen = freeze_encoder_layers(model, 1)
    assert any(name.startswith("encoder.layers.0.") for name in frozen)
    assert not any(name.startswith("encoder.layers.1.") for name in frozen)
    assert any(name.startswith("encoder.subsampling.") for name in frozen)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", ["conformer_transducer", "fast_conformer_transducer"])
def test_imported_model_exports(archives, name, tmp_path):
    from asr_plugin.export import ExportedTransducer, export_transducer

    model = import_nemo(archives[name][0]).model
    export_transducer(model, tmp_path / "export", feature_dim=80)
    exported = ExportedTransducer.load(tmp_path / "export")
    features, lengths = torch.randn(3, 130, 80), torch.tensor([130, 77, 41])  # not the export example's shapes
    with torch.no_grad():
        eager, eager_lengths = model.encode(features, lengths)
        ported, ported_lengths = exported.encode(features, lengths)
    assert torch.equal(ported_lengths, eager_lengths)
    projected = model.joint.project_encoder(eager)
    for b, n in enumerate(eager_lengths.tolist()):
        torch.testing.assert_close(ported[b, :n], projected[b, :n], atol=1e-5, rtol=1e-5)


def test_gzip_compressed_archives_read_too(archives, tmp_path):
    import tarfile

    path, reference = archives["conformer_transducer"]
    compressed = tmp_path / "compressed.nemo"
    with tarfile.open(path) as source, tarfile.open(compressed, "w:gz") as target:
        for member in source.getmembers():
            target.addfile(member, source.extractfile(member))
    model = import_nemo(compressed).model
    assert torch.equal(model.encoder.layers[1].self_attn.pos_bias_v, reference.encoder.layers[1].self_attn.pos_bias_v)


def test_tdt_and_hybrid_tdt_ctc_import_with_their_own_loss(tmp_path):
    generator = torch.Generator().manual_seed(4)
    ctc = {
        "ctc_decoder.decoder_layers.0.weight": torch.randn(41, 40, 1, generator=generator),
        "ctc_decoder.decoder_layers.0.bias": torch.randn(41, generator=generator),
    }
    path, reference = write_synthetic_nemo(tmp_path, "fast_conformer_tdt", extra_weights=ctc)
    imported = import_nemo(path)
    assert imported.model.lattice == TDT((0, 1, 2, 3, 4), 0.05) and imported.model.joint.num_extra_outputs == 5
    assert imported.model_kwargs["lattice"] == {
        "kind": "tdt",
        "durations": [0, 1, 2, 3, 4],
        "sigma": 0.05,
        "clamp": None,
    }
    assert imported.loss_options == {"omega": 0.0} and imported.loss.lattice is imported.model.lattice
    for key, value in reference.state_dict().items():
        assert torch.equal(imported.model.state_dict()[key], value), key
    assert imported.auxiliary_ctc["output.weight"].shape == (41, 40) and not imported.report.lost


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["joint"].update(num_extra_outputs=4), r"num_extra_outputs=4 but loss.tdt_kwargs.durations"),
        (lambda c: c["decoding"].update(model_type="rnnt"), "do not decode the TDT loss' durations"),
        (
            lambda c: c["loss"]["tdt_kwargs"].update(fastemit_lambda=0.01),
            "tdt_kwargs.fastemit_lambda=0.01: our TDT loss has no FastEmit",
        ),
    ],
)
def test_inconsistent_tdt_configs_are_refused(tmp_path, edit, message):
    path, _ = write_synthetic_nemo(tmp_path, "fast_conformer_tdt", config_edit=edit)
    with pytest.raises(ValueError, match=message):
        import_nemo(path)
