"""Cache-aware streaming transcripts of one ``.nemo`` model by NeMo and by this project, side by side (the NeMo half
needs NeMo): what tests/finetune/test_nemo_streaming.py compares.

NeMo's side is NeMo's own cache-aware inference as its ``examples/asr/asr_cache_aware_streaming/
speech_to_text_cache_aware_streaming_infer.py`` runs it on one audio file (``--audio_file``, with
``--compare_vs_offline``): the model's lookahead set with ``encoder.set_default_att_context_size``, greedy_batch
decoding with ``max_symbols`` 10, a ``CacheAwareStreamingAudioBuffer`` (the model's preprocessor with dither 0 on the
whole file, no online normalisation, no ``pad_and_drop_preencoded``) whose chunks go through
``conformer_stream_step`` with the caches, the previous hypotheses and ``keep_all_outputs`` at the buffer's end.
Beside it, NeMo's two whole-utterance decodings under the same context (``conformer_stream_step`` on all the
features at once): of the buffer's features (what the example's ``--compare_vs_offline`` prints) and of the
preprocessor's valid frames (what NeMo's ``transcribe`` and training see). They differ because the buffer takes
the preprocessor's output *tensor* as the stream, one frame longer than the valid length the preprocessor returns
(``append_processed_signal`` counts ``processed_signal.size(-1)``; the extra frame is the padding value 0). And
NeMo's streaming departs from its own whole-utterance result at a stream's edges: its buffer stops before a last
chunk shorter than the subsampling factor (only the first ``fed`` feature frames are fed), and it pads the
pre-encode cache of the second chunk with zero features when the first chunk was shorter than that cache
(``zero_padded``: lookahead 0; docs/streaming.md, "Exactness").

Our side is this project's as a user runs it: ``scripts/transcribe.py --streaming`` on the ``.nemo``
(`command_line_transcripts`: the lookahead given as ``--att-context-size L,R``, greedy search with the file's
``max_symbols``, no endpointing, as NeMo's example has none; the audio read from disk in 100 ms pieces, the
online features of the model's own front end, NeMo's preprocessor with ``normalize: NA`` streamed exactly by
`asr_plugin.frontend.online.stft`). Beside it, the same through the Python API (`our_streaming_transcripts`): the
model read through the seam (`asr_plugin.formats.read_model`), its front end on the whole file, as NeMo's buffer
computes it, and the features fed in pieces to a `StreamingRecognizer` over a `CacheAwareEncoder` with the same
lookahead, all utterances as one batch of streams; "offline" is the masked whole-utterance forward under the
context and `greedy_search`. Given the frames NeMo's buffer fed instead (``frames=nemo.fed``), ours decodes what
NeMo's streaming decoded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from asr_plugin.audio import load_audio
from asr_plugin.decoding import CacheAwareEncoder, Hypothesis, Segment, StreamingRecognizer, greedy_search
from asr_plugin.formats import LoadedModel
from asr_plugin.frontend.spec import build_frontend

MAX_SYMBOLS = 10  # what NeMo's cache-aware streaming example sets for RNN-T decoding
PIECE_FRAMES = 10  # our side takes 100 ms of features at a time
TRANSCRIBE = Path(__file__).resolve().parents[1] / "transcribe.py"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Transcripts:
    """Our transcripts of the utterances, in order: streamed chunk by chunk, and of the whole-utterance forward
    under the same context."""

    streaming: list[str]
    offline: list[str]


@dataclass
class NemoTranscripts:
    """NeMo's transcripts of the utterances, in order (see the module docstring).

    Attributes:
        streaming: ``conformer_stream_step`` fed by the ``CacheAwareStreamingAudioBuffer``.
        buffer_offline: the buffer's features decoded at once (one padding frame more than the valid ones).
        offline: the preprocessor's valid frames decoded at once: NeMo's own whole-utterance result.
        frames: each utterance's feature frames in the buffer (the valid ones and the padding frame).
        fed: how many of them the buffer fed to ``conformer_stream_step`` (the rest: a last chunk shorter than the
            subsampling factor).
        zero_padded: whether the buffer pads the second chunk's pre-encode cache with zero features.
    """

    streaming: list[str]
    buffer_offline: list[str]
    offline: list[str]
    frames: list[int]
    fed: list[int]
    zero_padded: bool


def _texts(hypotheses) -> list[str]:
    return [h.text if hasattr(h, "text") else str(h) for h in hypotheses]


@torch.inference_mode()
def nemo_streaming_transcripts(
    model, audio_paths: Sequence[str | os.PathLike], att_context_size: Sequence[int] | None = None
) -> NemoTranscripts:
    """NeMo's cache-aware streaming of each file on its own (see the module docstring); `model` is a restored NeMo
    ``ASRModel`` whose decoding this sets as the example does; `att_context_size`: None keeps the default."""
    from nemo.collections.asr.parts.preprocessing.segment import get_samples
    from nemo.collections.asr.parts.utils.streaming_utils import CacheAwareStreamingAudioBuffer
    from omegaconf import open_dict

    if att_context_size is not None:
        model.encoder.set_default_att_context_size(att_context_size=list(att_context_size))
    decoding = model.cfg.decoding
    with open_dict(decoding):
        decoding.strategy = "greedy_batch"
        decoding.preserve_alignments = False
        decoding.greedy.max_symbols = MAX_SYMBOLS
        decoding.greedy.use_cuda_graph_decoder = False
        decoding.fused_batch_size = -1
    model.change_decoding_strategy(decoding)
    model.eval()
    config = model.encoder.streaming_cfg
    result = NemoTranscripts([], [], [], [], [], zero_padded=config.shift_size[0] < config.pre_encode_cache_size[1])
    # one buffer, emptied before each file, as NeMo's `transcribe_simulate_cache_aware_streaming` does (making one
    # copies the preprocessor's config: a fifth of this function's time on the reference's files)
    buffer = CacheAwareStreamingAudioBuffer(model=model, online_normalization=False, pad_and_drop_preencoded=False)
    for path in audio_paths:
        buffer.reset_buffer()
        buffer.append_audio_file(str(path), stream_id=-1)
        features, valid = buffer.preprocess_audio(get_samples(str(path)))  # (1, F, T), (1,) the valid frames
        for signal, lengths, texts in (
            (*buffer.get_all_audios(), result.buffer_offline),
            (features[:, :, : int(valid[0])], valid.long(), result.offline),
        ):
            _, whole, *_ = model.conformer_stream_step(
                processed_signal=signal, processed_signal_length=lengths, return_transcription=True
            )
            texts += _texts(whole)
        cache_channel, cache_time, cache_length = model.encoder.get_initial_cache_state(batch_size=1)
        hypotheses, predictions, streamed = None, None, []
        for step, (chunk, chunk_lengths) in enumerate(buffer):
            predictions, streamed, cache_channel, cache_time, cache_length, hypotheses = model.conformer_stream_step(
                processed_signal=chunk,
                processed_signal_length=chunk_lengths,
                cache_last_channel=cache_channel,
                cache_last_time=cache_time,
                cache_last_channel_len=cache_length,
                keep_all_outputs=buffer.is_buffer_empty(),
                previous_hypotheses=hypotheses,
                previous_pred_out=predictions,
                drop_extra_pre_encoded=0 if step == 0 else config.drop_extra_pre_encoded,
                return_transcription=True,
            )
        result.streaming += _texts(streamed)
        result.frames.append(int(buffer.streams_length[0]))
        result.fed.append(min(buffer.buffer_idx, result.frames[-1]))  # where the buffer stopped
    return result


def _features(
    loaded: LoadedModel, audio_paths: Sequence[str | os.PathLike], frames: Sequence[int] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's own front end on the whole files: (B, T, F) features and (B,) lengths, the valid frames, or
    with `frames` each utterance's first ``frames[b]``, those past its end zero (NeMo's padding value)."""
    frontend = build_frontend(loaded.require_frontend_spec()).eval()
    waves = [load_audio(path) for path in audio_paths]
    features, lengths = frontend(
        torch.nn.utils.rnn.pad_sequence(waves, batch_first=True), torch.tensor([len(w) for w in waves])
    )
    if frames is None:
        return features, lengths
    width = max(features.shape[1], *frames)
    features = torch.nn.functional.pad(features, (0, 0, 0, width - features.shape[1]))  # (B, width, F)
    padding = torch.arange(width) >= lengths.unsqueeze(1)  # (B, width): past each utterance's valid frames
    return features.masked_fill(padding.unsqueeze(2), 0.0), torch.tensor(list(frames))


@torch.no_grad()
def our_streaming_hypotheses(
    loaded: LoadedModel,
    audio_paths: Sequence[str | os.PathLike],
    att_context_size: Sequence[int] | None = None,
    frames: Sequence[int] | None = None,
    piece_frames: int = PIECE_FRAMES,
) -> tuple[list[list[Segment]], list[Hypothesis]]:
    """This project's cache-aware streaming of all the files as one batch of streams (see the module docstring),
    each stream's final segments (no endpoints: one, none without a token), and its whole-utterance greedy
    hypotheses; `att_context_size`: one of the model's contexts, None its default; `frames`: each utterance's first
    ``frames[b]`` feature frames instead of its valid ones, zero past its end (what NeMo's buffer feeds:
    `NemoTranscripts.fed`)."""
    model, tokenizer = loaded.model.eval(), loaded.require_tokenizer()
    features, lengths = _features(loaded, audio_paths, frames)  # (B, T, F), (B,)
    session = StreamingRecognizer(
        model,
        CacheAwareEncoder(model, att_context_size),
        feature_dim=features.shape[2],
        max_symbols_per_frame=MAX_SYMBOLS,
        tokenizer=tokenizer,
    )
    state = session.initial_state(len(audio_paths))
    for start in range(0, features.shape[1], piece_frames):
        state = session.accept(
            features[:, start : start + piece_frames], (lengths - start).clamp(0, piece_frames), state
        )
    state = session.finish(state)
    encoded, encoded_lengths = model.encode(features, lengths, att_context_size)
    return session.segments(state), greedy_search(model, encoded, encoded_lengths, MAX_SYMBOLS, tokenizer)


def our_streaming_transcripts(
    loaded: LoadedModel,
    audio_paths: Sequence[str | os.PathLike],
    att_context_size: Sequence[int] | None = None,
    frames: Sequence[int] | None = None,
    piece_frames: int = PIECE_FRAMES,
) -> Transcripts:
    """The texts of `our_streaming_hypotheses` (the same arguments): streamed and whole-utterance."""
    segments, offline = our_streaming_hypotheses(loaded, audio_paths, att_context_size, frames, piece_frames)
    streaming = [" ".join(segment.hypothesis.text for segment in stream) for stream in segments]
    return Transcripts(streaming, [h.text for h in offline])


def transcribe_command(
    model_path: str | os.PathLike, audio_paths: Sequence[str | os.PathLike], att_context_size: Sequence[int]
) -> list[str]:
    """The command line that streams the files through the ``.nemo`` `model_path` at `att_context_size`, as NeMo's
    cache-aware example does: greedy search with the file's ``max_symbols``, no endpointing."""
    left, right = att_context_size
    return [
        sys.executable,
        str(TRANSCRIBE),
        *map(str, audio_paths),
        "--checkpoint",
        str(model_path),
        "--streaming",
        f"--att-context-size={left},{right}",  # the = form: a negative left context is no option
        "--method",
        "greedy",
        "--no-endpointing",
    ]


def command_line_transcripts(
    model_path: str | os.PathLike, audio_paths: Sequence[str | os.PathLike], att_context_size: Sequence[int]
) -> list[str]:
    """The final texts `transcribe_command` prints for the files, in order (its ``path<TAB>text`` lines on stdout),
    this repository's package first on the path; RuntimeError with its stderr when it fails or prints other
    lines."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    command = transcribe_command(model_path, audio_paths, att_context_size)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(audio_paths):
        raise RuntimeError(f"{' '.join(command[:2])} ... exited {done.returncode}: {done.stderr[-3000:]}")
    texts = []
    for path, line in zip(audio_paths, lines):
        printed, _, text = line.partition("\t")
        if printed != str(path):
            raise RuntimeError(f"transcribe.py printed {line!r} where {path}'s line was due")
        texts.append(text)
    return texts
