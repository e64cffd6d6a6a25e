"""Features of a centred-STFT front end computed as audio arrives in pieces, batched over streams: exactly the
frames of the whole-utterance front end, each as soon as its samples are there.

The front ends of kind "nemo" (`NemoMelFrontend`, NeMo's preprocessor, without a per-utterance normalisation: a
streaming NeMo model's ``normalize: NA``) and "logmel" (`LogMelFrontend`: global statistics, a fixed map of each
frame) compute frame m from n_fft samples centred on sample hop * m, zero-padded past the utterance's ends
(``torch.stft(center=True)``). So frame m is ready once hop * m + n_fft / 2 samples have arrived (n_fft / 2
samples of lookahead), and the last frames, whose windows reach past the end, come at the flush. NeMo's
pre-emphasis (x[t] - 0.97 x[t - 1]) needs one sample before each window, and every frame of the front end is a
function of its own window only once the dither is off (evaluation mode).

The frames are the front end's own forward run on each stream's kept samples, so no feature code is repeated
here: a stream keeps the samples from hop * (m - c) on, m its next frame and c the fewest hops longer than
n_fft / 2. The kept samples start on the frame grid, so the forward's frame j is the stream's frame
``samples_start / hop + j``, and the frames asked for have their windows (and the sample before) inside what was
kept and has arrived: they are the whole utterance's frames.
"""

from __future__ import annotations

import torch
from torch import nn

from asr_plugin.frontend.logmel import LogMelFrontend
from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.frontend.online.frames import SampleStreamState, StreamingFrames


class StreamingStft(StreamingFrames):
    """Feeds audio pieces of B streams through a centred-STFT front end (kind "nemo" without normalisation, or
    "logmel") and gives the frames that became ready (`StreamingFrames`: ``accept``, ``flush``).

    Args:
        frontend: the front end, in evaluation mode (no dither); NeMo's with ``normalize=None`` (a per-utterance
            normalisation cannot be computed as audio arrives and is refused).
    """

    def __init__(self, frontend: nn.Module) -> None:
        if not isinstance(frontend, (NemoMelFrontend, LogMelFrontend)):
            raise TypeError(
                "StreamingStft computes the frames of a centred-STFT front end (kinds 'nemo', 'logmel'), "
                f"not {type(frontend).__name__}"
            )
        if isinstance(frontend, NemoMelFrontend) and frontend.normalize is not None:
            raise ValueError(
                f"front end of kind 'nemo' with normalize={frontend.normalize!r} standardises its features over the "
                "whole utterance, which cannot be computed as audio arrives (a streaming NeMo model's preprocessor "
                "has normalize: NA)"
            )
        if frontend.training:
            raise ValueError("the front end is in training mode (dither): call .eval() before streaming it")
        hop, n_fft = frontend.hop_length, frontend.n_fft
        self.lead = n_fft // 2  # samples of a frame's window before its centre hop * m
        self.reach = n_fft - self.lead  # samples from its centre on: the lookahead
        if self.reach < hop:
            raise ValueError(f"n_fft={n_fft} < 2 * hop_length={hop}: frames would skip samples")
        self.history = hop * (self.lead // hop + 1)  # kept before the next frame's centre: the window and one more
        # NeMo's front end refuses audio of fewer than two frames; until a stream's end is known no frame asked for
        # reaches the samples past `received`, so padding it to this length changes none of them
        self.min_samples = 2 * hop
        super().__init__(frontend)

    def ready_frames(self, received: torch.Tensor) -> torch.Tensor:
        """Frames whose windows lie in what has arrived."""
        ready = torch.div(received - self.reach, self.frontend.hop_length, rounding_mode="floor") + 1
        return torch.minimum(ready, self.frontend.num_frames(received))

    def first_sample_needed(self, frame: torch.Tensor) -> torch.Tensor:
        return frame * self.frontend.hop_length - self.history

    def compute_frames(self, state: SampleStreamState, counts: torch.Tensor, width: int) -> torch.Tensor:
        rows = (counts > 0).nonzero().squeeze(1)  # (B',) the streams with frames to give
        held = (state.received - state.samples_start)[rows]  # (B',)
        lengths = torch.where(state.finished[rows], held, held.clamp(min=self.min_samples))
        audio = state.samples[rows]  # (B', L), column 0 is sample samples_start
        if audio.shape[1] < int(lengths.max()):
            audio = torch.nn.functional.pad(audio, (0, int(lengths.max()) - audio.shape[1]))
        positions = torch.arange(audio.shape[1], device=audio.device)[None, :]
        audio = audio.masked_fill(positions >= held[:, None], 0.0)  # a ragged buffer's padding is not zeros
        features, _ = self.frontend(audio, lengths)  # (B', T, F)
        offset = state.frames_done[rows] - torch.div(
            state.samples_start[rows], self.frontend.hop_length, rounding_mode="floor"
        )  # (B',) the next frame's index in the forward's frames
        index = (offset[:, None] + torch.arange(width, device=audio.device)).clamp(max=features.shape[1] - 1)
        frames = features.new_zeros(state.batch_size, width, features.shape[2])  # (B, width, F)
        frames[rows] = torch.gather(features, 1, index[..., None].expand(-1, -1, features.shape[2]))
        return frames
