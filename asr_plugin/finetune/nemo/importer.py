"""``import_nemo(path)``: a NeMo (Fast)Conformer-RNNT ``.nemo`` checkpoint as our Transducer, tokenizer and front end."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import torch

from asr_plugin.finetune.nemo.archive import NemoArchive, read_nemo
from asr_plugin.finetune.nemo.config import frontend_kwargs, num_classes, transducer_kwargs
from asr_plugin.finetune.nemo.tokenizer import NemoTokenizer
from asr_plugin.finetune.nemo.weights import NemoWeightReport, convert_state_dict
from asr_plugin.models import NemoMelFrontend, Transducer, build_transducer

log = logging.getLogger(__name__)


@dataclass
class NemoImport:
    """What `import_nemo` returns.

    Attributes:
        model: our Transducer with every NeMo weight (eval mode); ``model.encode(features, lengths)``
            takes ``frontend``'s output.
        tokenizer: NeMo's SentencePiece model with the blank at id 0 (`NemoTokenizer`).
        frontend: 16 kHz audio (B, S) and (B,) lengths -> (B, T, F) features, (B,) lengths (eval mode:
            no dither; ``.train()`` turns NeMo's training dither on).
        report: NeMo tensors mapped and not imported (with reasons).
        model_kwargs: the `build_transducer` arguments (a ``conf/model`` node without ``vocab_size``).
        config: NeMo's model config as read from the archive.
    """

    model: Transducer
    tokenizer: NemoTokenizer
    frontend: NemoMelFrontend
    report: NemoWeightReport
    model_kwargs: dict[str, Any]
    config: dict[str, Any]


def _checked_vocabulary(archive: NemoArchive, state: dict[str, torch.Tensor]) -> int:
    """Our vocabulary size (NeMo's num_classes + blank), checked against the weights."""
    vocab_size = num_classes(archive.config) + 1
    rows = state.get("joint.output.weight")
    if rows is None or rows.shape[0] != vocab_size:
        found = None if rows is None else rows.shape[0]
        raise ValueError(f"{archive.path}: joint.num_classes + 1 = {vocab_size} but the joint's output layer has "
                         f"{found} rows")
    return vocab_size


def nemo_state_dict(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], NemoWeightReport]:
    """Our state dict from a ``.nemo`` file, after checking that its config is one we can express."""
    archive = read_nemo(path)
    transducer_kwargs(archive.config)
    state, report = convert_state_dict(archive.state_dict)
    _checked_vocabulary(archive, state)
    return state, report


def nemo_transducer_kwargs(path: str | os.PathLike, vocab_size: int | None = None, **overrides: Any) -> dict[str, Any]:
    """The `build_transducer` keyword arguments (``vocab_size`` included) of the ``.nemo`` file `path`'s
    architecture: what a training checkpoint stores, so that it never reads the ``.nemo`` again.

    `vocab_size` (the recipe's tokenizer) defaults to NeMo's, `overrides` replace `build_transducer` arguments.
    """
    archive = read_nemo(path, weights=False)
    return {**transducer_kwargs(archive.config), **overrides,
            "vocab_size": vocab_size or num_classes(archive.config) + 1}


def nemo_transducer(path: str | os.PathLike, vocab_size: int | None = None, **overrides: Any) -> Transducer:
    """A randomly initialised Transducer with the architecture of the ``.nemo`` file `path`.

    What ``conf/model/nemo.yaml`` names, so that ``+finetune=from_nemo`` trains NeMo's architecture (see
    `nemo_transducer_kwargs`).
    """
    return build_transducer(**nemo_transducer_kwargs(path, vocab_size, **overrides))


def import_nemo(path: str | os.PathLike) -> NemoImport:
    """Reads a NeMo ``EncDecRNNTBPEModel`` checkpoint (no NeMo needed) into our classes.

    Raises ValueError naming the config key when the model uses something we cannot express
    (another attention, subsampling, decoder, joint or front end), and when any of our parameters
    would be left without a NeMo weight.
    """
    archive = read_nemo(path)
    model_kwargs = transducer_kwargs(archive.config)
    frontend = NemoMelFrontend(**frontend_kwargs(archive.config)).eval()
    tokenizer_cfg = archive.config.get("tokenizer") or {}
    if tokenizer_cfg.get("type") != "bpe":
        raise ValueError(f"{archive.path}: tokenizer.type={tokenizer_cfg.get('type')!r}; only SentencePiece ('bpe') "
                         "tokenizers can be imported")
    tokenizer = NemoTokenizer(archive.artifact(tokenizer_cfg.get("model_path"), "tokenizer.model_path"))
    state, report = convert_state_dict(archive.state_dict)
    vocab_size = _checked_vocabulary(archive, state)
    if tokenizer.vocab_size != vocab_size:
        raise ValueError(f"{archive.path}: the tokenizer has {tokenizer.vocab_size - 1} pieces but the model "
                         f"{vocab_size - 1} tokens")
    model = build_transducer(vocab_size, **model_kwargs)
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"{archive.path}: the NeMo weights do not fill our model: missing {result.missing_keys[:8]}, "
                         f"unexpected {result.unexpected_keys[:8]}")
    log.log(logging.WARNING if report.lost else logging.INFO, "%s", report.summary())
    return NemoImport(model.eval(), tokenizer, frontend, report, model_kwargs, archive.config)
