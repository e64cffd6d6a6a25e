"""`export_nemo` without NeMo: the written `.nemo` imports back as the exported model, tokenizer and front end
(both tokenizer conventions, hybrid CTC head), and what NeMo cannot express is refused by name.

tests/finetune/test_nemo_export_restore.py restores the files with NeMo itself (-m nemo).
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from nemo_models import OUR_FRONTEND, our_model_and_tokenizer, write_synthetic_nemo

from asr_plugin.formats import LoadedModel, Settings, export_nemo
from asr_plugin.formats.nemo import import_nemo
from asr_plugin.losses import TDT
from asr_plugin.models import build_transducer


def assert_same_weights(model, imported_model) -> None:
    ours, theirs = model.state_dict(), imported_model.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key


def test_an_imported_nemo_model_exports_to_the_same_archive_contents(tmp_path):
    path, reference = write_synthetic_nemo(tmp_path)
    imported = import_nemo(path)
    exported = export_nemo(imported, tmp_path / "again.nemo")
    again = import_nemo(exported)
    assert_same_weights(reference, again.model)
    assert again.model_kwargs == imported.model_kwargs
    assert again.tokenizer == imported.tokenizer and again.frontend_spec == imported.frontend_spec
    assert again.auxiliary_ctc is None
    with tarfile.open(exported) as tar:  # NeMo's layout, readable by others
        assert sorted(m.name for m in tar.getmembers()) == sorted(
            f"./{name}"
            for name in ("model_config.yaml", "model_weights.ckpt", "tokenizer.model", "vocab.txt", "tokenizer.vocab")
        )
        assert all(m.mode == 0o644 for m in tar.getmembers())
    assert not list(tmp_path.glob(".*tmp*"))  # written atomically: no temporary file left


def test_a_hybrid_exports_its_ctc_head(tmp_path):
    generator = torch.Generator().manual_seed(3)
    ctc = {
        "ctc_decoder.decoder_layers.0.weight": torch.randn(41, 32, 1, generator=generator),
        "ctc_decoder.decoder_layers.0.bias": torch.randn(41, generator=generator),
    }
    path, _ = write_synthetic_nemo(tmp_path, extra_weights=ctc)
    imported = import_nemo(path)
    again = import_nemo(export_nemo(imported, tmp_path / "hybrid.nemo"))
    assert again.config["target"].endswith("EncDecHybridRNNTCTCBPEModel")
    for key, value in imported.auxiliary_ctc.items():
        assert torch.equal(again.auxiliary_ctc[key], value), key


def test_our_own_tokenizer_gets_a_never_emitted_nemo_class(tmp_path):
    model, architecture, tokenizer = our_model_and_tokenizer(tmp_path)
    source = LoadedModel(model, architecture, tokenizer, OUR_FRONTEND, Settings({"max_symbols_per_frame": 5}))
    exported = export_nemo(source, tmp_path / "ours.nemo")
    again = import_nemo(exported)
    # NeMo's classes are SentencePiece's ids; class 0 (our blank's control piece) is one class more than we have
    assert again.model.vocab_size == model.vocab_size + 1
    assert again.config["decoding"]["greedy"]["max_symbols"] == 5
    nemo_only = 1  # our id k is the re-imported model's id k + 1; its id 1 is NeMo's class 0
    output = again.model.joint.output
    assert torch.all(output.weight[nemo_only] == 0) and float(output.bias[nemo_only].detach()) == -1e4
    torch.testing.assert_close(
        output.weight[[0] + list(range(2, output.weight.shape[0]))], model.joint.output.weight, rtol=0, atol=0
    )
    features, lengths = torch.randn(2, 70, 64), torch.tensor([70, 45])
    with torch.no_grad():
        ours = model.joint(*_encode_and_predict(model, features, lengths)).log_softmax(-1)
        theirs = again.model.joint(*_encode_and_predict(again.model, features, lengths, shift=1)).log_softmax(-1)
    torch.testing.assert_close(theirs[..., [0] + list(range(2, theirs.shape[-1]))], ours, rtol=1e-5, atol=1e-5)
    for key, value in OUR_FRONTEND["options"].items():
        assert again.frontend_spec["options"][key] == value, key


def _encode_and_predict(model, features, lengths, shift=0):
    encoded, _ = model.encode(features, lengths)
    targets = torch.tensor([[1, 5, 2], [3, 3, 0]])
    return encoded, model.predictor(torch.where(targets > 0, targets + shift, 0))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"attention": "mha", "encoder_bias": True}, "attention='mha'"),
        ({"subsampling": "conv2d"}, "subsampling='conv2d'"),
        ({"predictor_embed_dim": 16}, "predictor_embed_dim=16 differs from predictor_dim=20"),
        ({"joint_activation": "gelu"}, "joint_activation='gelu'"),
    ],
)
def test_what_nemo_cannot_express_is_refused(tmp_path, change, message):
    _, architecture, tokenizer = our_model_and_tokenizer(tmp_path)
    architecture = {**architecture, **change}
    source = LoadedModel(build_transducer(**architecture), architecture, tokenizer, OUR_FRONTEND)
    with pytest.raises(ValueError, match=f"NeMo cannot express .*{message}"):
        export_nemo(source, tmp_path / "x.nemo")
    assert not (tmp_path / "x.nemo").exists()


def test_the_recipe_front_end_is_refused(tmp_path):
    model, architecture, tokenizer = our_model_and_tokenizer(tmp_path)
    logmel = {"kind": "logmel", "options": {}, "mean": [0.0] * 80, "std": [1.0] * 80}
    with pytest.raises(ValueError, match="front end of kind 'logmel'") as refusal:
        export_nemo(LoadedModel(model, architecture, tokenizer, logmel), tmp_path / "x.nemo")
    advice = re.search(r"train with (\S+),", str(refusal.value)).group(1)  # a valid override of train.py
    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[2] / "conf"), version_base="1.3"):
        assert compose("train", overrides=[advice]).data.frontend == "nemo"


def test_a_tdt_model_exports_with_its_durations_and_loss(tmp_path):
    path, reference = write_synthetic_nemo(tmp_path, "fast_conformer_tdt")
    imported = import_nemo(path)
    again = import_nemo(export_nemo(imported, tmp_path / "tdt.nemo"))
    assert again.model.lattice == imported.model.lattice == TDT((0, 1, 2, 3, 4), 0.05)
    assert again.loss_options == imported.loss_options
    assert again.config["decoding"]["model_type"] == "tdt" and again.config["joint"]["num_extra_outputs"] == 5
    assert_same_weights(reference, again.model)


def test_a_model_back_from_a_nemo_exports_for_sherpa_onnx(tmp_path):
    """Our model through export_nemo and back keeps this project's blank piece as a token of its own (NeMo's class 0)
    beside NeMo's blank; scripts/export_onnx.py writes it to tokens.txt under another name than sherpa-onnx's
    blank "<blk>", and sherpa-onnx's offline recogniser loads the export (it checks the tokens against the model)."""
    pytest.importorskip("sherpa_onnx")
    import importlib

    from asr_plugin.export.sherpa_decode import sherpa_recognizer, sherpa_transcribe
    from asr_plugin.export.sherpa_tokens import RENAMED_BLANK_PIECE

    model, architecture, tokenizer = our_model_and_tokenizer(tmp_path)
    nemo_path = export_nemo(LoadedModel(model, architecture, tokenizer, OUR_FRONTEND), tmp_path / "ours.nemo")
    again = import_nemo(nemo_path).tokenizer
    assert again.id_to_piece(1) == "<blk>" and again.blank_id == 0
    assert importlib.import_module("export_onnx").main([str(nemo_path), str(tmp_path / "onnx")]) == 0
    symbols = [line.rsplit(" ", 1)[0] for line in (tmp_path / "onnx" / "tokens.txt").read_text().splitlines()]
    wanted = [again.id_to_piece(i) for i in range(1, again.vocab_size)]
    assert symbols == [RENAMED_BLANK_PIECE, *wanted[1:], "<blk>"]
    recognizer = sherpa_recognizer(tmp_path / "onnx")
    assert len(sherpa_transcribe(recognizer, [np.zeros(16000, np.float32)])) == 1
