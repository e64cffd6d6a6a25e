"""NeMo (Fast)Conformer RNN-T / TDT ``.nemo`` checkpoints: import (no NeMo needed) and export back to NeMo."""

from asr_plugin.finetune.nemo.archive import NemoArchive, is_nemo_archive, read_nemo
from asr_plugin.finetune.nemo.importer import (
    NemoImport,
    import_nemo,
    nemo_frontend_spec,
    nemo_loss_kwargs,
    nemo_state_dict,
    nemo_tokenizer,
    nemo_transducer,
    nemo_transducer_kwargs,
    split_auxiliary_ctc,
)
from asr_plugin.finetune.nemo.tokenizer import NemoTokenizer
from asr_plugin.finetune.nemo.training_options import nemo_training_options, read_nemo_training_options
from asr_plugin.finetune.nemo.weights import NemoWeightReport

__all__ = [
    "NemoArchive",
    "NemoImport",
    "NemoTokenizer",
    "NemoWeightReport",
    "import_nemo",
    "is_nemo_archive",
    "nemo_frontend_spec",
    "nemo_loss_kwargs",
    "nemo_state_dict",
    "nemo_tokenizer",
    "nemo_transducer",
    "nemo_training_options",
    "nemo_transducer_kwargs",
    "read_nemo",
    "read_nemo_training_options",
    "split_auxiliary_ctc",
]
