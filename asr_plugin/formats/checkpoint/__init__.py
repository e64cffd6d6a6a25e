"""The project's training checkpoint (a ``TransducerModule``'s Lightning ``.ckpt``): what it holds, reading it
without running anything from it, writing it, and averaging the checkpoints of a run.

A checkpoint carries everything needed to reload, decode, evaluate, export and resume its model:

- ``hyper_parameters.max_symbols_per_frame``: the greedy decoding its validation used, and eval, transcription
  and export decode with (``LoadedModel.decoding``) unless told otherwise; the loss reductions, the auxiliary
  CTC weight and the SpecAugment node a fine-tuning run from it takes (``LoadedModel.settings``);
- ``hyper_parameters.model``: the architecture as plain ``asr_plugin.models.build_transducer`` keyword
  arguments (``_target_: asr_plugin.models.build_transducer``), its lattice as a record
  (``model.lattice``: ``asr_plugin.losses.lattice_from_record``); a run built from a ``.nemo`` stores the
  architecture it read there, so the ``.nemo`` is never read again. Checkpoints written before the model owned
  its lattice (TDT ``durations`` in the model node; ``clamp``, ``durations``, ``sigma`` in the loss node) are
  read in today's layout (`with_model_lattice`);
- ``state_dict``: weights, the Transducer's under ``model.``, an auxiliary CTC head's under ``ctc.``;
- ``asr_plugin``: the run's records: ``tokenizer`` (``Tokenizer.record()``: the SentencePiece model's bytes,
  sha256, size, blank id, convention, normalisation), ``frontend`` (the complete front-end spec, global
  statistics included) and the fine-tuning state (``pretrained``, ``frozen`` parameter names);
- ``asr_plugin_content_hash``: the SHA-256 of every tensor it holds (`content_hash`), which every read checks
  (with the finiteness of its weights: `read_checkpoint`).

Every ``torch.load`` is ``weights_only=True``; the model node is built with `MODEL_TARGETS` only, and by every
entry point that reads a checkpoint (evaluation, transcription, export, resuming a fine-tuned run) only after
`check_model_node` found its declared sizes in the stored weights.
"""

from asr_plugin.formats.checkpoint.content_hash import CONTENT_HASH_KEY, content_hash, verify_content_hash
from asr_plugin.formats.checkpoint.files import (
    check_finite_optimizer_state,
    check_finite_weights,
    read_checkpoint,
    write_checkpoint,
)
from asr_plugin.formats.checkpoint.format import LightningCheckpointFormat, auxiliary_ctc_state, load_model
from asr_plugin.formats.checkpoint.model_node import (
    BUILD_TRANSDUCER,
    MODEL_NODE,
    MODEL_TARGETS,
    build_checked_model,
    build_model,
    check_model_node,
    current_hyper_parameters,
    model_node,
    with_model_lattice,
)
from asr_plugin.formats.checkpoint.records import RECORDS_KEY, CheckpointInfo, checkpoint_records
from asr_plugin.formats.checkpoint.selection import average_state_dicts, checkpoint_order, select_checkpoints

__all__ = [
    "BUILD_TRANSDUCER",
    "CONTENT_HASH_KEY",
    "MODEL_NODE",
    "MODEL_TARGETS",
    "RECORDS_KEY",
    "CheckpointInfo",
    "LightningCheckpointFormat",
    "auxiliary_ctc_state",
    "average_state_dicts",
    "build_checked_model",
    "build_model",
    "check_finite_optimizer_state",
    "check_finite_weights",
    "check_model_node",
    "checkpoint_order",
    "checkpoint_records",
    "content_hash",
    "current_hyper_parameters",
    "load_model",
    "model_node",
    "read_checkpoint",
    "select_checkpoints",
    "verify_content_hash",
    "with_model_lattice",
    "write_checkpoint",
]
