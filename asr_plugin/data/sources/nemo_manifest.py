"""NeMo JSON manifests as a data source: one JSON object per line with NeMo's keys

    {"audio_filepath": "clips/a.wav", "duration": 3.2, "text": "hello there", "offset": 12.0}

read as NeMo reads them: `audio_filepath` relative to the manifest's folder when that file exists there
(else as given, relative to the working directory: NeMo's `get_full_path`), `offset` (default 0) and
`duration` select the segment, `speaker` is kept when present and every other key is ignored. The
manifests are only read. Lines that cannot be used (not UTF-8, not JSON, a missing key, a duration that is
not a positive number, a negative offset, NaN or infinity, an empty transcript) are listed as `manifest:line` with the
reason; the audio of the rest is checked by preparation (missing file, offset past the end, duration
longer than the file).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from asr_plugin.data.sources.candidate import Candidate, Skipped
from asr_plugin.data.sources.manifest_sets import ManifestSetSource, utterance_id

NEMO_KEYS = ("audio_filepath", "duration", "text")


def resolve_audio_path(audio_filepath: str, manifest: Path) -> Path:
    """NeMo's rule: a relative path is taken relative to the manifest's folder if the file is there, else as
    given (relative to the working directory); returned absolute."""
    path = Path(audio_filepath).expanduser()
    if not path.is_absolute() and (manifest.parent / path).is_file():
        return manifest.parent / path
    return path.absolute()


def _finite_number(value: object) -> bool:
    """A JSON number that is not NaN or infinite (Python's json reads NaN and Infinity)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def parse_nemo_line(raw: bytes) -> tuple[dict | None, str | None]:
    """(record with audio_filepath, duration, text, offset, speaker) or (None, why the line is unusable)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, f"not UTF-8 text ({err.reason} at byte {err.start}): re-encode the manifest as UTF-8"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        return None, f"not valid JSON ({err.msg})"
    if not isinstance(record, dict):
        return None, f"expected a JSON object, got {type(record).__name__}"
    missing = [key for key in NEMO_KEYS if key not in record]
    if missing:
        return None, f"missing key(s) {missing} (NeMo manifests need {list(NEMO_KEYS)})"
    duration, offset = record["duration"], record.get("offset", 0.0)
    if not _finite_number(duration) or duration <= 0:
        return None, f"duration must be a positive number of seconds, got {duration!r}"
    if offset is None:
        offset = 0.0
    if not _finite_number(offset) or offset < 0:
        return None, f"offset must be a number of seconds >= 0, got {offset!r}"
    if not isinstance(record["text"], str) or not record["text"].strip():
        return None, f"empty transcript (text {record['text']!r})"
    speaker = record.get("speaker")
    return {
        "audio_filepath": str(record["audio_filepath"]),
        "duration": float(duration),
        "text": " ".join(record["text"].split()),
        "offset": float(offset),
        "speaker": None if speaker is None else str(speaker),
    }, None


def read_nemo_manifest(manifest: Path, index: int = 0, count: int = 1) -> tuple[list[Candidate], list[Skipped]]:
    """The candidates of one NeMo manifest (ids "<stem>-<line>", see `utterance_id`) and its unusable lines."""
    candidates, skipped = [], []
    stem = manifest.name.split(".")[0]
    with manifest.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{manifest}:{number}"
            record, problem = parse_nemo_line(raw)
            if problem is not None:
                skipped.append(Skipped(where, problem))
                continue
            path = resolve_audio_path(record["audio_filepath"], manifest)
            candidates.append(
                Candidate(
                    utterance_id(stem, number, index, count),
                    str(path),
                    record["text"],
                    offset=record["offset"],
                    duration=record["duration"],
                    speaker=record["speaker"],
                    where=where,
                )
            )
    return candidates, skipped


class NemoManifestSource(ManifestSetSource):
    """NeMo manifests: ``data=nemo data.train_manifests=[a.json,b.json] data.valid_manifests=[c.json]
    data.test_manifests={name: d.json}``.

    Args:
        train_manifests: the training manifests (one split, "train"); may be empty for evaluation only.
        valid_manifests: the validation manifests (one split, "valid").
        test_manifests: {name: manifest or list of them}, or a list of manifests named by their stems.
    """

    name = "nemo"
    suffix = "manifests"
    what = "NeMo manifest"

    def __init__(
        self,
        train_manifests: str | Sequence[str] | None = None,
        valid_manifests: str | Sequence[str] | None = None,
        test_manifests: Mapping[str, str] | Sequence[str] | None = None,
    ):
        super().__init__(train_manifests, valid_manifests, test_manifests)

    def read(self, path: Path, index: int, count: int) -> tuple[list[Candidate], list[Skipped]]:
        return read_nemo_manifest(path, index, count)
