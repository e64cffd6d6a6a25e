"""Data layer: LibriSpeech reading and manifests, tokenizer (blank id 0), log-mel features and stats,
SpecAugment, duration-bucketed batching and the Lightning data module. See docs/data.md."""

from asr_plugin.data.audio import SAMPLE_RATE, load_audio, probe_audio
from asr_plugin.data.augment import SpecAugment, speed_perturb
from asr_plugin.data.batch import Batch
from asr_plugin.data.datamodule import TransducerDataModule
from asr_plugin.data.dataset import ManifestDataset, Utterance, collate_utterances
from asr_plugin.data.download import LIBRISPEECH_MD5, check_md5, download_librispeech, md5sum
from asr_plugin.data.features import FeatureStats, GlobalNormalize, LogMelFeatures
from asr_plugin.data.librispeech import LIBRISPEECH_SPLITS, Candidate, Skipped, scan_split
from asr_plugin.data.loader import ResumableDataLoader
from asr_plugin.data.manifest import ManifestEntry, read_manifest, write_manifest
from asr_plugin.data.mini_corpus import MINI_SPLITS, make_mini_librispeech
from asr_plugin.data.prepare import manifest_path, prepare_librispeech, prepare_split
from asr_plugin.data.sampler import DurationBatchSampler
from asr_plugin.data.stats import compute_feature_stats
from asr_plugin.data.text import normalize_text
from asr_plugin.data.tokenizer import BLANK_ID, Tokenizer, train_tokenizer

__all__ = [
    "BLANK_ID", "Batch", "Candidate", "DurationBatchSampler", "FeatureStats", "GlobalNormalize",
    "LIBRISPEECH_MD5", "LIBRISPEECH_SPLITS", "LogMelFeatures", "MINI_SPLITS", "ManifestDataset", "ManifestEntry",
    "ResumableDataLoader", "SAMPLE_RATE", "Skipped", "SpecAugment", "Tokenizer", "TransducerDataModule",
    "Utterance", "check_md5", "collate_utterances", "compute_feature_stats", "download_librispeech",
    "load_audio", "make_mini_librispeech", "manifest_path", "md5sum", "normalize_text", "prepare_librispeech",
    "prepare_split", "probe_audio", "read_manifest", "scan_split", "speed_perturb", "train_tokenizer",
    "write_manifest",
]
