"""``apply_finetune``: the one call ``train(cfg)`` makes to initialise a model from pretrained weights."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from torch import nn

from asr_plugin.finetune.freeze import freeze_encoder_layers
from asr_plugin.finetune.load import LoadReport, load_pretrained
from asr_plugin.finetune.vocabulary import VOCAB_LAYERS, reinit_vocab_layers, source_vocab_size, vocabulary_changed
from asr_plugin.formats import AUTO, FORMATS, Weights, read_weights
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
    "augmentation": "checkpoint",
}
# finetune.augmentation: the checkpoint's SpecAugment, or the run's spec_augment (train(cfg) applies it)
AUGMENTATION_SOURCES = ("checkpoint", "config")


def _options(cfg: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(cfg) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"finetune config: unknown key(s) {unknown}; known: {sorted(DEFAULTS)}")
    options = {**DEFAULTS, **{key: cfg[key] for key in cfg}}
    if not options["path"]:
        raise ValueError("finetune.path: the checkpoint to start from is not set")
    if options["format"] not in (AUTO, *FORMATS):
        raise ValueError(f"finetune.format={options['format']!r}; choose one of {[AUTO, *FORMATS]}")
    return options


def _source_state(options: dict[str, Any], model: Transducer) -> Weights:
    """The checkpoint's weights under our key names (`asr_plugin.formats.read_weights`, any format), with its CTC
    head's (a NeMo hybrid model's CTC decoder, a training checkpoint's auxiliary head; None for other files)."""
    path = options["path"]
    weights = read_weights(path, options["format"], blank_id=options["source_blank_id"])
    if weights.joint_activation not in (None, model.joint.activation_name):
        log.warning(
            "%s: the source's joint uses %s but this model's joint uses %s: the imported joint.output will not "
            "reproduce the source (set model.joint_activation=%s)",
            path,
            weights.joint_activation,
            model.joint.activation_name,
            weights.joint_activation,
        )
    return weights


def apply_finetune(model: Transducer, cfg: Mapping[str, Any], auxiliary_ctc: nn.Module | None = None) -> set[str]:
    """Initialises `model` in place from ``cfg.path`` and applies the fine-tuning options.

    Steps: read the checkpoint (any format of `asr_plugin.formats.FORMATS`: Lightning ``.ckpt``, plain state
    dict, torchaudio RNNT, NeMo ``.nemo``; the file is only read) -> on a vocabulary change re-initialise ``reinit_on_vocab_change`` and exclude them ->
    copy the selected tensors with a logged `LoadReport` (``strict`` raises on anything missing,
    unexpected or mismatched) -> freeze ``freeze_encoder_layers``.

    Args:
        model: the freshly built Transducer (vocabulary size from the new tokenizer).
        cfg: the ``finetune`` node (OmegaConf or dict); keys and defaults in `DEFAULTS`.
            ``pretrained_lr`` and ``augmentation`` are not used here: the training module and ``train(cfg)``
            read them.
        auxiliary_ctc: the training module's auxiliary CTC head (``asr_plugin.training.AuxiliaryCTC``), or
            None; a NeMo hybrid RNNT-CTC checkpoint's CTC decoder (a training checkpoint's own head) is loaded
            into it (unless the vocabulary changed: then it keeps its fresh initialisation, like the other
            token-indexed layers).
    Returns:
        names (as in ``model.named_parameters()``) of the parameters loaded from the checkpoint, frozen
        ones included; the training module gives them the ``pretrained_lr`` parameter group.
    """
    report = finetune_report(model, cfg, auxiliary_ctc)
    parameters = {name for name, _ in model.named_parameters()}
    return {key for key in report.loaded if key in parameters}


def finetune_report(model: Transducer, cfg: Mapping[str, Any], auxiliary_ctc: nn.Module | None = None) -> LoadReport:
    """`apply_finetune`, returning the full `LoadReport` (of the Transducer) instead of the loaded parameter names."""
    options = _options(cfg)
    weights = _source_state(options, model)
    source, ctc_source = weights.model, weights.auxiliary_ctc
    exclude = list(options["exclude"] or [])
    changed = vocabulary_changed(model, source, options["new_vocabulary"])
    if changed:
        exclude += reinit_vocab_layers(model, list(options["reinit_on_vocab_change"]), source_vocab_size(source))
    report = load_pretrained(model, source, include=options["include"], exclude=exclude, strict=bool(options["strict"]))
    _load_auxiliary_ctc(auxiliary_ctc, ctc_source, changed, str(options["path"]))
    freeze_encoder_layers(model, int(options["freeze_encoder_layers"]))
    return report


def _load_auxiliary_ctc(head: nn.Module | None, source: dict | None, vocabulary_changed: bool, path: str) -> None:
    """The checkpoint's CTC decoder into the auxiliary CTC head, where both exist (logged either way)."""
    if source is None:
        if head is not None:
            log.info("%s has no CTC decoder: the auxiliary CTC head starts from its random initialisation", path)
        return
    if head is None:
        log.warning("%s: its CTC decoder is not used (ctc_weight=0: no auxiliary CTC head)", path)
    elif vocabulary_changed:
        log.warning("%s: its CTC decoder is not loaded (a new vocabulary): the auxiliary CTC head starts afresh", path)
    else:
        load_pretrained(head, source, strict=True)
        log.info("%s: its CTC decoder is the auxiliary CTC head", path)
