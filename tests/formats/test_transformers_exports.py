"""A transformers Parakeet directory with its tokenizer.json, read by the seam, exports to `.nemo` (read back:
the same weights, tokenizer and front end) and to sherpa-onnx (its transcripts equal our greedy search on its
features); the tokenizer's ids are transformers' (their token k is our k + 1)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers.models.parakeet")

from transformers import AutoTokenizer  # noqa: E402
from transformers_models import decodable_model, save_directory, sentencepiece_of  # noqa: E402

from asr_plugin.formats import export_nemo, read_model  # noqa: E402

WORDS = ["abba", "cab", "dad", "bead", "ace", "deed", "cede", "bad", "fade", "faced"]
LINES = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(5)) for i in range(200)]
PIECES = 19  # the model's vocabulary: these pieces and the blank


@pytest.fixture(scope="module", params=["rnnt", "tdt"])
def directory(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    save_directory(decodable_model(request.param, vocab_size=PIECES + 1), path, sentencepiece_of(LINES, PIECES))
    return path


def test_the_tokenizer_encodes_as_transformers_does(directory):
    tokenizer = read_model(directory).require_tokenizer()
    theirs = AutoTokenizer.from_pretrained(directory)
    for text in ["abba cab", "fade faced deed", "dad"]:
        assert tokenizer.encode(text) == [i + 1 for i in theirs(text)["input_ids"]]
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_exports_to_nemo_and_back(directory, tmp_path):
    loaded = read_model(directory)
    again = read_model(export_nemo(loaded, tmp_path / "parakeet.nemo"))
    assert again.tokenizer == loaded.tokenizer and again.frontend_spec["kind"] == "nemo"
    state, back = loaded.model.state_dict(), again.model.state_dict()
    assert state.keys() == back.keys() and all(torch.equal(state[k], back[k]) for k in state)


@pytest.mark.slow
def test_exports_to_sherpa_onnx_which_transcribes_as_our_greedy_search(directory, tmp_path):
    pytest.importorskip("sherpa_onnx")
    from asr_plugin.export import export_onnx
    from asr_plugin.export.sherpa_decode import greedy_on_sherpa_features, sherpa_recognizer, sherpa_transcribe

    loaded = read_model(directory)
    export_onnx(loaded.model, loaded.require_frontend_spec(), loaded.tokenizer, tmp_path / "onnx")
    generator = torch.Generator().manual_seed(0)
    waveforms = [0.1 * torch.randn(samples, generator=generator).numpy() for samples in (8000, 12000, 16000, 6000)]
    transcripts = sherpa_transcribe(sherpa_recognizer(tmp_path / "onnx"), waveforms)
    ours = [
        loaded.tokenizer.decode(greedy_on_sherpa_features(loaded.model, loaded.frontend_spec, w)) for w in waveforms
    ]
    assert [" ".join(t.split()) for t in transcripts] == [" ".join(t.split()) for t in ours]
    assert sum(len(t) for t in ours) > 0


def test_written_with_another_directorys_processor_is_refused(directory, tmp_path):
    from asr_plugin.formats.transformers_parakeet import write_parakeet_directory

    other = tmp_path / "other"
    other.mkdir()
    kind = read_model(directory).architecture["lattice"]["kind"]
    lines = [line.replace("a", "e") + " fee" for line in LINES]
    save_directory(decodable_model(kind, vocab_size=PIECES + 1), other, sentencepiece_of(lines, PIECES))
    with pytest.raises(ValueError, match="its tokenizer is not .*other/tokenizer.json's"):
        write_parakeet_directory(read_model(directory), tmp_path / "out", processor_from=other)
    assert not (tmp_path / "out").exists()
