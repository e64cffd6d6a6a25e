"""Decoding an `export_onnx` directory with sherpa-onnx's stock Python API, and the same search in this project.

`sherpa_recognizer` builds ``sherpa_onnx.OfflineRecognizer.from_transducer(...)`` exactly as a user would;
`greedy_on_sherpa_features` runs the model's own `greedy_search` on the features sherpa-onnx computes
(kaldi-native-fbank with `KALDI_FBANK_OPTIONS`, through the same `encoder_input` module the encoder holds),
which separates what the export does from what the feature difference does; for a model trained with the
front end of kind "sherpa" there is no difference beyond float32 rounding.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asr_plugin.decoding import greedy_search
from asr_plugin.export.feature_adapter import encoder_input
from asr_plugin.export.onnx_export import SHERPA_MAX_SYMBOLS, tdt_durations
from asr_plugin.frontend.sherpa import KALDI_FBANK_OPTIONS, SHERPA_SAMPLE_RATE
from asr_plugin.models import Transducer


def sherpa_recognizer(export_dir: str | os.PathLike, int8: bool = False, num_threads: int = 1):
    """sherpa-onnx's recogniser of an export directory (greedy search; the ``*.int8.onnx`` files with `int8`)."""
    import sherpa_onnx

    export_dir = Path(export_dir)
    suffix = ".int8.onnx" if int8 else ".onnx"
    feature_dim = int(onnx_metadata(export_dir / f"encoder{suffix}")["feat_dim"])
    return sherpa_onnx.OfflineRecognizer.from_transducer(
        encoder=str(export_dir / f"encoder{suffix}"),
        decoder=str(export_dir / f"decoder{suffix}"),
        joiner=str(export_dir / f"joiner{suffix}"),
        tokens=str(export_dir / "tokens.txt"),
        num_threads=num_threads,
        sample_rate=SHERPA_SAMPLE_RATE,
        feature_dim=feature_dim,
        model_type="nemo_transducer",
        decoding_method="greedy_search",
    )


def onnx_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The metadata of the ONNX file `path` (what sherpa-onnx reads from an encoder)."""
    import onnx

    return {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}


def sherpa_transcribe(recognizer, waveforms: Sequence[np.ndarray]) -> list[str]:
    """sherpa-onnx's transcripts of 16 kHz float waveforms in [-1, 1], decoded as one batch."""
    streams = []
    for waveform in waveforms:
        stream = recognizer.create_stream()
        stream.accept_waveform(SHERPA_SAMPLE_RATE, np.ascontiguousarray(waveform, dtype=np.float32))
        streams.append(stream)
    recognizer.decode_streams(streams)
    return [stream.result.text for stream in streams]


def sherpa_features(waveform: np.ndarray, num_bins: int, normalize_type: str = "") -> torch.Tensor:
    """(T, F) the features sherpa-onnx computes for a NeMo transducer: kaldi-native-fbank's log filterbank, then
    with `normalize_type` "per_feature" (the encoder metadata's) sherpa-onnx 2.0.1's standardisation of each
    bin (``NemoNormalizePerFeature``, fixed in 1.13.5 by its PR 3857: float32, two-pass population variance,
    (x - mean) / (std + 1e-5)). This project's exports write "" (raw) and normalise inside the encoder."""
    import kaldi_native_fbank as knf

    options = knf.FbankOptions()
    for group, values in KALDI_FBANK_OPTIONS.items():
        for key, value in values.items():
            setattr(getattr(options, group), key, value)
    options.mel_opts.num_bins = num_bins
    fbank = knf.OnlineFbank(options)
    fbank.accept_waveform(SHERPA_SAMPLE_RATE, np.asarray(waveform, dtype=np.float32).tolist())
    fbank.input_finished()
    features = np.stack([fbank.get_frame(i) for i in range(fbank.num_frames_ready)]).astype(np.float32)
    if normalize_type == "per_feature":
        mean = features.mean(0)
        std = np.sqrt(np.maximum(np.square(features - mean).mean(0), 0.0))
        features = (features - mean) / (std + np.float32(1e-5))
    elif normalize_type:
        raise ValueError(f"normalize_type={normalize_type!r}: sherpa-onnx implements only 'per_feature' and ''")
    return torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))


@torch.no_grad()
def greedy_on_sherpa_features(model: Transducer, frontend_spec: Mapping[str, Any], waveform: np.ndarray) -> list[int]:
    """The tokens `greedy_search` gives on sherpa-onnx's features of `waveform` (what the float export should give)."""
    adapter = encoder_input(frontend_spec)
    features = sherpa_features(waveform, adapter.sherpa_bins)  # (T, F_s), raw: normalize_type ""
    lengths = torch.tensor([features.shape[0]])
    encoder_out, encoder_lengths = model.encode(adapter(features.T[None], lengths), lengths)
    symbols = SHERPA_MAX_SYMBOLS["tdt" if tdt_durations(model) else "rnnt"]
    return greedy_search(model, encoder_out, encoder_lengths, max_symbols_per_frame=symbols)[0].tokens


@torch.no_grad()
def greedy_on_training_features(model: Transducer, frontend: torch.nn.Module, waveform: np.ndarray) -> list[int]:
    """The tokens `greedy_search` gives on the training front end's features of `waveform` (the recipe's
    transcript), with sherpa-onnx's cap on tokens per frame."""
    audio = torch.as_tensor(np.asarray(waveform, dtype=np.float32))[None]
    features, lengths = frontend(audio, torch.tensor([audio.shape[1]]))
    encoder_out, encoder_lengths = model.encode(features, lengths)
    symbols = SHERPA_MAX_SYMBOLS["tdt" if tdt_durations(model) else "rnnt"]
    return greedy_search(model, encoder_out, encoder_lengths, max_symbols_per_frame=symbols)[0].tokens
