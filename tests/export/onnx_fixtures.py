"""Sizes and data settings shared by the ONNX export tests, and the streaming export's tiny model and runners (a module of
its own so test files import it by name)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tiny_models import CharTokenizer, streaming_encoder

from asr_plugin.export.sherpa_decode import onnx_metadata
from asr_plugin.export.sherpa_online_decode import sherpa_windows
from asr_plugin.losses import lattice_from_record
from asr_plugin.models import Joint, LSTMPredictor, Transducer

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


class LetterPieces(CharTokenizer):
    """CharTokenizer with SentencePiece-style pieces: id k >= 1 is "\u2581" + its letter."""

    def id_to_piece(self, token_id: int) -> str:
        return "\u2581" + self.decode([token_id])


# the streaming export's tests: the tiny cache-aware model's vocabulary, and sherpa-onnx's encoder caches
VOCAB = 7
CACHES = ("cache_last_channel", "cache_last_time", "cache_last_channel_len")


def streaming_transducer(style="chunked_limited", contexts=((4, 0), (4, 1), (4, 3)), lattice=None, **options):
    """A tiny cache-aware transducer (`streaming_encoder`, an LSTM predictor and a joint) with random weights."""
    encoder = streaming_encoder(style, contexts, **options)
    lattice = lattice_from_record(lattice or {"kind": "rnnt"})
    torch.manual_seed(1)
    joint = Joint(encoder.output_dim, 12, 10, VOCAB, num_extra_outputs=lattice.num_extra_outputs)
    return Transducer(encoder, LSTMPredictor(VOCAB, 8, 12), joint, lattice).eval()


def sherpa_encoder_run(path, features: list[np.ndarray], starts: list[int]) -> list[list[tuple[np.ndarray, dict]]]:
    """Each stream's (T, F) features through encoder.onnx as sherpa-onnx runs it: its windows while more frames
    than a window's end are there, stream b from call ``starts[b]`` on, the streams with a window ready batched
    into one call. Returns, per stream, each window's (T_out, H) frames and its next caches."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    meta = onnx_metadata(path)
    window, shift = int(meta["window_size"]), int(meta["chunk_shift"])
    dims = {name: [int(meta[f"{name}_dim{i}"]) for i in (1, 2, 3)] for name in CACHES[:2]}
    caches = [
        {
            "cache_last_channel": np.zeros((1, *dims["cache_last_channel"]), np.float32),
            "cache_last_time": np.zeros((1, *dims["cache_last_time"]), np.float32),
            "cache_last_channel_len": np.zeros(1, np.int64),
        }
        for _ in features
    ]
    counts = [sherpa_windows(len(x), window, shift) for x in features]
    results: list[list[tuple[np.ndarray, dict]]] = [[] for _ in features]
    for call in range(max(start + count for start, count in zip(starts, counts))):
        rows = [b for b, (start, count) in enumerate(zip(starts, counts)) if start <= call < start + count]
        windows = [(call - starts[b]) * shift for b in rows]
        inputs = {
            "audio_signal": np.stack([features[b][k : k + window].T for b, k in zip(rows, windows)]),
            "length": np.full(len(rows), window, np.int64),
            **{name: np.concatenate([caches[b][name] for b in rows]) for name in CACHES},
        }
        frames, lengths, *next_caches = session.run(None, inputs)
        for i, b in enumerate(rows):
            caches[b] = {name: cache[i : i + 1] for name, cache in zip(CACHES, next_caches)}
            assert lengths[i] == frames.shape[2]
            results[b].append((frames[i].T, caches[b]))
    return results


@torch.no_grad()
def step_api_run(model, context, features: np.ndarray, windows: int) -> list[tuple[np.ndarray, dict]]:
    """The step API on the features from their first frame on, one whole chunk per window: each step's projected
    frames and its caches in sherpa's layout (batch first)."""
    encoder = model.encoder
    setup = encoder.streaming_setup(context)
    x = torch.from_numpy(features)
    state, done, steps = encoder.initial_state(1, setup), 0, []
    for k in range(windows):
        size = setup.first_chunk_frames if k == 0 else setup.chunk_frames
        frames, counts, state = encoder.step(x[None, done : done + size], torch.tensor([size]), state, setup)
        done += size
        caches = {
            "cache_last_channel": state.cache_last_channel.transpose(0, 1).numpy(),
            "cache_last_time": state.cache_last_time.transpose(0, 1).numpy(),
            "cache_last_channel_len": state.cache_last_channel_len.numpy(),
        }
        steps.append((model.joint.encoder_proj(frames[0, : int(counts[0])]).numpy(), caches))
    return steps


def largest_difference(sherpa, ours) -> float:
    """The largest absolute difference of frames and float caches over two runs of the same windows (of
    cache_last_time, the convolution's frames: the export's carried features follow them)."""
    assert len(sherpa) == len(ours) > 2
    largest = 0.0
    for (frames, caches), (want_frames, want_caches) in zip(sherpa, ours):
        assert frames.shape == want_frames.shape
        assert np.array_equal(caches["cache_last_channel_len"], want_caches["cache_last_channel_len"])
        for value, want in ((frames, want_frames), *((caches[n], want_caches[n]) for n in CACHES[:2])):
            largest = max(largest, float(np.abs(value[..., : want.shape[-1]] - want).max()))
    return largest
