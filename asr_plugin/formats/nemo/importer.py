"""``import_nemo(path)``: a NeMo (Fast)Conformer-RNNT ``.nemo`` checkpoint as our Transducer, tokenizer and front end.

`nemo_tokenizer` and `nemo_frontend_spec` read one part each, for the data module's ``tokenizer`` and
``frontend`` options (``conf/finetune/from_nemo.yaml``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from asr_plugin.declared_shapes import check_architecture_bounds, check_declared_shapes, check_finite
from asr_plugin.formats.base import LoadedModel, Settings
from asr_plugin.formats.nemo.archive import WEIGHTS_NAME, NemoArchive, read_nemo
from asr_plugin.formats.nemo.config import frontend_kwargs, lattice_record, loss_kwargs, num_classes, transducer_kwargs
from asr_plugin.formats.nemo.tokenizer import NemoTokenizer
from asr_plugin.formats.nemo.training_options import readable_training_options
from asr_plugin.formats.nemo.weights import AUXILIARY_CTC_PREFIX, NemoWeightReport, convert_state_dict
from asr_plugin.frontend.nemo import NemoMelFrontend
from asr_plugin.losses import TransducerLoss
from asr_plugin.models import Transducer, build_transducer

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
        model_kwargs: the `build_transducer` arguments (a ``conf/model`` node without ``vocab_size``), the
            lattice's record among them (``model.lattice``: RNN-T with NeMo's clamp and fastemit_lambda, or TDT
            with its durations, sigma and clamp).
        config: NeMo's model config as read from the archive.
        frontend_spec: ``frontend``'s front-end spec (``{"kind": "nemo", "options": ...}``).
        auxiliary_ctc: a hybrid RNNT-CTC model's CTC decoder as the state dict of an
            ``asr_plugin.training.AuxiliaryCTC`` head (``output.weight`` (V, H_e), ``output.bias``; blank 0),
            None for a plain transducer.
        loss: the checkpoint's own loss as a batched `TransducerLoss` over the model's lattice (TDT: with its
            omega); ``TransducerLoss("samplewise", model.lattice, **loss_options)`` is the same loss sample by
            sample.
        loss_options: its keyword arguments besides the lattice (TDT: ``omega``; RNN-T: none).
        path: the ``.nemo`` file.
    """

    model: Transducer
    tokenizer: NemoTokenizer
    frontend: NemoMelFrontend
    report: NemoWeightReport
    model_kwargs: dict[str, Any]
    config: dict[str, Any]
    frontend_spec: dict[str, Any]
    auxiliary_ctc: dict[str, torch.Tensor] | None
    loss: TransducerLoss
    loss_options: dict[str, Any]
    path: Path | None = None

    def loaded(self) -> LoadedModel:
        """The import as the seam's `LoadedModel`: its settings are NeMo's training options and the loss options;
        one this project cannot express (a SpecAugment of another kind) is refused where it is used."""
        settings, refused = readable_training_options(self.config)
        return LoadedModel(
            self.model,
            {**self.model_kwargs, "vocab_size": self.model.vocab_size},
            self.tokenizer,
            self.frontend_spec,
            Settings({**settings, **self.loss_options}, refused, str(self.path)),
            self.auxiliary_ctc,
            (self.path,) if self.path is not None else (),
            "nemo",
        )


def _checked_vocabulary(archive: NemoArchive, state: dict[str, torch.Tensor]) -> int:
    """Our vocabulary size (NeMo's num_classes + blank), checked against the weights (a TDT joint has its
    duration rows after the tokens)."""
    vocab_size = num_classes(archive.config) + 1
    extra = len(lattice_record(archive.config).get("durations", ()))
    rows = state.get("joint.output.weight")
    if rows is None or rows.shape[0] != vocab_size + extra:
        found = None if rows is None else rows.shape[0]
        raise ValueError(
            f"{archive.path}: joint.num_classes + 1 = {vocab_size} tokens and {extra} durations but "
            f"the joint's output layer has {found} rows"
        )
    return vocab_size


def _read_config(archive: NemoArchive, read: Callable[[Mapping[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """`read` (`transducer_kwargs`, `frontend_kwargs`) of the archive's config; its ValueError, which names the
    key, then names the file too."""
    try:
        return read(archive.config)
    except ValueError as err:
        raise ValueError(f"{archive.path}: {err}") from None


def _converted(archive: NemoArchive) -> tuple[dict[str, torch.Tensor], NemoWeightReport]:
    return convert_state_dict(archive.state_dict, len(lattice_record(archive.config).get("durations", ())))


def split_auxiliary_ctc(
    state: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor] | None]:
    """`convert_state_dict`'s output -> (the Transducer's state, the CTC head's state or None)."""
    head = {
        key[len(AUXILIARY_CTC_PREFIX) :]: value for key, value in state.items() if key.startswith(AUXILIARY_CTC_PREFIX)
    }
    return {key: value for key, value in state.items() if not key.startswith(AUXILIARY_CTC_PREFIX)}, head or None


def checked_architecture(path: str | os.PathLike) -> tuple[NemoArchive, dict[str, Any], int]:
    """The ``.nemo`` file's archive read without its weights' data (``map_location="meta"``), its
    `build_transducer` arguments and vocabulary size, after every size its config declares was bounded and the
    parameter shapes they imply were found equal to the stored ones (ValueError naming the file, the key and
    both values otherwise): building that model allocates only what the file holds."""
    archive = read_nemo(path, map_location="meta")
    model_kwargs = _read_config(archive, transducer_kwargs)
    shapes, _ = _converted(archive)
    vocab_size = _checked_vocabulary(archive, shapes)
    transducer_shapes, _ = split_auxiliary_ctc(shapes)
    arguments = {"vocab_size": vocab_size, **model_kwargs}
    check_declared_shapes(lambda: build_transducer(**arguments), arguments, transducer_shapes, str(archive.path))
    return archive, model_kwargs, vocab_size


def _checked_weights(path: str | os.PathLike) -> tuple[NemoArchive, dict[str, torch.Tensor], NemoWeightReport]:
    """The archive with its weights, read after `checked_architecture` and refused when any is NaN or infinite;
    its state dict converted to ours."""
    checked_architecture(path)
    archive = read_nemo(path)
    check_finite(archive.state_dict, f"{archive.path}: {WEIGHTS_NAME}")
    state, report = _converted(archive)
    return archive, state, report


def nemo_state_dict(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], NemoWeightReport]:
    """Our state dict from a ``.nemo`` file, after checking that its config is one we can express and its
    declared sizes are the stored ones; a hybrid model's CTC decoder is under ``auxiliary_ctc.``
    (`split_auxiliary_ctc` separates it)."""
    _, state, report = _checked_weights(path)
    return state, report


def _tokenizer(archive: NemoArchive) -> NemoTokenizer:
    tokenizer_cfg = archive.config.get("tokenizer") or {}
    if tokenizer_cfg.get("type") != "bpe":
        raise ValueError(
            f"{archive.path}: tokenizer.type={tokenizer_cfg.get('type')!r}; only SentencePiece ('bpe') "
            "tokenizers can be imported"
        )
    return NemoTokenizer(archive.artifact(tokenizer_cfg.get("model_path"), "tokenizer.model_path"))


def nemo_tokenizer(path: str | os.PathLike) -> NemoTokenizer:
    """The ``.nemo`` file's SentencePiece tokenizer with our blank policy (NeMo's token k is our k + 1) and the
    text normalisation its vocabulary implies (NeMo's English tokenizers: lower case)."""
    return _tokenizer(read_nemo(path, weights=False))


def nemo_frontend_spec(path: str | os.PathLike) -> dict[str, Any]:
    """The front-end spec of the ``.nemo`` file's preprocessor: ``{"kind": "nemo", "options": NemoMelFrontend
    arguments}`` (dither in training mode only)."""
    return {"kind": "nemo", "options": _read_config(read_nemo(path, weights=False), frontend_kwargs)}


def nemo_transducer_kwargs(path: str | os.PathLike, vocab_size: int | None = None, **overrides: Any) -> dict[str, Any]:
    """The `build_transducer` keyword arguments (``vocab_size`` included) of the ``.nemo`` file `path`'s
    architecture: what a training checkpoint stores, so that it never reads the ``.nemo`` again.

    `vocab_size` (the recipe's tokenizer) defaults to NeMo's, `overrides` replace `build_transducer` arguments.
    """
    _, model_kwargs, nemo_vocab_size = checked_architecture(path)
    arguments = {**model_kwargs, **overrides, "vocab_size": vocab_size or nemo_vocab_size}
    check_architecture_bounds(arguments, f"{path} (with the recipe's vocab_size and overrides)")
    return arguments


def nemo_transducer(path: str | os.PathLike, vocab_size: int | None = None, **overrides: Any) -> Transducer:
    """A randomly initialised Transducer with the architecture of the ``.nemo`` file `path`.

    What ``conf/model/nemo.yaml`` names, so that ``+finetune=from_nemo`` trains NeMo's architecture (see
    `nemo_transducer_kwargs`).
    """
    return build_transducer(**nemo_transducer_kwargs(path, vocab_size, **overrides))


def import_nemo(path: str | os.PathLike) -> NemoImport:
    """Reads a NeMo ``EncDecRNNTBPEModel`` or ``EncDecHybridRNNTCTCBPEModel`` checkpoint (no NeMo needed) into
    our classes: (Fast)Conformer RNN-T or TDT (``loss_name: tdt``; the model gets its lattice), hybrids with
    their CTC decoder as ``auxiliary_ctc``, cache-aware streaming encoders with every lookahead they were trained
    with (``att_context_size``: the model's contexts, NeMo's first its default; `config.streaming_kwargs`).

    Raises ValueError naming the file and the config key when the model uses something we cannot express
    (another attention, subsampling, streaming style, decoder, joint or front end), when a declared size differs
    from the stored weights' (checked before the model is built), when a weight is NaN or infinite, and when any
    of our parameters would be left without a NeMo weight.
    """
    archive, state, report = _checked_weights(path)
    model_kwargs = _read_config(archive, transducer_kwargs)
    frontend_spec = {"kind": "nemo", "options": _read_config(archive, frontend_kwargs)}
    frontend = NemoMelFrontend(**frontend_spec["options"]).eval()
    tokenizer = _tokenizer(archive)
    vocab_size = _checked_vocabulary(archive, state)
    state, auxiliary_ctc = split_auxiliary_ctc(state)
    if auxiliary_ctc is not None and auxiliary_ctc["output.weight"].shape[0] != vocab_size:
        raise ValueError(
            f"{archive.path}: the CTC decoder has {auxiliary_ctc['output.weight'].shape[0]} outputs, "
            f"the transducer {vocab_size}"
        )
    if tokenizer.vocab_size != vocab_size:
        raise ValueError(
            f"{archive.path}: the tokenizer has {tokenizer.vocab_size - 1} pieces but the model {vocab_size - 1} tokens"
        )
    model = build_transducer(vocab_size, **model_kwargs)
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f"{archive.path}: the NeMo weights do not fill our model: missing {result.missing_keys[:8]}, "
            f"unexpected {result.unexpected_keys[:8]}"
        )
    log.log(logging.WARNING if report.lost else logging.INFO, "%s", report.summary())
    options = loss_kwargs(archive.config)
    return NemoImport(
        model.eval(),
        tokenizer,
        frontend,
        report,
        model_kwargs,
        archive.config,
        frontend_spec,
        auxiliary_ctc,
        TransducerLoss("batched", model.lattice, **options),
        options,
        archive.path,
    )
