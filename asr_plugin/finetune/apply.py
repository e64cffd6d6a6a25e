"""``apply_finetune``: the one call ``train(cfg)`` makes to initialise a model from pretrained weights."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from torch import nn

from asr_plugin.finetune.checkpoint import STATE_DICT_FORMATS, extract_model_state, load_checkpoint_file
from asr_plugin.finetune.freeze import freeze_encoder_layers
from asr_plugin.finetune.load import LoadReport, load_pretrained
from asr_plugin.finetune.nemo import is_nemo_archive, nemo_state_dict
from asr_plugin.finetune.torchaudio_rnnt import import_torchaudio_rnnt, is_torchaudio_rnnt
from asr_plugin.finetune.vocabulary import VOCAB_LAYERS, reinit_vocab_layers, source_vocab_size, vocabulary_changed
from asr_plugin.models import Transducer

log = logging.getLogger(__name__)

# conf/finetune/from_checkpoint.yaml holds every key with its default and meaning.
DEFAULTS: dict[str, Any] = {
    "path": None,
    "format": "auto",
    "include": None,
    "exclude": [],
    "strict": False,
    "new_vocabulary": "auto",
    "reinit_on_vocab_change": list(VOCAB_LAYERS),
    "freeze_encoder_layers": 0,
    "source_blank_id": None,
    "pretrained_lr": None,
}
FORMATS = STATE_DICT_FORMATS + ("torchaudio_rnnt", "nemo")


def _options(cfg: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(cfg) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"finetune config: unknown key(s) {unknown}; known: {sorted(DEFAULTS)}")
    options = {**DEFAULTS, **{key: cfg[key] for key in cfg}}
    if not options["path"]:
        raise ValueError("finetune.path: the checkpoint to start from is not set")
    if options["format"] not in FORMATS:
        raise ValueError(f"finetune.format={options['format']!r}; choose one of {FORMATS}")
    return options


def _source_state(options: dict[str, Any], model: Transducer) -> dict:
    """The checkpoint's weights under our key names, importing foreign formats."""
    path, fmt = options["path"], options["format"]
    if fmt == "nemo" or (fmt == "auto" and is_nemo_archive(path)):
        state, report = nemo_state_dict(path)  # raises on a missing file or a config we cannot express
        log.log(logging.WARNING if report.lost else logging.INFO, "%s: %s", path, report.summary())
        return state
    obj = load_checkpoint_file(path)
    if fmt == "torchaudio_rnnt" or (fmt == "auto" and isinstance(obj, dict) and is_torchaudio_rnnt(obj)):
        if not isinstance(obj, dict) or not is_torchaudio_rnnt(obj):
            raise ValueError(f"{path}: format=torchaudio_rnnt but the file is not a torchaudio RNNT state dict")
        imported = import_torchaudio_rnnt(obj, options["source_blank_id"])
        log.warning("%s: %s", path, imported.summary())
        if not isinstance(model.joint.activation, nn.ReLU):
            log.warning("torchaudio's joiner uses ReLU but this model's joint uses %s: the imported joint.output "
                        "will not reproduce the source (set model.joint_activation=relu)", type(model.joint.activation).__name__)
        return imported.state_dict
    return extract_model_state(obj, str(path), fmt)


def apply_finetune(model: Transducer, cfg: Mapping[str, Any]) -> set[str]:
    """Initialises `model` in place from ``cfg.path`` and applies the fine-tuning options.

    Steps: read the checkpoint (Lightning ``.ckpt``, plain state dict, torchaudio RNNT or NeMo ``.nemo``;
    the file is only read) -> on a vocabulary change re-initialise ``reinit_on_vocab_change`` and exclude them ->
    copy the selected tensors with a logged `LoadReport` (``strict`` raises on anything missing,
    unexpected or mismatched) -> freeze ``freeze_encoder_layers``.

    Args:
        model: the freshly built Transducer (vocabulary size from the new tokenizer).
        cfg: the ``finetune`` node (OmegaConf or dict); keys and defaults in `DEFAULTS`.
            ``pretrained_lr`` is not used here: the training module reads it.
    Returns:
        names (as in ``model.named_parameters()``) of the parameters loaded from the checkpoint, frozen
        ones included; the training module gives them the ``pretrained_lr`` parameter group.
    """
    report = finetune_report(model, cfg)
    parameters = {name for name, _ in model.named_parameters()}
    return {key for key in report.loaded if key in parameters}


def finetune_report(model: Transducer, cfg: Mapping[str, Any]) -> LoadReport:
    """`apply_finetune`, returning the full `LoadReport` instead of the loaded parameter names."""
    options = _options(cfg)
    source = _source_state(options, model)
    exclude = list(options["exclude"] or [])
    if vocabulary_changed(model, source, options["new_vocabulary"]):
        exclude += reinit_vocab_layers(model, list(options["reinit_on_vocab_change"]), source_vocab_size(source))
    report = load_pretrained(model, source, include=options["include"], exclude=exclude, strict=bool(options["strict"]))
    freeze_encoder_layers(model, int(options["freeze_encoder_layers"]))
    return report
