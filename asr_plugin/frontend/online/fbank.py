"""Kaldi-style filterbank features of audio that arrives in pieces, batched over streams: exactly the frames the
whole-utterance front end computes, each as soon as its samples are there.

Frame m of a `SherpaFbank`-type front end covers samples 160 m - 120 ... 160 m + 279 (samples before 0 reflected
into the audio), so it is ready once 160 m + 280 samples have arrived, as kaldi-native-fbank's ``OnlineFbank``
decides (``NumFrames(..., flush=false)``); `StreamingFbank.flush` then gives the last frames, whose windows reach
past the end and reflect it ((S + 80) // 160 frames in all). Each stream keeps the samples from the first sample
of its next frame on (the history a frame needs).
"""

from __future__ import annotations

import torch

from asr_plugin.frontend.online.frames import SampleStreamState, StreamingFrames
from asr_plugin.frontend.sherpa import SHERPA_HOP_LENGTH, SHERPA_WIN_LENGTH, SherpaFbank

# the first sample of frame m is HOP * m - FRAME_LEAD; it is complete once HOP * m + FRAME_REACH samples arrived
FRAME_LEAD = SHERPA_WIN_LENGTH // 2 - SHERPA_HOP_LENGTH // 2  # 120
FRAME_REACH = SHERPA_WIN_LENGTH - FRAME_LEAD  # 280


class StreamingFbank(StreamingFrames):
    """Feeds audio pieces of B streams through a kaldi-style front end (`SherpaOnlineFbank`, or `SherpaFbank`
    without normalisation) and gives the frames that became ready.

    ``accept(audio, lengths, state)`` appends ``lengths[b]`` samples to stream b (0: none this time) and returns
    the new frames; ``flush(state, streams)`` ends the chosen streams and returns their last frames. Over a
    stream's pieces and its flush the frames are those of ``frontend(whole audio)`` (float rounding of a batch's
    FFT apart), whatever the pieces' sizes. No dither (evaluation mode's features).

    Args:
        frontend: the front end whose frames to compute; a per-utterance normalisation cannot stream and is
            refused.
    """

    def __init__(self, frontend: SherpaFbank) -> None:
        if not isinstance(frontend, SherpaFbank):
            raise TypeError(
                f"StreamingFbank computes kaldi-style frames of a SherpaFbank/SherpaOnlineFbank front end (kinds "
                f"'sherpa_online', 'sherpa'), not {type(frontend).__name__}"
            )
        if frontend.normalize is not None:
            raise ValueError(
                f"front end normalize={frontend.normalize!r} standardises each bin over the whole utterance, "
                "which cannot be computed as audio arrives; use kind 'sherpa_online' (or 'sherpa' with normalize None)"
            )
        super().__init__(frontend)
        self.reach = FRAME_REACH

    def ready_frames(self, received: torch.Tensor) -> torch.Tensor:
        """Frames whose last sample has arrived (kaldi-native-fbank's NumFrames without flush)."""
        return torch.div(received - FRAME_REACH, SHERPA_HOP_LENGTH, rounding_mode="floor") + 1

    def first_sample_needed(self, frame: torch.Tensor) -> torch.Tensor:
        return frame * SHERPA_HOP_LENGTH - FRAME_LEAD

    def compute_frames(self, state: SampleStreamState, counts: torch.Tensor, width: int) -> torch.Tensor:
        windows = self.frontend.frame_windows(
            state.samples, state.samples_start, state.frames_done, width, state.received
        )  # (B, T_new, W)
        return self.frontend.log_fbank(windows)  # (B, T_new, F)
