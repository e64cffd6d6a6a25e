"""lhotse CutSet manifests (``cuts.jsonl.gz``, one cut per line) as a data source.

Each cut becomes one utterance: its recording's audio file, the segment [start, start + duration), the
text of its supervisions joined by spaces, the first supervision's speaker. The manifests are read line by
line (lazily: a large CutSet is never held as lhotse objects), so an unusable cut is listed as
`manifest:line` with the reason: a line lhotse cannot parse, a cut without a recording, audio that is not
one file (URLs, commands, in-memory data, one file per channel), no transcript. lhotse is needed only here
(`pip install -e '.[lhotse]'`) and imported when a cut manifest is read.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from asr_plugin.data.sources.candidate import Candidate, Skipped
from asr_plugin.data.sources.manifest_sets import ManifestSetSource
from asr_plugin.data.sources.shar_cuts import cut_text
from asr_plugin.data.sources.shar_directory import shar_shards


def cut_candidate(cut: Any, where: str) -> tuple[Candidate | None, str | None]:
    """(candidate, None) for a cut whose audio is one file, else (None, why not)."""
    recording = getattr(cut, "recording", None)
    if recording is None:
        return None, f"cut {cut.id} has no recording"
    sources = recording.sources
    if len(sources) != 1 or sources[0].type != "file":
        kinds = ", ".join(source.type for source in sources)
        return None, (
            f"cut {cut.id}: its audio is not one file (sources: {kinds}); write such cuts as a Shar "
            "directory or with one file per recording"
        )
    text = cut_text(cut)
    if not text:
        return None, f"cut {cut.id} has no transcript (no supervision with text)"
    speaker = next((s.speaker for s in cut.supervisions if s.speaker), None)
    path = Path(sources[0].source).absolute()
    return Candidate(
        cut.id, str(path), text, offset=float(cut.start), duration=float(cut.duration), speaker=speaker, where=where
    ), None


def read_cut_manifest(manifest: Path) -> tuple[list[Candidate], list[Skipped]]:
    """The candidates of a lhotse cut manifest (.jsonl or .jsonl.gz) and its unusable lines."""
    from lhotse.serialization import deserialize_item  # an optional dependency

    opener = gzip.open if manifest.suffix == ".gz" else open
    candidates, skipped = [], []
    with opener(manifest, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{manifest}:{number}"
            try:
                cut = deserialize_item(json.loads(raw.decode("utf-8")))
            except Exception as err:  # noqa: BLE001 - lhotse raises many types for a malformed cut
                skipped.append(Skipped(where, f"not a lhotse cut ({type(err).__name__}: {err})"))
                continue
            candidate, problem = cut_candidate(cut, where)
            if problem is not None:
                skipped.append(Skipped(where, problem))
            else:
                candidates.append(candidate)
    return candidates, skipped


class LhotseCutsSource(ManifestSetSource):
    """lhotse cuts: ``data=lhotse data.train_cuts=[a.jsonl.gz] data.valid_cuts=[b.jsonl.gz]
    data.test_cuts={name: c.jsonl.gz}``, or a training set streamed from a Shar directory,
    ``data.train_shar=<dir>`` (`asr_plugin.data.sources.shar_directory`, streamed by
    `asr_plugin.data.loading.shar_stream`).

    Args:
        train_cuts: the training cut manifests (one split, "train").
        valid_cuts: the validation cut manifests (one split, "valid").
        test_cuts: {name: manifest or list of them}, or a list of manifests named by their stems.
        train_shar: a Lhotse Shar directory to train on instead of `train_cuts`: it is streamed by the data
            module, not scanned into a manifest (no split "train" here), so `shar_shards` are checked now.
    """

    name = "lhotse"
    suffix = "cuts"
    what = "lhotse cut manifest"

    def __init__(
        self,
        train_cuts: str | Sequence[str] | None = None,
        valid_cuts: str | Sequence[str] | None = None,
        test_cuts: Mapping[str, str] | Sequence[str] | None = None,
        train_shar: str | None = None,
    ):
        super().__init__(train_cuts, valid_cuts, test_cuts)
        self.train_shar = None
        self.shards: list = []
        if train_shar not in (None, ""):
            if self.sets["train"]:
                raise ValueError(
                    f"data.train_shar={train_shar} and data.train_cuts={[str(p) for p in self.sets['train']]}: "
                    "give one training set (set data.train_cuts=[] to stream the Shar directory)"
                )
            self.train_shar = Path(train_shar).absolute()
            self.shards = shar_shards(self.train_shar)

    def read(self, path: Path, index: int, count: int) -> tuple[list[Candidate], list[Skipped]]:
        return read_cut_manifest(path)

    def overrides(self) -> list[str]:
        shar = [] if self.train_shar is None else [f"data.train_shar={self.train_shar}"]
        return [*super().overrides(), *shar]
