"""Fine-tuning: partial loading with a report, freezing, vocabulary change, foreign-format import and NeMo export."""

from asr_plugin.finetune.apply import apply_finetune, finetune_report
from asr_plugin.finetune.freeze import freeze_encoder_layers
from asr_plugin.finetune.load import LoadReport, key_matcher, load_pretrained
from asr_plugin.finetune.nemo import NemoImport, import_nemo
from asr_plugin.finetune.nemo.export import export_nemo
from asr_plugin.finetune.vocabulary import reinit_vocab_layers, vocabulary_changed

__all__ = [
    "LoadReport",
    "NemoImport",
    "apply_finetune",
    "export_nemo",
    "finetune_report",
    "freeze_encoder_layers",
    "import_nemo",
    "key_matcher",
    "load_pretrained",
    "reinit_vocab_layers",
    "vocabulary_changed",
]
