"""Audio as it is recorded, read as the front ends want it: any file libsndfile reads, averaged to mono and
resampled once (`reading`), or read block by block with the same result for long files (`stream`)."""

from asr_plugin.audio.reading import SAMPLE_RATE, load_audio, probe_audio
from asr_plugin.audio.stream import audio_blocks, audio_seconds

__all__ = ["SAMPLE_RATE", "audio_blocks", "audio_seconds", "load_audio", "probe_audio"]
