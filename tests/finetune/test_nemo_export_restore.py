"""`export_nemo` files restored by NeMo 3.0 itself (``ASRModel.restore_from``): NeMo's weights come back exactly,
and NeMo transcribes with our greedy text (skipped without NeMo)."""

from __future__ import annotations

import pytest
import soundfile
import torch

pytest.importorskip("nemo.collections.asr")
pytestmark = pytest.mark.nemo

from nemo.collections.asr.models import ASRModel  # noqa: E402
from nemo_models import OUR_FRONTEND, our_model_and_tokenizer  # noqa: E402

from asr_plugin.audio import load_audio  # noqa: E402
from asr_plugin.decoding import greedy_search  # noqa: E402
from asr_plugin.formats import LoadedModel, Settings, export_nemo  # noqa: E402
from asr_plugin.formats.nemo import import_nemo  # noqa: E402
from benchmarks.nemo_compare import compare_file, speech_like_audio  # noqa: E402
from benchmarks.nemo_examples import save_example_model  # noqa: E402


def restore(path) -> ASRModel:
    return ASRModel.restore_from(str(path), map_location="cpu").eval()


@pytest.mark.parametrize("name", ["conformer_transducer", "fast_conformer_transducer", "fast_conformer_tdt"])
def test_nemo_weights_round_trip_exactly(tmp_path, name):
    original = save_example_model(name, tmp_path)
    exported = export_nemo(import_nemo(original), tmp_path / "exported.nemo")
    before, after = restore(original).state_dict(), restore(exported).state_dict()
    assert before.keys() == after.keys()
    for key in before:
        if key != "preprocessor.featurizer.fb":  # librosa's filters in NeMo's file, torchaudio's in ours
            assert torch.equal(before[key], after[key]), key
    torch.testing.assert_close(
        after["preprocessor.featurizer.fb"], before["preprocessor.featurizer.fb"], rtol=1e-5, atol=1e-7
    )
    differences = compare_file(exported)  # NeMo's restored model against our import of the export
    assert differences["encoder"] <= 1e-4 and differences["greedy_tokens"] > 0
    assert differences["greedy_tokens_equal"] and differences["greedy_text_equal"]


def test_our_own_model_transcribes_the_same_in_nemo(tmp_path):
    model, architecture, tokenizer = our_model_and_tokenizer(tmp_path)
    with torch.no_grad():  # a sharper joint, so that random weights emit tokens
        model.joint.output.weight.mul_(8.0)
    source = LoadedModel(model, architecture, tokenizer, OUR_FRONTEND, Settings({"max_symbols_per_frame": 4}))
    nemo = restore(export_nemo(source, tmp_path / "ours.nemo"))
    audio, lengths = speech_like_audio([20000, 13000, 7000], seed=4)
    paths = [tmp_path / f"{b}.wav" for b in range(len(lengths))]  # the user's path: audio files, 16-bit PCM
    for path, wave, n in zip(paths, audio, lengths.tolist()):
        soundfile.write(str(path), wave[:n].numpy(), 16000, subtype="PCM_16")
    waves = [load_audio(path) for path in paths]
    with torch.no_grad():
        frontend = import_nemo(tmp_path / "ours.nemo").frontend
        features = frontend(
            torch.nn.utils.rnn.pad_sequence(waves, batch_first=True), torch.tensor([len(w) for w in waves])
        )
        hyps = greedy_search(model, *model.encode(*features), 4, tokenizer)
    texts = nemo.transcribe([str(path) for path in paths], batch_size=3, verbose=False)
    texts = texts[0] if isinstance(texts, tuple) else texts
    assert sum(len(h.tokens) for h in hyps) > 10
    assert [h.text for h in texts] == [h.text for h in hyps]
    assert [list(map(int, h.y_sequence)) for h in texts] == [h.tokens for h in hyps]  # NeMo's classes = our ids
