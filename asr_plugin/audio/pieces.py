"""Live audio pieces brought to the front end's form before they reach a stream's state (`StreamingFrames.accept`,
which every streaming recogniser's audio goes through): one NaN there stays in a cache-aware encoder's caches for
the rest of the stream, and int16 samples taken as floats give features far from any the model was trained on.

- Floating samples are taken as they are (float32), integer PCM is scaled as soundfile reads it (int16 x / 2**15,
  int32 x / 2**31, int8 x / 2**7, uint8 (x - 128) / 2**7); another dtype (int64, bool, complex) is refused.
- NaN or infinite samples are refused naming the stream and the sample.
- A peak above `PEAK_WARNING` warns (once per process, Python's `warnings`): float audio is expected in [-1, 1].
- With a `sample_rate` other than the front end's, each stream's piece is resampled by the loaders' resampler
  (`asr_plugin.audio.reading.to_mono_at_rate`, libsoxr), piece by piece: its filter sees no samples beyond a
  piece, so pieces of 100 ms or more keep that close to resampling the whole stream (10 ms pieces add audible
  error at every boundary; resample such a stream yourself with ``soxr.ResampleStream``).
"""

from __future__ import annotations

import warnings

import torch

from asr_plugin.audio.reading import to_mono_at_rate

# dtype -> (offset, scale): soundfile's float reading of integer PCM, (x - offset) / scale
PCM_SCALES = {
    torch.int8: (0, 2**7),
    torch.uint8: (128, 2**7),
    torch.int16: (0, 2**15),
    torch.int32: (0, 2**31),
}
# A peak this far above full scale is no float audio in [-1, 1] (int16 samples cast with .float(): ~1e4).
PEAK_WARNING = 2.0


def checked_pieces(
    audio: torch.Tensor, lengths: torch.Tensor, sample_rate: int | None, front_end_rate: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) pieces and (B,) valid lengths -> float32 pieces at `front_end_rate` and their lengths.

    Args:
        audio: stream b's new samples first (`lengths` already checked against its shape).
        lengths: (B,) int64 new samples per stream.
        sample_rate: the pieces' rate (None: the front end's).
        front_end_rate: the front end's rate.
    Raises:
        TypeError for a dtype that is neither floating nor integer PCM; ValueError naming the stream and the sample
        for NaN or infinite samples, and for a sample rate that is no positive integer.
    """
    if sample_rate is not None and (
        isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0
    ):
        raise ValueError(f"sample_rate={sample_rate!r}: the pieces' rate in Hz, a positive integer")
    if audio.dtype in PCM_SCALES:
        offset, scale = PCM_SCALES[audio.dtype]
        audio = (audio.float() - offset) / scale
    elif not audio.is_floating_point():
        raise TypeError(
            f"audio pieces of dtype {audio.dtype}: give float samples in [-1, 1] or integer PCM "
            f"({', '.join(str(dtype) for dtype in PCM_SCALES)})"
        )
    audio = audio.float()
    valid = torch.arange(audio.shape[1], device=audio.device) < lengths[:, None]
    bad = valid & ~torch.isfinite(audio)
    magnitude = torch.where(valid & ~bad, audio.abs(), 0.0)
    # one host sync for both (a GPU stream's pieces)
    bad_count, peak = torch.stack([bad.sum().float(), magnitude.amax() if audio.numel() else magnitude.sum()]).tolist()
    if bad_count:
        stream, sample = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"audio piece of stream {stream}: sample {sample} of its {int(lengths[stream])} new samples is "
            f"{float(audio[stream, sample])} ({int(bad_count)} NaN or infinite samples in this piece); "
            "the stream's state is left as it was"
        )
    if peak > PEAK_WARNING:
        warnings.warn(
            # one text (no value in it), so that Python's warnings registry shows it once
            f"audio pieces peak above {PEAK_WARNING:g}: float samples are expected in [-1, 1] (int16 PCM cast with "
            ".float() unscaled? pass the int16 tensor itself, or divide it by 32768)",
            stacklevel=3,
        )
    if sample_rate is None or sample_rate == front_end_rate:
        return audio, lengths
    pieces = [
        to_mono_at_rate(audio[b, :n].cpu().numpy()[:, None], sample_rate, front_end_rate) if n else torch.zeros(0)
        for b, n in enumerate(lengths.tolist())
    ]
    resampled = torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True).to(audio.device)
    return resampled, torch.tensor([len(piece) for piece in pieces], device=lengths.device)
