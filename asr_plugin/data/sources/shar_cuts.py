"""The cuts of Lhotse Shar shards, read with lhotse (`LazySharIterator`, shard after shard) and checked before
anything of them is used:

* **nothing in a cut is executed.** lhotse loads a recording from wherever its ``AudioSource`` says: a shell
  command (``command``), a URL (``url``, including ``pipe:`` commands) or a file; and it decodes ``.opus`` and
  ``.sph`` files through a shell command line holding the path. A Shar's recording tar normally holds every
  cut's audio (lhotse fills the cut's ``shar`` placeholder with it: ``memory`` data), but a member written
  as lhotse's "no data" placeholder leaves the recording of the cut manifest in place. So every audio source
  anywhere in a cut (its recording, a mixed cut's tracks, a transform's impulse response, custom fields) must
  be memory data, a file lhotse decodes in-process, or an unfilled placeholder (never loaded here); anything
  else is refused as the cut is read, naming the shard and the cut, before its audio (or any later cut's) is
  loaded.
* **a damaged shard is named.** A truncated or corrupt tar or cut manifest, a recording tar of other cuts
  (lhotse's "Mismatched IDs"), audio that does not decode: each raises ValueError naming the Shar directory,
  the shard's file, the cut, lhotse's own error and what to rebuild.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from asr_plugin.audio.reading import to_mono_at_rate
from asr_plugin.data.sources.shar_directory import AUDIO_FIELD, first_line, rebuild_hint, shard_fault, shard_number

SAFE_SOURCES = ("memory", "file", "shar")  # "shar": a placeholder; loading one raises, runs nothing
SHELL_DECODED = (".opus", ".sph")  # file suffixes lhotse decodes by a shell command line holding the path


def cut_text(cut: Any) -> str:
    """A cut's transcript: its supervisions' texts joined, each with its whitespace collapsed."""
    return " ".join(" ".join((s.text or "").split()) for s in cut.supervisions).strip()


def audio_sources(value: Any) -> Iterator[tuple[str, Any]]:
    """(type, source) of every audio source in a lhotse manifest, at any depth of its dataclass fields, lists
    and dicts (a transform kept as plain data is a dict; so is its impulse response's recording). An audio
    source is what has a ``type`` and a ``source`` (lhotse's ``AudioSource``, or its dict)."""
    if dataclasses.is_dataclass(value):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        if "type" in value and "source" in value:
            yield value["type"], value["source"]
        for item in value.values():
            yield from audio_sources(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from audio_sources(item)


def unsafe_source(cut: Any) -> str | None:
    """Why loading `cut`'s audio could run something named in the data (None: it cannot)."""
    for kind, source in audio_sources(cut):
        if kind not in SAFE_SOURCES:
            return f"an audio source of type {kind!r} ({str(source)[:80]!r})"
        if kind == "file" and str(source).lower().endswith(SHELL_DECODED):
            return f"the audio file {str(source)[:80]!r}, which lhotse decodes through a shell command"
    return None


class SharCuts:
    """The cuts of `shards` in order (their audio attached with `with_audio`, else their metadata alone),
    each checked (`unsafe_source`) as it is read; iterable any number of times (lhotse's samplers iterate a
    lazy CutSet once per epoch). Every fault raises ValueError naming the shard and the cut."""

    def __init__(self, shards: Sequence[dict[str, Path]], with_audio: bool) -> None:
        self.shards = tuple(shards)
        self.with_audio = with_audio

    def __iter__(self) -> Iterator[Any]:
        from lhotse.shar import LazySharIterator  # an optional dependency

        for shard in self.shards:
            fields = {"cuts": [shard["cuts"]]}
            if self.with_audio:
                fields[AUDIO_FIELD] = [shard[AUDIO_FIELD]]
            reader = iter(LazySharIterator(fields=fields))
            index = 0
            while True:
                try:
                    cut = next(reader)
                except StopIteration:
                    break
                except Exception as error:  # noqa: BLE001 - tarfile, gzip, json and lhotse's asserts all mean a damaged shard
                    raise shard_fault(shard, error, index, self.with_audio) from error
                problem = unsafe_source(cut)
                if problem is not None:
                    raise ValueError(
                        f"{shard['cuts'].parent}: cut {cut.id} of {shard['cuts'].name} names {problem}: a Shar "
                        "cut's audio must be in its recording tar (or a file), nothing read from the data is run; "
                        f"{rebuild_hint(shard)}"
                    )
                index += 1
                yield cut


def read_shar_cuts(shards: Sequence[dict[str, Path]], with_audio: bool):
    """A lazy lhotse CutSet of `SharCuts`."""
    from lhotse import CutSet

    return CutSet(SharCuts(shards, with_audio))


def shar_cut_audio(cut: Any, sample_rate: int) -> torch.Tensor:
    """(N,) float32 audio of a Shar cut (read by `SharCuts`) at `sample_rate`: lhotse decodes the in-memory
    audio (all channels), averaged and resampled as every other source's (`asr_plugin.audio.reading`).
    ValueError naming the shard and the cut for audio that does not decode."""
    try:
        samples = cut.load_audio()  # (C, N) at the recording's rate
    except Exception as error:  # noqa: BLE001 - lhotse's decoders raise many types for damaged audio
        cuts = Path(cut.shard_origin)
        tars = sorted(cuts.parent.glob(f"{AUDIO_FIELD}.{shard_number(cuts)}.*"))
        shard = {"cuts": cuts, AUDIO_FIELD: tars[0] if tars else cuts.parent / f"{AUDIO_FIELD}.{shard_number(cuts)}"}
        raise ValueError(
            f"{cuts.parent}: the audio of cut {cut.id} in {shard[AUDIO_FIELD].name} does not decode "
            f"({type(error).__name__}: {first_line(error)}): {rebuild_hint(shard)}"
        ) from error
    return to_mono_at_rate(samples.T, cut.sampling_rate, sample_rate)
