"""Fine-tuning: partial loading with a report, freezing, vocabulary change, foreign-format import and NeMo export."""

from asr_plugin.finetune.apply import apply_finetune, finetune_report
from asr_plugin.finetune.checkpoint import extract_model_state, read_model_state
from asr_plugin.finetune.freeze import freeze_encoder_layers
from asr_plugin.finetune.load import LoadReport, key_matcher, load_pretrained
from asr_plugin.finetune.nemo import NemoImport, import_nemo
from asr_plugin.finetune.nemo.export import export_nemo
from asr_plugin.finetune.torchaudio_rnnt import ImportResult, import_torchaudio_rnnt
from asr_plugin.finetune.vocabulary import reinit_vocab_layers, vocabulary_changed

__all__ = [
    "ImportResult",
    "LoadReport",
    "NemoImport",
    "apply_finetune",
    "export_nemo",
    "extract_model_state",
    "finetune_report",
    "freeze_encoder_layers",
    "import_nemo",
    "import_torchaudio_rnnt",
    "key_matcher",
    "load_pretrained",
    "read_model_state",
    "reinit_vocab_layers",
    "vocabulary_changed",
]
