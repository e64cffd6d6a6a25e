"""Data layer: data sources (LibriSpeech, the mini corpus, NeMo manifests, lhotse cuts) and manifests, the preparation pipeline and its corpus layout, the
tokenizer (blank id 0, ours or NeMo's convention) with its text normalisation, front-end specs (log-mel with
global statistics, or NeMo's), SpecAugment, duration-bucketed batching and the Lightning data module.
See docs/data.md."""

from asr_plugin.audio.reading import SAMPLE_RATE, load_audio, probe_audio
from asr_plugin.data.augment import SpecAugment, speed_perturb
from asr_plugin.data.batch import Batch
from asr_plugin.data.datamodule import TransducerDataModule
from asr_plugin.data.dataset import ManifestDataset, Utterance, collate_utterances
from asr_plugin.data.download import LIBRISPEECH_MD5, check_md5, download_librispeech, md5sum
from asr_plugin.data.layout import CorpusLayout, tokenizer_file_name
from asr_plugin.data.librispeech import LIBRISPEECH_SPLITS, Candidate, Skipped, scan_split
from asr_plugin.data.loader import ResumableDataLoader
from asr_plugin.data.manifest import ManifestEntry, audio_problems, read_manifest, write_manifest
from asr_plugin.data.mini_corpus import MINI_SPLITS, make_mini_librispeech
from asr_plugin.data.pipeline import CORPORA, PREPARE_STEPS, CorpusPlan, prepare_corpus
from asr_plugin.data.prepare import prepare_split
from asr_plugin.data.sampler import DurationBatchSampler
from asr_plugin.data.sources import (
    SOURCES,
    DataSource,
    LhotseCutsSource,
    LibriSpeechSource,
    MiniCorpusSource,
    NemoManifestSource,
    build_source,
)
from asr_plugin.data.stats import compute_feature_stats
from asr_plugin.files import write_atomic, write_bytes_atomic, write_text_atomic
from asr_plugin.frontend.logmel import FeatureStats, GlobalNormalize, LogMelFeatures
from asr_plugin.frontend.spec import (
    FRONTEND_KINDS,
    LogMelFrontend,
    build_frontend,
    complete_frontend_spec,
    frontend_feature_dim,
    frontend_needs_stats,
    with_stats,
)
from asr_plugin.text.normalize import LIBRISPEECH_NORMALIZER, NormalizationCounts, TextNormalizer
from asr_plugin.text.tokenizer import BLANK_ID, CONVENTIONS, Tokenizer, train_tokenizer

__all__ = [
    "BLANK_ID",
    "Batch",
    "CONVENTIONS",
    "CORPORA",
    "Candidate",
    "CorpusLayout",
    "CorpusPlan",
    "DataSource",
    "DurationBatchSampler",
    "LhotseCutsSource",
    "LibriSpeechSource",
    "MiniCorpusSource",
    "NemoManifestSource",
    "SOURCES",
    "build_source",
    "FRONTEND_KINDS",
    "FeatureStats",
    "GlobalNormalize",
    "LIBRISPEECH_MD5",
    "LIBRISPEECH_NORMALIZER",
    "LIBRISPEECH_SPLITS",
    "LogMelFeatures",
    "LogMelFrontend",
    "MINI_SPLITS",
    "ManifestDataset",
    "ManifestEntry",
    "NormalizationCounts",
    "PREPARE_STEPS",
    "ResumableDataLoader",
    "SAMPLE_RATE",
    "Skipped",
    "SpecAugment",
    "TextNormalizer",
    "Tokenizer",
    "TransducerDataModule",
    "Utterance",
    "audio_problems",
    "build_frontend",
    "check_md5",
    "collate_utterances",
    "complete_frontend_spec",
    "compute_feature_stats",
    "download_librispeech",
    "frontend_feature_dim",
    "frontend_needs_stats",
    "load_audio",
    "make_mini_librispeech",
    "md5sum",
    "prepare_corpus",
    "prepare_split",
    "probe_audio",
    "read_manifest",
    "scan_split",
    "speed_perturb",
    "tokenizer_file_name",
    "train_tokenizer",
    "with_stats",
    "write_atomic",
    "write_bytes_atomic",
    "write_manifest",
    "write_text_atomic",
]
