"""Fine-tuning: partial loading with a report, freezing, vocabulary change; the weights come from any model file
the seam reads (`asr_plugin.formats.read_weights`)."""

from asr_plugin.finetune.apply import apply_finetune, finetune_report
from asr_plugin.finetune.freeze import freeze_encoder_layers
from asr_plugin.finetune.load import LoadReport, key_matcher, load_pretrained
from asr_plugin.finetune.vocabulary import reinit_vocab_layers, vocabulary_changed

__all__ = [
    "LoadReport",
    "apply_finetune",
    "finetune_report",
    "freeze_encoder_layers",
    "key_matcher",
    "load_pretrained",
    "reinit_vocab_layers",
    "vocabulary_changed",
]
