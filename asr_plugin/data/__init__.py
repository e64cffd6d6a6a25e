"""Data, by job: `sources` (the corpus formats a data config reads: LibriSpeech and its reader and download, the
mini corpus, NeMo manifests, lhotse cuts and Shar, and our manifests), `preparation` (manifests, tokenizer and
feature statistics written once to a work directory), `loading` (the Lightning data module, SpecAugment,
duration-bucketed batches, Shar streamed) and `demo` (the synthetic mini corpus). See docs/data.md.

The atomic writes (`asr_plugin.files`), audio reading (`asr_plugin.audio`), the tokenizer and text normalisation
(`asr_plugin.text`) and the front ends (`asr_plugin.frontend`) live in rooms of their own; their public names
are still importable from here."""

from asr_plugin.audio import SAMPLE_RATE, load_audio, probe_audio
from asr_plugin.data.demo.corpus import MINI_SPLITS, make_mini_librispeech
from asr_plugin.data.loading.augment import SpecAugment, speed_perturb
from asr_plugin.data.loading.batch import Batch
from asr_plugin.data.loading.datamodule import TransducerDataModule
from asr_plugin.data.loading.dataset import ManifestDataset, Utterance, collate_utterances
from asr_plugin.data.loading.loader import ResumableDataLoader
from asr_plugin.data.loading.sampler import DurationBatchSampler
from asr_plugin.data.preparation.feature_stats import compute_feature_stats
from asr_plugin.data.preparation.layout import CorpusLayout, tokenizer_file_name
from asr_plugin.data.preparation.pipeline import CORPORA, PREPARE_STEPS, CorpusPlan, prepare_corpus
from asr_plugin.data.preparation.prepare import prepare_split
from asr_plugin.data.sources import (
    SOURCES,
    DataSource,
    LhotseCutsSource,
    LibriSpeechSource,
    MiniCorpusSource,
    NemoManifestSource,
    build_source,
)
from asr_plugin.data.sources.download import LIBRISPEECH_MD5, check_md5, download_librispeech, md5sum
from asr_plugin.data.sources.librispeech_reader import LIBRISPEECH_SPLITS, Candidate, Skipped, scan_split
from asr_plugin.data.sources.manifest import ManifestEntry, audio_problems, read_manifest, write_manifest
from asr_plugin.files import write_atomic, write_bytes_atomic, write_text_atomic
from asr_plugin.frontend import (
    FRONTEND_KINDS,
    FeatureStats,
    GlobalNormalize,
    LogMelFeatures,
    LogMelFrontend,
    build_frontend,
    complete_frontend_spec,
    frontend_feature_dim,
    frontend_needs_stats,
    with_stats,
)
from asr_plugin.text import (
    BLANK_ID,
    CONVENTIONS,
    LIBRISPEECH_NORMALIZER,
    NormalizationCounts,
    TextNormalizer,
    Tokenizer,
    train_tokenizer,
)

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
