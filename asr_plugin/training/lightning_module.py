"""Lightning module that trains a Conformer-transducer with the configured transducer loss."""

from __future__ import annotations

from typing import Any, Iterable

import lightning as L
import torch
from torchmetrics.text import WordErrorRate

from asr_plugin.config_nodes import AllowList
from asr_plugin.data import SpecAugment
from asr_plugin.data.loading.batch import Batch
from asr_plugin.decoding import greedy_search
from asr_plugin.decoding.hypothesis import TokenDecoder
from asr_plugin.formats.checkpoint import (
    RECORDS_KEY,
    build_model,
    checkpoint_records,
    read_checkpoint,
    with_model_lattice,
)
from asr_plugin.losses import TransducerLattice, TransducerLoss, lattice_from_record
from asr_plugin.models.context import draw_context
from asr_plugin.training.ctc_auxiliary import AuxiliaryCTC
from asr_plugin.training.loss_reduction import LEGACY_REDUCTIONS, check_reduction, reduce_losses, reduction_parts
from asr_plugin.training.memory import PeakMemoryMeter
from asr_plugin.training.resume_checks import check_resumable
from asr_plugin.training.schedulers import warmup_cosine, warmup_noam

# What the module builds from its (checkpointed) config nodes: the project's own classes, torch's optimizers.
LOSS_TARGETS = AllowList({"asr_plugin.losses.TransducerLoss": TransducerLoss})
# SpecAugment was defined in asr_plugin.data.augment until data/ was cut by job
SPEC_AUGMENT_TARGETS = AllowList(
    {"asr_plugin.data.SpecAugment": SpecAugment}, former={"asr_plugin.data.augment.SpecAugment": SpecAugment}
)
OPTIMIZER_TARGETS = AllowList({}, optimizers=True)
SCHEDULER_TARGETS = AllowList(
    {
        "asr_plugin.training.schedulers.warmup_noam": warmup_noam,
        "asr_plugin.training.schedulers.warmup_cosine": warmup_cosine,
    }
)
# {config key: what its node may name}
NODE_TARGETS = {
    "loss": LOSS_TARGETS,
    "spec_augment": SPEC_AUGMENT_TARGETS,
    "optim.optimizer": OPTIMIZER_TARGETS,
    "optim.scheduler": SCHEDULER_TARGETS,
}


def build_loss(node: dict[str, Any], lattice: TransducerLattice) -> TransducerLoss:
    """The loss of config node `node` over the model's `lattice`: the model owns it (decoding reads it there), so
    a ``loss.lattice`` that differs from it is refused, naming both."""
    given = node.get("lattice")
    if given is not None and lattice_from_record(given, "loss.lattice") != lattice:
        raise ValueError(
            f"loss.lattice = {dict(given)} contradicts model.lattice = {lattice.record()}: the loss "
            "trains the model's lattice and decoding reads it there; set it in model.lattice only"
        )
    return LOSS_TARGETS.build({**node, "lattice": lattice.record()}, "loss")


class TransducerModule(L.LightningModule):
    """Features -> SpecAugment (training only) -> encoder -> predictor -> ``TransducerLoss``.

    Everything is built from plain config dicts (the nodes of ``conf/``), which ``save_hyperparameters``
    stores in the checkpoint, so ``TransducerModule.load_from_checkpoint(path)`` rebuilds the model
    without Hydra. The nodes are data: only the allow-listed targets below are built (a checkpoint naming
    any other ``_target_`` is refused), and wrong-type arguments fail here, naming the key. Parameters live
    under ``self.model`` (checkpoint keys ``model.encoder...``).

    Args:
        model: ``asr_plugin.models.build_transducer`` node (its keyword arguments; ``train(cfg)`` turns
            ``conf/model/nemo.yaml`` into one, so the checkpoint holds the architecture itself).
        loss: ``asr_plugin.losses.TransducerLoss`` node; its ``mode`` (batched or samplewise) changes
            memory, never the loss value. Its lattice is the model's (``model.lattice``; a ``loss.lattice``
            that differs is an error). Nodes of checkpoints written before the model owned its lattice are
            converted (``asr_plugin.formats.checkpoint.with_model_lattice``).
            It is built with ``reduction="none"``: the module reduces the per-utterance losses itself
            (`loss_reduction`); a node's own ``reduction`` ("mean" or "sum", as checkpoints of earlier versions
            hold) is read as ``mean_batch`` or ``sum``.
        optim: ``optimizer`` (a ``torch.optim`` optimizer) and ``scheduler`` (``warmup_noam`` or
            ``warmup_cosine``) ``_partial_`` nodes (``conf/optim/*.yaml``); the scheduler is called with the
            optimizer and ``total_steps`` and stepped every optimizer step.
        spec_augment: ``asr_plugin.data.SpecAugment`` node, or None for no masking.
        max_symbols_per_frame: greedy-search cap used for the validation/test WER.
        pretrained_lr: lr of the parameters loaded by fine-tuning (see :meth:`mark_pretrained`);
            None puts every parameter at the optimizer's lr.
        ctc_weight: w in ``(1 - w) * transducer + w * CTC`` for training (:class:`AuxiliaryCTC` on the encoder
            frames, its head under ``self.ctc``), each term reduced by its own reduction, as NeMo's hybrid
            models combine them; 0 trains the transducer loss alone. Validation and test losses are the
            transducer loss per utterance (nats per utterance) whatever the reductions.
        loss_reduction: how the transducer's per-utterance losses become the training loss: NeMo's
            ``mean_batch`` (per utterance), ``mean_volume`` (per token), ``mean`` or ``sum``
            (`asr_plugin.training.loss_reduction`); None: the loss node's legacy ``reduction``, else ``mean_batch``.
        ctc_reduction: the same for the auxiliary CTC loss (NeMo's ``aux_ctc.ctc_reduction``).
        att_context_seed: seeds the draw of a multi-lookahead encoder's attention context (``model.att_context_size``
            lists several): each training step draws one with ``model.att_context_probs`` from a generator seeded
            with this seed and the global step (`training_context`), so every DDP rank draws the same context
            without communicating and a resumed run draws the same sequence. Validation and test use the
            encoder's default context (the first of the list).
    """

    def __init__(
        self,
        model: dict[str, Any],
        loss: dict[str, Any],
        optim: dict[str, Any],
        spec_augment: dict[str, Any] | None = None,
        max_symbols_per_frame: int = 10,
        pretrained_lr: float | None = None,
        ctc_weight: float = 0.0,
        loss_reduction: str | None = None,
        ctc_reduction: str = "mean_batch",
        att_context_seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0.0 <= ctc_weight < 1.0:
            raise ValueError(f"ctc_weight must lie in [0, 1), got {ctc_weight}")
        if not 0 <= att_context_seed < 2**32:
            raise ValueError(f"att_context_seed must lie in [0, 2**32), got {att_context_seed}")
        model, loss = with_model_lattice(model, loss)  # before save_hyperparameters: checkpoints store today's layout
        self.save_hyperparameters()
        self.model = build_model(model, "model")
        self.loss_reduction = training_reduction(loss, loss_reduction)
        self.hparams["loss_reduction"] = self.loss_reduction  # checkpoints record the reduction in effect
        self.ctc_reduction = check_reduction(ctc_reduction, "ctc_reduction")
        self.loss_fn = build_loss({**loss, "reduction": "none"}, self.model.lattice)  # (B,) losses, reduced here
        self.spec_augment = SPEC_AUGMENT_TARGETS.build(spec_augment, "spec_augment") if spec_augment else None
        # partials, built (and type-checked) now so that a bad optimiser node fails before training starts
        self.optimizer_factory = OPTIMIZER_TARGETS.build(optim["optimizer"], "optim.optimizer")
        self.scheduler_factory = SCHEDULER_TARGETS.build(optim["scheduler"], "optim.scheduler")
        # the run's data records (tokenizer, front end) saved with every checkpoint; see set_records
        self.records: dict[str, Any] = {}
        self.wer = torch.nn.ModuleDict({"val": WordErrorRate()})  # one per evaluation set, see _evaluate
        self.pretrained_names: set[str] = set()
        self.tokenizer: TokenDecoder | None = None  # falls back to the datamodule's tokenizer
        self.memory = PeakMemoryMeter()
        self.ctc = None
        if ctc_weight > 0:
            self.ctc = AuxiliaryCTC(self.model.encoder.output_dim, self.model.vocab_size, blank=self.model.blank_id)

    def mark_pretrained(self, names: Iterable[str]) -> None:
        """Records the ``self.model`` parameter names loaded from a pretrained checkpoint; they form the
        optimizer's ``pretrained_lr`` group."""
        known = {name for name, _ in self.model.named_parameters()}
        unknown = sorted(set(names) - known)
        if unknown:
            raise ValueError(f"pretrained parameter names not in the model: {unknown[:5]}")
        self.pretrained_names = set(names)

    def set_records(self, **records: Any) -> None:
        """What the data gave this model, saved in every checkpoint (``checkpoint["asr_plugin"]``) and compared
        on resume: ``tokenizer`` (the tokenizer's record: model bytes, hash, size, blank id) and ``frontend``
        (the features' settings)."""
        self.records.update(records)

    # ---------------------------------------------------------------- checkpoints

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Adds the records and the fine-tuning state (loaded and frozen parameter names) that resuming needs
        without the pretrained file."""
        frozen = sorted(name for name, param in self.model.named_parameters() if not param.requires_grad)
        checkpoint[RECORDS_KEY] = {**self.records, "pretrained": sorted(self.pretrained_names), "frozen": frozen}

    @classmethod
    def load_from_checkpoint(
        cls, checkpoint_path: Any, map_location: Any = None, strict: bool | None = None, **kwargs: Any
    ) -> TransducerModule:  # type: ignore[override]
        """The module of a training checkpoint, as Lightning's ``load_from_checkpoint`` (`kwargs` replace
        hyper-parameters), the file read through the model-format seam: ``weights_only``, its content hash and the
        finiteness of its weights checked (`asr_plugin.formats.checkpoint.read_checkpoint`)."""
        from lightning.pytorch.core.saving import _load_state  # Lightning's restore of a loaded checkpoint

        checkpoint = read_checkpoint(checkpoint_path, map_location=map_location, mmap=False)
        checkpoint.setdefault(cls.CHECKPOINT_HYPER_PARAMS_KEY, {}).update(kwargs)
        module = _load_state(cls, checkpoint, strict=strict, **kwargs)
        tensors = (value for value in checkpoint.get("state_dict", {}).values() if isinstance(value, torch.Tensor))
        return module.to(next(tensors, torch.tensor(0)).device)  # where the weights were mapped, as Lightning's

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuses a checkpoint of another tokenizer, front end or architecture (naming what differs), then
        takes its fine-tuning state (parameter groups and frozen parameters, so the optimizer state fits)."""
        records = checkpoint_records(checkpoint)
        check_resumable(self, checkpoint)
        for key in ("tokenizer", "frontend"):
            if key in records and key not in self.records:  # load_from_checkpoint: the checkpoint's own
                self.records[key] = records[key]
        self.mark_pretrained(records.get("pretrained", []))
        frozen = set(records.get("frozen", []))
        for name, param in self.model.named_parameters():
            if name in frozen:
                param.requires_grad_(False)

    # ---------------------------------------------------------------- steps

    def training_context(self, step: int) -> tuple[int, int] | None:
        """The attention context of training step `step` (`asr_plugin.models.context.draw_context` seeded with
        ``att_context_seed``); None when the encoder has one context (it is then the default anyway)."""
        encoder = self.model.encoder
        if len(encoder.att_context_sizes) < 2:
            return None
        return draw_context(encoder.att_context_sizes, encoder.att_context_probs, self.hparams.att_context_seed, step)

    def utterance_losses(
        self, batch: Batch, features: torch.Tensor, att_context_size: tuple[int, int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T_feat, F) features -> ((B,) transducer loss per utterance, (B, T, H_e) encoder frames, (B,) lengths).

        Encodes once (with `att_context_size`, None: the encoder's default), so evaluation reuses the frames
        for greedy decoding.
        """
        encoder_out, encoder_lengths = self.model.encode(features, batch.feature_lengths, att_context_size)
        losses = self.model.loss_from_encoder(
            encoder_out, encoder_lengths, batch.targets, batch.target_lengths, self.loss_fn
        )
        return losses, encoder_out, encoder_lengths

    def compute_loss(self, batch: Batch, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`utterance_losses` with the losses reduced by `loss_reduction` on this process -> (scalar, frames, lengths)."""
        losses, encoder_out, encoder_lengths = self.utterance_losses(batch, features)
        return reduce_losses(losses, batch.target_lengths, self.loss_reduction), encoder_out, encoder_lengths

    def training_loss(
        self, batch: Batch, features: torch.Tensor, att_context_size: tuple[int, int] | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss to minimise for (B, T_feat, F) features, and its parts to log ({} without auxiliary CTC):
        ``(1 - w) * transducer + w * ctc`` with w = ``ctc_weight``, each term reduced by its reduction over the
        global batch (`_reduce`); the encoder runs with `att_context_size` (None: its default)."""
        losses, encoder_out, encoder_lengths = self.utterance_losses(batch, features, att_context_size)
        if self.ctc is None:
            return self._reduce((losses,), (self.loss_reduction,), batch.target_lengths)[0], {}
        ctc_losses = self.ctc(encoder_out, encoder_lengths, batch.targets, batch.target_lengths)
        loss, ctc = self._reduce((losses, ctc_losses), (self.loss_reduction, self.ctc_reduction), batch.target_lengths)
        weight = self.hparams.ctc_weight
        return (1.0 - weight) * loss + weight * ctc, {"transducer_loss": loss.detach(), "ctc_loss": ctc.detach()}

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        features = batch.features
        if self.spec_augment is not None:
            features = self.spec_augment(features, batch.feature_lengths)
        loss, parts = self.training_loss(batch, features, self.training_context(self.global_step))
        size = len(batch)
        for name, value in parts.items():
            self.log(f"train/{name}", value, on_step=True, on_epoch=True, batch_size=size)
        # The step value is this rank's share (no extra all-reduce per step); the epoch value, the mean over ranks,
        # is the reduction over every rank's utterances (one all-reduce per epoch).
        self.log("train/loss_step", loss, on_step=True, on_epoch=False, prog_bar=True, batch_size=size)
        self.log("train/loss_epoch", loss, on_step=False, on_epoch=True, sync_dist=True, batch_size=size)
        return loss

    def _reduce(
        self, losses: tuple[torch.Tensor, ...], reductions: tuple[str, ...], target_lengths: torch.Tensor
    ) -> list[torch.Tensor]:
        """Each (B,) loss reduced by its reduction, under DDP as ``numerator * R / denominator_global``.

        DDP averages gradients over the R ranks, so the update is then the gradient of the reduction over
        every rank's utterances (B_global utterances, or their tokens for ``mean_volume``; torchaudio's
        normalisation): a rank with 3 long utterances no longer weighs as much as one with 40 short ones.
        One all-reduce of the stacked denominators per step (``torch.distributed.all_reduce``, not the
        strategy's ``reduce``, which adds a barrier) and no host sync; ``sum`` is not normalised.
        """
        parts = [reduction_parts(loss, target_lengths, reduction) for loss, reduction in zip(losses, reductions)]
        world_size = self.trainer.world_size if self._trainer is not None else 1
        present = [denominator for _, denominator in parts if denominator is not None]
        if world_size > 1 and present:
            total = torch.stack(present)
            torch.distributed.all_reduce(total)  # the global batch's denominators
            scaled = iter(total / world_size)
            parts = [(numerator, None if denominator is None else next(scaled)) for numerator, denominator in parts]
        return [numerator if denominator is None else numerator / denominator for numerator, denominator in parts]

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self.memory.reset(self.device)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        peak = self.memory.peak_mib(self.device)
        if peak is not None:  # a host number: logged as a CPU tensor (a Python float would be copied to the GPU)
            self.log("train/peak_memory_mib", torch.tensor(peak), on_step=True, on_epoch=False, batch_size=len(batch))

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clips as the Trainer is configured and logs the global gradient norm before clipping
        (``train/grad_norm``: how often `gradient_clip_val` bites).

        The norm is the one ``clip_grad_norm_`` computes anyway, logged as a device tensor: no host sync
        per step (the logger reads it every ``log_every_n_steps``). Lightning calls this after unscaling
        mixed-precision gradients.
        """
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if gradient_clip_val and gradient_clip_algorithm in (None, "norm"):
            norm = torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)
        self.log("train/grad_norm", norm, on_step=True, on_epoch=False)

    def _evaluate(self, batch: Batch, key: str) -> torch.Tensor:
        """Loss and greedy-search WER of one batch of evaluation set `key` ("val", "test" or "test/<split>")."""
        losses, encoder_out, encoder_lengths = self.utterance_losses(batch, batch.features)
        loss = losses.mean()  # nats per utterance, logged weighted by the batch size: the set's mean
        hyps = greedy_search(
            self.model, encoder_out, encoder_lengths, self.hparams.max_symbols_per_frame, self._tokenizer()
        )
        name = key.replace("/", "_")  # test sets appear during testing: created here, named for self.log
        if name not in self.wer:
            self.wer[name] = WordErrorRate().to(self.device)
        metric = self.wer[name]
        metric.update([hyp.text for hyp in hyps], list(batch.texts))
        options = dict(on_step=False, on_epoch=True, batch_size=len(batch), add_dataloader_idx=False)
        self.log(f"{key}/loss", loss, prog_bar=key == "val", sync_dist=True, **options)
        self.log(f"{key}/wer", metric, prog_bar=key == "val", metric_attribute=f"wer.{name}", **options)
        return loss

    def max_tokens(self, feature_frames: torch.Tensor) -> torch.Tensor:
        """(B,) feature frames -> (B,) the most tokens the model emits from them: its encoder frames times the
        tokens it emits per frame at most (the greedy cap it validates with)."""
        return self.model.encoder.output_lengths(feature_frames) * self.hparams.max_symbols_per_frame

    def setup(self, stage: str) -> None:
        # the data module knows the transcripts, this model how many tokens it can emit from their audio
        datamodule = self.trainer.datamodule if self._trainer is not None else None
        if stage in ("fit", "validate") and hasattr(datamodule, "drop_untrainable"):
            datamodule.drop_untrainable(self.max_tokens)

    def on_fit_start(self) -> None:
        # A trainer.validate() before fit (validate_first) ran in inference mode, which left the WER metrics'
        # states as inference tensors that fit's validation (under no_grad) cannot update: start afresh.
        for metric in self.wer.values():
            metric.reset()

    def validation_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        return self._evaluate(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        """One loss and WER per test set: "test/<split>" (the datamodule's `test_splits` names, one set too), else
        "test/<dataloader index>", and "test" for a single set without a name."""
        num_sets = len(self.trainer.num_test_batches)
        splits = getattr(self.trainer.datamodule, "test_splits", None)
        if splits and len(splits) == num_sets:
            key = f"test/{splits[dataloader_idx]}"
        else:
            key = "test" if num_sets == 1 else f"test/{dataloader_idx}"
        return self._evaluate(batch, key)

    def _tokenizer(self) -> TokenDecoder:
        tokenizer = self.tokenizer
        if tokenizer is None and self._trainer is not None:
            tokenizer = getattr(self.trainer.datamodule, "tokenizer", None)
        if tokenizer is None:
            raise ValueError("WER needs a tokenizer: set module.tokenizer or fit with a datamodule that has one")
        return tokenizer

    # ---------------------------------------------------------------- optimisation

    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW (or the configured optimizer) over trainable parameters, stepped per optimizer step.

        With fine-tuning, pretrained parameters form a second group at ``pretrained_lr``; frozen
        parameters (``requires_grad=False``) are left out.
        """
        new, pretrained = [], []
        for name, param in self.model.named_parameters():
            if param.requires_grad:
                (pretrained if name in self.pretrained_names else new).append(param)
        groups = [{"params": new}] if new else []
        if pretrained:
            lr = self.hparams.pretrained_lr
            groups = [{**group, "name": "new"} for group in groups]
            groups.append({"params": pretrained, "name": "pretrained", **({"lr": lr} if lr is not None else {})})
        if not groups:
            raise ValueError("no trainable parameters: every parameter is frozen")
        optimizer = self.optimizer_factory(groups)
        total_steps = int(self.trainer.estimated_stepping_batches)
        scheduler = self.scheduler_factory(optimizer, total_steps=total_steps)
        # "name": LearningRateMonitor logs it as train/lr (train/lr/new and train/lr/pretrained when fine-tuning)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1, "name": "train/lr"},
        }


def training_reduction(loss: dict[str, Any], loss_reduction: str | None) -> str:
    """The transducer loss' training reduction: `loss_reduction`, else what the loss node's legacy ``reduction``
    meant (``mean`` -> ``mean_batch``), else ``mean_batch``; both set and different is a ValueError."""
    legacy = loss.get("reduction")
    if legacy not in (None, "none") and legacy not in LEGACY_REDUCTIONS:
        raise ValueError(
            f"loss.reduction={legacy!r}: the training reduction is loss_reduction "
            "(mean_batch, mean_volume, mean or sum); leave loss.reduction unset"
        )
    from_node = LEGACY_REDUCTIONS.get(legacy)
    if loss_reduction is None:
        return from_node or "mean_batch"
    if from_node is not None and from_node != loss_reduction:
        raise ValueError(
            f"loss.reduction={legacy!r} and loss_reduction={loss_reduction!r} disagree: set loss_reduction only"
        )
    return check_reduction(loss_reduction, "loss_reduction")
