"""What the sherpa-onnx export refuses, by name, and its tokens.txt and metadata."""

from __future__ import annotations

import pytest
import torch
from onnx_fixtures import LetterPieces
from tiny_models import tiny_transducer
from torch import nn

from asr_plugin.export.feature_adapter import (
    SherpaFeatureAdapter,
    SherpaFeatures,
    check_sherpa_compatible,
    encoder_input,
)
from asr_plugin.export.onnx_export import check_exportable, encoder_metadata
from asr_plugin.export.sherpa_tokens import sherpa_token_lines
from asr_plugin.models import Joint

LOGMEL = {"kind": "logmel", "options": {"num_mel_bins": 16}, "mean": [0.0] * 16, "std": [1.0] * 16}


class GRUPredictor(nn.Module):
    blank_id = 0


class GatedJoint(Joint):
    def combine(self, encoder_proj, predictor_proj):
        return self.output(torch.sigmoid(encoder_proj) * predictor_proj)


def test_other_predictors_joints_and_durations_are_refused_by_name():
    model = tiny_transducer()
    check_exportable(model)
    model.predictor = GRUPredictor()
    with pytest.raises(ValueError, match="predictor GRUPredictor"):
        check_exportable(model)
    model = tiny_transducer()
    model.joint.__class__ = GatedJoint
    with pytest.raises(ValueError, match="joint GatedJoint"):
        check_exportable(model)
    model = tiny_transducer(lattice={"kind": "tdt", "durations": [0, 1, 3]})
    with pytest.raises(ValueError, match=r"TDT durations \[0, 1, 3\]"):
        check_exportable(model)
    check_exportable(tiny_transducer(lattice={"kind": "tdt", "durations": [0, 1, 2]}))


def test_front_ends_sherpa_cannot_stand_in_for_are_refused_by_option():
    with pytest.raises(ValueError, match="sample_rate=8000"):
        check_sherpa_compatible({"kind": "nemo", "options": {"sample_rate": 8000}})
    with pytest.raises(ValueError, match="hop of 320"):
        check_sherpa_compatible({"kind": "nemo", "options": {"hop_length": 320}})
    with pytest.raises(ValueError, match="mag_power=1.0"):
        check_sherpa_compatible({"kind": "nemo", "options": {"mag_power": 1.0}})
    with pytest.raises(ValueError, match="no mean/std"):
        check_sherpa_compatible({"kind": "logmel", "options": {}})
    with pytest.raises(ValueError, match="kind 'sherpa' computes sherpa-onnx's own features"):
        check_sherpa_compatible({"kind": "sherpa"})
    with pytest.raises(ValueError, match="kind 'nemo' is not sherpa-onnx's"):
        SherpaFeatures({"kind": "nemo"})


def test_the_sherpa_front_end_gets_no_adapter_but_its_own_normalisation():
    exact = encoder_input({"kind": "sherpa", "options": {"num_mel_bins": 16}})
    assert isinstance(exact, SherpaFeatures) and exact.sherpa_bins == 16
    assert isinstance(encoder_input(LOGMEL), SherpaFeatureAdapter)
    features = torch.randn(2, 16, 5) * 3 + 7  # sherpa's raw layout (B, F, T)
    lengths = torch.tensor([5, 3])
    raw = encoder_input({"kind": "sherpa", "options": {"num_mel_bins": 16, "normalize": None}})(features, lengths)
    assert torch.equal(raw[0], features[0].T) and torch.equal(raw[1, :3], features[1, :, :3].T)
    assert bool((raw[1, 3:] == 0).all())
    normalised = exact(features, lengths)
    for b, n in enumerate(lengths.tolist()):
        x = features[b, :, :n].T.double()
        expected = (x - x.mean(0)) / (x.std(0, unbiased=False) + 1e-5)  # sherpa's per_feature
        assert torch.allclose(normalised[b, :n].double(), expected, atol=1e-5)
        assert bool((normalised[b, n:] == 0).all())
    constant = torch.full((1, 16, 7), -15.942385)  # a bin at the log floor in every frame
    assert bool((exact(constant, torch.tensor([7])) == 0).all())
    meta = encoder_metadata(tiny_transducer(), 16, adapted=False)
    assert meta["normalize_type"] == "" and "sherpa-onnx's own features" in meta["comment"]


def test_tokens_put_the_blank_last_and_metadata_counts_no_blank():
    lines = sherpa_token_lines(LetterPieces(7))
    assert lines == [f"\u2581{letter} {i}" for i, letter in enumerate("abcdef")] + ["<blk> 6"]
    meta = encoder_metadata(tiny_transducer(), feature_dim=16)
    assert (meta["vocab_size"], meta["subsampling_factor"], meta["normalize_type"]) == ("6", "4", "")
    assert (
        "tdt" not in meta["url"]
        and "tdt" in encoder_metadata(tiny_transducer(lattice={"kind": "tdt", "durations": [0, 1]}), 16)["url"]
    )


def test_the_adapter_maps_a_flat_spectrum_close_to_the_training_filters_energies():
    """White noise's mel energies are the filters' weighted areas: sherpa's mapped must land near the training
    front end's (float64 sums of the two filter banks written out here, not the adapter's fit)."""
    import torchaudio

    from asr_plugin.frontend.sherpa import povey_window

    adapter = SherpaFeatureAdapter(LOGMEL)
    bins = torch.arange(257, dtype=torch.float64) * 16000 / 512
    gain = 1 - 2 * 0.97 * torch.cos(2 * torch.pi * bins / 16000) + 0.97**2
    povey = povey_window().pow(2).sum()
    hann = torch.hann_window(400, periodic=True, dtype=torch.float64).pow(2).sum()
    sherpa = (
        torchaudio.functional.melscale_fbanks(257, 0, 7600, 16, 16000, norm="slaney", mel_scale="slaney").double()
        * (gain * povey)[:, None]
    ).sum(0)  # (16,) sherpa's mel energies of a flat spectrum
    ours = (torchaudio.functional.melscale_fbanks(257, 0, 8000, 16, 16000).double() * hann).sum(0)
    features = adapter(sherpa.log().float()[None, :, None], torch.tensor([1]))[0, 0]  # (16,) = log of mapped
    assert torch.allclose(features.double()[:-1], ours.log()[:-1], atol=0.25)  # the top bin lies above 7600 Hz
