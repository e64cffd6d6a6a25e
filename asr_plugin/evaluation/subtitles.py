"""Timed transcripts as files: SubRip (.srt) and WebVTT (.vtt) cues from a transcript's segments, and one JSON
line per file with its token, word and segment times (`asr_plugin.decoding.timestamps.Timing`).

SRT: numbered cues ``1`` / ``HH:MM:SS,mmm --> HH:MM:SS,mmm`` / text / blank line; WebVTT: the ``WEBVTT``
header, then cues with ``HH:MM:SS.mmm`` times. A cue never ends before it starts, and segments without text
make no cue. Every file is written atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from asr_plugin.decoding.hypothesis import Span, Timing
from asr_plugin.files import write_text_atomic


def cue_time(seconds: float, separator: str) -> str:
    """``HH:MM:SS<separator>mmm`` of a time >= 0 (milliseconds rounded)."""
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def cues(segments: Sequence[Span], separator: str) -> list[str]:
    """One ``start --> end\\ntext`` block per segment with text."""
    blocks = []
    for segment in segments:
        text = " ".join(segment.text.split())
        if text:
            end = max(segment.end, segment.start)
            blocks.append(f"{cue_time(segment.start, separator)} --> {cue_time(end, separator)}\n{text}")
    return blocks


def srt_text(segments: Sequence[Span]) -> str:
    """The SubRip file of `segments`."""
    return "".join(f"{number}\n{block}\n\n" for number, block in enumerate(cues(segments, ","), start=1))


def webvtt_text(segments: Sequence[Span]) -> str:
    """The WebVTT file of `segments`."""
    return "WEBVTT\n\n" + "".join(f"{block}\n\n" for block in cues(segments, "."))


def timing_record(path: str | os.PathLike, text: str, timing: Timing) -> str:
    """The JSON line of one transcribed file: {"audio", "text", "tokens", "words", "segments"}."""
    return json.dumps({"audio": str(path), "text": text, **timing.record()}, ensure_ascii=False)


def write_subtitles(out_dir: str | os.PathLike, audio: str | os.PathLike, timing: Timing) -> tuple[Path, Path]:
    """Writes <out_dir>/<audio's stem>.srt and .vtt from `timing`'s segments; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = Path(audio).stem
    srt = write_text_atomic(out_dir / f"{stem}.srt", srt_text(timing.segments))
    vtt = write_text_atomic(out_dir / f"{stem}.vtt", webvtt_text(timing.segments))
    return srt, vtt
