"""Data sources: the corpus formats a data config reads (`corpus:`), each one class (see `base.DataSource`)."""

from __future__ import annotations

import inspect
from typing import Any

from asr_plugin.data.sources.base import DataSource
from asr_plugin.data.sources.lhotse_cuts import LhotseCutsSource
from asr_plugin.data.sources.librispeech import LibriSpeechSource, MiniCorpusSource
from asr_plugin.data.sources.nemo_manifest import NemoManifestSource

# corpus name -> its class: the only list of formats (a new source adds its line here)
SOURCES: dict[str, type[DataSource]] = {
    source.name: source for source in (LibriSpeechSource, MiniCorpusSource, NemoManifestSource, LhotseCutsSource)
}


def build_source(corpus: str, **options: Any) -> DataSource:
    """The source of a data config: `corpus` names the format, `options` are its keys. ValueError names an
    unknown corpus, or keys the format does not take."""
    if corpus not in SOURCES:
        raise ValueError(f"data.corpus={corpus!r}: choose one of {sorted(SOURCES)}")
    cls = SOURCES[corpus]
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValueError(
            f"data.corpus={corpus}: unknown key(s) {['data.' + key for key in unknown]}; "
            f"a {corpus} config takes {sorted(accepted)} (and the data module's own keys)"
        )
    return cls(**options)


__all__ = [
    "DataSource",
    "LhotseCutsSource",
    "LibriSpeechSource",
    "MiniCorpusSource",
    "NemoManifestSource",
    "SOURCES",
    "build_source",
]
