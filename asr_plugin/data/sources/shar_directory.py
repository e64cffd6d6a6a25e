"""A Lhotse Shar directory's shards: ``cuts.NNNNNN.jsonl.gz`` (the metadata of each shard's cuts) beside
``recording.NNNNNN.tar`` (their audio), as lhotse's `SharWriter` / `CutSet.to_shar` write them, listed and
checked where they are (never copied). The source level of Shar training data (``data.train_shar``): the
cuts are read by `asr_plugin.data.sources.shar_cuts`, streamed by `asr_plugin.data.loading.shar_stream`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

AUDIO_FIELD = "recording"  # the Shar field holding the audio (what SharWriter(fields={"recording": ...}) writes)


def shard_number(path: Path) -> str:
    """ "000003" of ``cuts.000003.jsonl.gz`` / ``recording.000003.tar`` ("" for an unnumbered shard)."""
    parts = path.name.split(".")
    return parts[1] if len(parts) > 2 and parts[1].isdigit() else ""


def shar_shards(directory: str | Path, key: str = "data.train_shar") -> list[dict[str, Path]]:
    """The shards of a Shar directory, [{"cuts": path, "recording": path}, ...] in shard order.

    Raises FileNotFoundError for a missing directory, ValueError naming the directory and the shard for no
    cut manifest, a shard without its audio tar (``recording.NNNNNN.tar``), or no cut at all.
    """
    directory = Path(directory).absolute()
    if not directory.is_dir():
        raise FileNotFoundError(f"{key}={directory}: no such directory (a Lhotse Shar directory is needed)")
    cuts = sorted(p for p in directory.iterdir() if p.name.startswith("cuts.") and ".jsonl" in p.name)
    if not cuts:
        raise ValueError(
            f"{key}={directory}: no cuts.NNNNNN.jsonl.gz in it; a Lhotse Shar directory is written by lhotse's "
            "SharWriter or CutSet.to_shar(dir, fields={'recording': 'flac'})"
        )
    audio = {shard_number(p): p for p in directory.iterdir() if p.name.startswith(f"{AUDIO_FIELD}.")}
    missing = [p for p in cuts if shard_number(p) not in audio]
    if missing:
        listed = ", ".join(p.name for p in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ValueError(
            f"{key}={directory}: shard(s) {listed} have no {AUDIO_FIELD}.NNNNNN.tar (the audio): training needs "
            f"the '{AUDIO_FIELD}' field; write the Shar with fields={{'{AUDIO_FIELD}': 'flac'}}"
        )
    shards = [{"cuts": path, AUDIO_FIELD: audio[shard_number(path)]} for path in cuts]
    if sum(count_cuts(shard) for shard in shards) == 0:
        raise ValueError(f"{key}={directory}: its {len(cuts)} shard(s) hold no cut")
    return shards


def count_cuts(shard: dict[str, Path]) -> int:
    """The lines of a shard's cut manifest (no cut parsed, no audio read); ValueError naming a damaged one."""
    from lhotse.lazy import count_newlines_fast  # an optional dependency

    try:
        return count_newlines_fast(shard["cuts"])
    except Exception as error:  # noqa: BLE001 - gzip, zlib and OS errors all mean a damaged manifest
        raise shard_fault(shard, error) from error


def rebuild_hint(shard: dict[str, Path]) -> str:
    """What to rebuild when a shard is damaged: its two files together, from the source data."""
    return (
        f"rebuild shard {shard_number(shard['cuts']) or shard['cuts'].name} ({shard['cuts'].name} with "
        f"{shard[AUDIO_FIELD].name}) from the source data with lhotse's CutSet.to_shar or SharWriter, or "
        "leave the shard out of the directory"
    )


def _lines(manifest: Path):
    return gzip.open(manifest, "rt", encoding="utf-8") if manifest.suffix == ".gz" else open(manifest, encoding="utf-8")


def cut_id_at(manifest: Path, index: int) -> str | None:
    """The id of the `index`-th cut of a cut manifest, or None where it cannot be read."""
    try:
        with _lines(manifest) as lines:
            for number, line in enumerate(lines):
                if number == index:
                    return str(json.loads(line)["id"])
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None
    return None


def manifest_stop(manifest: Path) -> tuple[int, str | None] | None:
    """Where a cut manifest stops reading (truncated, corrupt): its first unreadable line's index and the id of
    the cut before it; None when every line decompresses and parses."""
    read, previous = 0, None
    try:
        with _lines(manifest) as lines:
            for line in lines:
                previous = str(json.loads(line)["id"])
                read += 1
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return read, previous
    return None


def shard_fault(shard: dict[str, Path], error: Exception, index: int | None = None, with_audio: bool = False):
    """ValueError for a shard that failed while its `index`-th cut was read (None: while it was counted): its
    cut manifest where that does not read whole, else its recording tar (`with_audio`), naming the cut."""
    cuts = shard["cuts"]
    stop = manifest_stop(cuts)
    if stop is not None:
        line, previous = stop
        where = f"{cuts.name} cannot be read from line {line + 1} on" + (f" (after cut {previous})" if previous else "")
    else:
        broken = shard[AUDIO_FIELD] if with_audio else cuts
        cut = f"cut {cut_id_at(cuts, index)} (line {index + 1} of {cuts.name})" if index is not None else "a cut"
        where = f"{broken.name} cannot be read at {cut}"
    return ValueError(
        f"{cuts.parent}: {where}: {type(error).__name__}: {first_line(error)}; it is truncated, corrupt or of "
        f"another shard: {rebuild_hint(shard)}"
    )


def first_line(error: Exception) -> str:
    """The first line of an error's message (lhotse appends the whole cut to its loading errors)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
