"""NeMo (Fast)Conformer RNN-T / TDT ``.nemo`` checkpoints: import (no NeMo needed) and export back to NeMo, side by
side (`NemoFormat` is the format the seam registers)."""

from asr_plugin.formats.nemo.archive import NemoArchive, is_nemo_archive, read_nemo
from asr_plugin.formats.nemo.format import NemoFormat
from asr_plugin.formats.nemo.importer import (
    NemoImport,
    import_nemo,
    nemo_frontend_spec,
    nemo_state_dict,
    nemo_tokenizer,
    nemo_transducer,
    nemo_transducer_kwargs,
    split_auxiliary_ctc,
)
from asr_plugin.formats.nemo.tokenizer import NemoTokenizer
from asr_plugin.formats.nemo.training_options import nemo_training_options, read_nemo_training_options
from asr_plugin.formats.nemo.weights import NemoWeightReport
from asr_plugin.formats.nemo.writer import write_nemo

__all__ = [
    "NemoArchive",
    "NemoFormat",
    "NemoImport",
    "NemoTokenizer",
    "NemoWeightReport",
    "import_nemo",
    "is_nemo_archive",
    "nemo_frontend_spec",
    "nemo_state_dict",
    "nemo_tokenizer",
    "nemo_transducer",
    "nemo_training_options",
    "nemo_transducer_kwargs",
    "read_nemo",
    "read_nemo_training_options",
    "split_auxiliary_ctc",
    "write_nemo",
]
