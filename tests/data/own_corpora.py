"""Corpora in the formats people bring, written by the tests themselves from the mini corpus's utterances:
long 48 kHz stereo recordings in several formats holding the utterances as segments, described by NeMo
manifests (relative paths, offsets, extra keys) and by lhotse cut manifests and a Shar directory written with
lhotse's own writers. (A uniquely named module: several test folders have a conftest.py.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
import torchaudio

from asr_plugin.data import scan_split

RATE = 48000
GAP_S = 0.25  # silence between two utterances of a recording
FORMATS = (
    ("wav", "WAV", "PCM_16"),
    ("flac", "FLAC", "PCM_24"),
    ("ogg", "OGG", "VORBIS"),
    ("mp3", "MP3", "MPEG_LAYER_III"),
)


@dataclass(frozen=True)
class Segment:
    """One utterance inside a long recording."""

    id: str
    path: Path
    offset: float
    duration: float
    text: str
    speaker: str
    original: Path  # the 16 kHz mono file it was made from


def write_long_recordings(
    mini_root: Path, split: str, out_dir: Path, per_file: int = 4, formats: tuple = FORMATS
) -> list[Segment]:
    """The split's utterances (LibriSpeech layout, 16 kHz mono) upsampled to 48 kHz, made stereo (the
    channels differ by a tone that their average cancels) and concatenated `per_file` at a time with gaps
    into recordings under `out_dir/audio/`, cycling through `formats`."""
    candidates, _ = scan_split(mini_root, split)
    segments = []
    (out_dir / "audio").mkdir(parents=True, exist_ok=True)
    for number, start in enumerate(range(0, len(candidates), per_file)):
        extension, kind, subtype = formats[number % len(formats)]
        path = out_dir / "audio" / f"{split}_{number:02d}.{extension}"
        pieces, cursor = [np.zeros(int(GAP_S * RATE))], int(GAP_S * RATE)
        for candidate in candidates[start : start + per_file]:
            audio16, rate = sf.read(candidate.path, dtype="float32")
            audio = torchaudio.functional.resample(torch.from_numpy(audio16), rate, RATE).numpy()
            # offsets on exact samples (not rounded: a shift of a sample is a phase error at high frequencies)
            segments.append(
                Segment(
                    candidate.id,
                    path,
                    cursor / RATE,
                    len(audio) / RATE,
                    candidate.text,
                    candidate.speaker,
                    Path(candidate.path),
                )
            )
            pieces += [audio, np.zeros(int(GAP_S * RATE))]
            cursor += len(audio) + int(GAP_S * RATE)
        mono = np.concatenate(pieces)
        difference = 0.05 * np.sin(2 * np.pi * 1000 * np.arange(len(mono)) / RATE)
        stereo = np.stack([mono + difference, mono - difference], axis=1).astype("float32")
        sf.write(str(path), stereo, RATE, format=kind, subtype=subtype)
    return segments


def write_nemo_manifest(segments: list[Segment], manifest: Path) -> Path:
    """NeMo's keys, paths relative to the manifest's folder, an offset per line and a key NeMo ignores."""
    lines = [
        json.dumps(
            {
                "audio_filepath": str(s.path.relative_to(manifest.parent)),
                "offset": s.offset,
                "duration": s.duration,
                "text": s.text.lower(),
                "lang": "en",
            }
        )
        for s in segments
    ]
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def lhotse_cuts(segments: list[Segment]):
    """A CutSet with one cut per segment, made with lhotse's own classes (recordings read by lhotse)."""
    from lhotse import CutSet, Recording, RecordingSet, SupervisionSegment, SupervisionSet

    recordings = RecordingSet.from_recordings(Recording.from_file(p) for p in sorted({s.path for s in segments}))
    supervisions = SupervisionSet.from_segments(
        SupervisionSegment(s.id, s.path.stem, s.offset, s.duration, channel=[0, 1], text=s.text, speaker=s.speaker)
        for s in segments
    )
    return CutSet.from_manifests(recordings=recordings, supervisions=supervisions).trim_to_supervisions()


def write_shar(cuts, out_dir: Path, shard_size: int) -> Path:
    """The cuts with their audio (the cut's segment, as 48 kHz stereo flac) as a Shar directory of shards of
    `shard_size` cuts, written by lhotse's own SharWriter."""
    from lhotse.shar import SharWriter

    out_dir.mkdir(parents=True)
    with SharWriter(str(out_dir), fields={"recording": "flac"}, shard_size=shard_size) as writer:
        for cut in cuts:
            writer.write(cut)
    return out_dir
