"""Lhotse Shar training data streamed (`data=lhotse data.train_shar=<dir>`): a Shar directory written by
lhotse's SharWriter (48 kHz stereo flac, 5 shards), split over 2 simulated DDP ranks x 2 loader workers:
every cut once per epoch, the same batch count on every rank; lhotse's audio is the segment's; bad
directories are refused naming the path; a cut whose audio would be a command is refused and never run; a
damaged shard is named with its cut and what to rebuild."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import MICRO_MODEL
from two_nodes import run_two_nodes

from asr_plugin.audio import load_audio
from asr_plugin.data import TransducerDataModule, prepare_corpus
from asr_plugin.data.loading.shar_stream import equalise
from asr_plugin.data.sources.shar_cuts import read_shar_cuts, shar_cut_audio, unsafe_source
from asr_plugin.data.sources.shar_directory import shar_shards

lhotse = pytest.importorskip("lhotse")

MAX_DURATION = 10.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def _module(shar, manifests, work_dir, **options) -> TransducerDataModule:
    defaults = dict(
        work_dir=str(work_dir),
        corpus="lhotse",
        train_shar=str(shar),
        valid_cuts=[str(manifests["dev"])],
        vocab_size=48,
        max_duration=MAX_DURATION,
        num_buckets=2,
        num_workers=2,
        prepare_num_workers=1,
        seed=3,
    )
    return TransducerDataModule(**{**defaults, **options})


@pytest.fixture(scope="module")
def shar_work_dir(shar_corpus, tmp_path_factory):
    """A work directory prepared from the Shar (tokenizer, statistics) and the validation cuts."""
    shar, manifests, _ = shar_corpus
    work_dir = tmp_path_factory.mktemp("shar_work")
    dm = _module(shar, manifests, work_dir)
    dm.prepare_data()
    assert not dm.missing_prepared()
    return work_dir


def test_every_cut_once_per_epoch_and_the_ranks_run_the_same_steps(shar_corpus, shar_work_dir):
    shar, manifests, segments = shar_corpus
    durations = {s.id: s.duration for s in segments["train"]}
    orders = []
    for epoch in (0, 1):
        seen: Counter[str] = Counter()
        counts = []
        order = []
        for rank in (0, 1):
            dm = _module(shar, manifests, shar_work_dir, num_replicas=2, rank=rank)
            loader = dm.train_dataloader()
            loader.set_epoch(epoch)
            batches = list(loader)
            counts.append((len(batches), len(loader)))
            for batch in batches:
                seen.update(batch.ids)
                order += batch.ids
                assert sum(durations[i] for i in batch.ids) <= MAX_DURATION + 1e-6, batch.ids
                assert batch.features.shape[-1] == dm.feature_dim and batch.targets.shape[0] == len(batch.ids)
        assert seen == Counter(list(durations)), f"epoch {epoch}: each cut exactly once"
        assert counts[0] == counts[1] and counts[0][0] == counts[0][1], counts
        orders.append(order)
    assert orders[0] != orders[1]  # another shard order and shuffle each epoch


def test_one_rank_without_workers_reads_every_cut(shar_corpus, shar_work_dir):
    shar, manifests, segments = shar_corpus
    dm = _module(shar, manifests, shar_work_dir, num_workers=0)
    ids = [i for batch in dm.train_dataloader() for i in batch.ids]
    assert sorted(ids) == sorted(s.id for s in segments["train"])


def test_resuming_mid_epoch_yields_the_rest_of_the_epoch(shar_corpus, shar_work_dir):
    shar, manifests, _ = shar_corpus
    full = _module(shar, manifests, shar_work_dir).train_dataloader()
    full.set_epoch(1)
    expected = [batch.ids for batch in full]
    for consumed in (3, len(expected) - 2):  # the workers still in turn, and one already run out
        loader = _module(shar, manifests, shar_work_dir).train_dataloader()
        loader.set_epoch(1)
        iterator = iter(loader)
        assert [next(iterator).ids for _ in range(consumed)] == expected[:consumed]
        state = loader.state_dict()
        assert state["batches_consumed"] == consumed and state["epoch"] == 1
        resumed = _module(shar, manifests, shar_work_dir).train_dataloader()
        resumed.load_state_dict(state)
        resumed.set_epoch(1)
        # the same batches (the workers' turn restarts at the first worker, so their order may differ)
        assert sorted(batch.ids for batch in resumed) == sorted(expected[consumed:])
    other = _module(shar, manifests, shar_work_dir, num_workers=0).train_dataloader()
    with pytest.raises(ValueError, match="saved with another layout"):
        other.load_state_dict(state)


def test_the_shar_audio_is_the_segment_of_the_recording(shar_corpus):
    shar, _, segments = shar_corpus
    by_id = {s.id: s for s in segments["train"]}
    for cut in list(lhotse.CutSet.from_shar(in_dir=shar))[:4]:
        assert cut.num_channels == 2 and cut.sampling_rate == 48000
        segment = by_id[cut.id]
        ours = shar_cut_audio(cut, 16000).numpy()
        reference = load_audio(segment.path, 16000, segment.offset, segment.duration).numpy()
        n = min(len(ours), len(reference))
        assert abs(len(ours) - len(reference)) <= 1
        # the writer re-encodes the 16-bit segment losslessly: the same samples, resampled alike
        assert np.abs(ours[:n] - reference[:n]).max() < 1e-4, cut.id


def test_equalise_splits_and_merges_to_the_target():
    streams = [[[3.0, 3.0, 3.0], [4.0]], [[2.0, 2.0], [1.0]]]  # costs of each batch's cuts, per stream
    assert equalise(streams, 7, 10.0, "here") == [[3, 1], [2, 1]]  # most cuts per piece split first
    merged = equalise(streams, 3, 10.0, "here")
    assert sum(1 for stream in merged for p in stream if p) == 3 and 0 in merged[1]  # 2+2 and 1 fit together
    with pytest.raises(ValueError, match="here: a rank has too few utterances"):
        equalise(streams, 20, 10.0, "here")
    with pytest.raises(ValueError, match="here: a rank has more full batches"):
        equalise(streams, 1, 10.0, "here")


def test_bad_shar_directories_are_refused_naming_the_path(shar_corpus, tmp_path):
    shar, manifests, _ = shar_corpus
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=f"data.train_shar={missing}: no such directory"):
        _module(missing, manifests, tmp_path / "w1")
    empty_dir = tmp_path / "empty_dir"
    empty_dir.mkdir()
    with pytest.raises(ValueError, match=f"{empty_dir}: no cuts.NNNNNN.jsonl.gz"):
        _module(empty_dir, manifests, tmp_path / "w2")
    no_audio = tmp_path / "no_audio"
    no_audio.mkdir()
    for path in shar.iterdir():
        if path.name != "recording.000002.tar":
            (no_audio / path.name).write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match=rf"{no_audio}: shard\(s\) cuts.000002.jsonl.gz have no recording"):
        _module(no_audio, manifests, tmp_path / "w3")
    no_cut = tmp_path / "no_cut"
    no_cut.mkdir()
    with gzip.open(no_cut / "cuts.000000.jsonl.gz", "wt"):
        pass
    (no_cut / "recording.000000.tar").write_bytes(b"")
    with pytest.raises(ValueError, match=f"{no_cut}: its 1 shard\\(s\\) hold no cut"):
        _module(no_cut, manifests, tmp_path / "w4")
    with pytest.raises(ValueError, match="give one training set"):
        _module(shar, manifests, tmp_path / "w5", train_cuts=[str(manifests["train"])])
    assert [s["cuts"].name for s in shar_shards(shar)] == [f"cuts.00000{n}.jsonl.gz" for n in range(5)]


def test_the_pipeline_alone_says_where_a_shar_tokenizer_is_made(shar_corpus, tmp_path):
    shar, manifests, _ = shar_corpus
    dm = _module(shar, manifests, tmp_path / "work")
    with pytest.raises(ValueError, match="training set is a Shar directory.*prepare_data\\(\\)"):
        prepare_corpus(dm.plan, progress=False)  # what scripts/prepare_data.py runs


@pytest.mark.slow
def test_two_ddp_processes_run_two_whole_epochs_of_the_same_steps(shar_corpus, tmp_path):
    """The recipe on 2 "nodes" of one CPU process each (gloo on loopback), each with 2 loader workers: rank 0
    prepares while rank 1 waits; two whole epochs end on both (a rank with fewer batches would leave the other
    waiting in an all-reduce until the timeout) after the planned number of steps."""
    shar, manifests, _ = shar_corpus
    overrides = [
        "data=lhotse",
        f"data.train_shar={shar}",
        f"data.valid_cuts=[{manifests['dev']}]",
        "data.vocab_size=48",
        "data.frontend=null",  # the statistics `_module` (log-mel, the Python default) reads below
        f"data.max_duration={MAX_DURATION}",
        "data.num_buckets=2",
        "data.num_workers=2",
        "data.prepare_num_workers=1",
        *MICRO_MODEL,
        "optim.scheduler.warmup_steps=1",
        "trainer.max_epochs=2",
        "trainer.limit_val_batches=1",
        "trainer.enable_progress_bar=false",
        "callbacks.model_summary=null",
        "test=false",
        "+trainer.sync_batchnorm=false",
        f"paths.root_dir={tmp_path}",
        f"paths.data_dir={tmp_path}/data",
        f"paths.log_dir={tmp_path}/logs",
    ]
    run_two_nodes(overrides, tmp_path, "shar-ddp", timeout_s=500)
    dm = _module(shar, manifests, tmp_path / "data" / "manifests" / "lhotse", num_replicas=2, rank=1)
    per_epoch = len(dm.train_dataloader())
    (run,) = (tmp_path / "logs" / "train" / "runs").iterdir()
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    # max_epochs=2 ended the run: two epochs of the planned steps each (Lightning's last.ckpt counts 2 done)
    assert (checkpoint["epoch"], checkpoint["global_step"]) == (2, 2 * per_epoch)


def _rewrite_tar(path: Path, change) -> None:
    """Rewrites a tar member by member: `change(name, data)` gives the (name, data) written instead."""
    with tarfile.open(path) as tar:
        members = [(member, tar.extractfile(member).read()) for member in tar.getmembers()]
    with tarfile.open(path, "w") as tar:
        for member, data in members:
            member.name, data = change(member.name, data)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))


def _audio_member(path: Path, number: int) -> tarfile.TarInfo:
    """The `number`-th audio member (0: the first cut's) of a recording tar: data and metadata alternate."""
    with tarfile.open(path) as tar:
        return tar.getmembers()[2 * number]


def test_a_cut_whose_audio_is_a_command_is_refused_and_the_command_never_runs(shar_corpus, shar_work_dir, tmp_path):
    """lhotse's "no data" placeholder in the tar leaves the cut manifest's recording in place: here a shell
    command that would create a marker file. Preparation, the loader and the reader refuse it by name."""
    shar, manifests, _ = shar_corpus
    bad = shutil.copytree(shar, tmp_path / "shar")
    marker = tmp_path / "marker"
    with gzip.open(bad / "cuts.000002.jsonl.gz", "rt") as lines:
        cuts = [json.loads(line) for line in lines]
    cut = cuts[1]["id"]
    cuts[1]["recording"]["sources"] = [{"type": "command", "channels": [0, 1], "source": f"touch {marker}"}]
    with gzip.open(bad / "cuts.000002.jsonl.gz", "wt") as out:
        out.write("".join(json.dumps(c) + "\n" for c in cuts))
    _rewrite_tar(
        bad / "recording.000002.tar",
        lambda name, data: (
            (f"{cut}.nodata", b"")
            if name == f"{cut}.flac"
            else ((f"{cut}.nometa", b"") if name == f"{cut}.json" else (name, data))
        ),
    )
    refused = re.escape(f"{bad}: cut {cut} of cuts.000002.jsonl.gz names an audio source of type 'command'")
    with pytest.raises(ValueError, match=refused):
        _module(bad, manifests, tmp_path / "work").prepare_data()  # the tokenizer reads the metadata
    with pytest.raises(ValueError, match=refused):
        _module(bad, manifests, shar_work_dir, num_workers=0).train_dataloader()  # the survey reads the metadata
    with pytest.raises(ValueError, match=refused):
        for read in read_shar_cuts(shar_shards(bad), with_audio=True):  # what the loader's workers read
            shar_cut_audio(read, 16000)
    assert not marker.exists()
    for read in lhotse.CutSet.from_shar(in_dir=bad):  # lhotse alone runs it
        if read.id == cut:
            with pytest.raises(Exception):  # noqa: B017 - `touch` writes no audio, whatever lhotse then raises
                read.load_audio()
    assert marker.exists()


def test_every_audio_source_of_a_cut_is_checked():
    from lhotse import AudioSource, Recording

    def recording(kind: str, source, **fields) -> Recording:
        sources = [AudioSource(kind, [0], source)]
        return Recording("r", sources, sampling_rate=16000, num_samples=16000, duration=1.0, **fields)

    assert unsafe_source(recording("memory", b"RIFF").to_cut()) is None
    assert unsafe_source(recording("file", "/data/a.flac").to_cut()) is None
    assert "'url'" in unsafe_source(recording("url", "https://example.org/a.wav").to_cut())
    assert "shell" in unsafe_source(recording("file", "/data/a';touch x;'.OPUS").to_cut())
    impulse = recording("command", "touch x").to_dict()
    reverb = {"name": "ReverbWithImpulseResponse", "kwargs": {"rir_recording": impulse}}
    assert "'command'" in unsafe_source(recording("memory", b"RIFF", transforms=[reverb]).to_cut())


def _truncate_in_a_member(shar: Path) -> str:
    member = _audio_member(shar / "recording.000001.tar", 1)
    data = (shar / "recording.000001.tar").read_bytes()
    (shar / "recording.000001.tar").write_bytes(data[: member.offset_data + member.size // 2])
    cut = Path(member.name).stem
    return rf"recording.000001.tar cannot be read at cut {cut} \(line 2 of cuts.000001.jsonl.gz\): ReadError"


def _corrupt_flac(shar: Path) -> str:
    member = _audio_member(shar / "recording.000001.tar", 1)
    data = bytearray((shar / "recording.000001.tar").read_bytes())
    data[member.offset_data : member.offset_data + member.size] = bytes(member.size)
    (shar / "recording.000001.tar").write_bytes(bytes(data))
    cut = Path(member.name).stem
    return rf"the audio of cut {cut} in recording.000001.tar does not decode \(AudioLoadingError"


def _truncate_cuts(shar: Path) -> str:
    data = (shar / "cuts.000001.jsonl.gz").read_bytes()
    (shar / "cuts.000001.jsonl.gz").write_bytes(data[: len(data) - 12])  # the trailer and the last bytes
    return r"cuts.000001.jsonl.gz cannot be read from line \d on \(after cut \S+\): EOFError"


def _swap_tars(shar: Path) -> str:
    first, second = shar / "recording.000000.tar", shar / "recording.000001.tar"
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)
    cuts = "|".join(Path(_audio_member(tar, 0).name).stem for tar in (first, second))  # each the other's first cut
    return rf"recording.(00000[01]).tar cannot be read at cut ({cuts}) \(line 1 of cuts.\1.jsonl.gz\): AssertionError"


@pytest.mark.parametrize("damage", [_truncate_in_a_member, _corrupt_flac, _truncate_cuts, _swap_tars])
def test_a_damaged_shard_is_named_with_its_cut_and_what_to_rebuild(shar_corpus, shar_work_dir, tmp_path, damage):
    shar, manifests, _ = shar_corpus
    bad = shutil.copytree(shar, tmp_path / "shar")
    expected = damage(bad)
    with pytest.raises(ValueError, match=re.escape(f"{bad}: ") + expected) as error:
        list(_module(bad, manifests, shar_work_dir, num_workers=0).train_dataloader())
    assert "rebuild shard 00000" in str(error.value) and "CutSet.to_shar" in str(error.value)
