"""Importing NeMo (Fast)Conformer-RNNT ``.nemo`` checkpoints (no NeMo needed)."""

from asr_plugin.finetune.nemo.archive import NemoArchive, is_nemo_archive, read_nemo
from asr_plugin.finetune.nemo.importer import (NemoImport, import_nemo, nemo_state_dict, nemo_transducer,
                                             nemo_transducer_kwargs)
from asr_plugin.finetune.nemo.tokenizer import NemoTokenizer
from asr_plugin.finetune.nemo.weights import NemoWeightReport

__all__ = [
    "NemoArchive",
    "NemoImport",
    "NemoTokenizer",
    "NemoWeightReport",
    "import_nemo",
    "is_nemo_archive",
    "nemo_state_dict",
    "nemo_transducer",
    "nemo_transducer_kwargs",
    "read_nemo",
]
