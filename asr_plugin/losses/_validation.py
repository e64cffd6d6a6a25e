"""Input checks of the transducer losses: clear errors naming the argument and the sample, before any kernel."""

from __future__ import annotations

from dataclasses import dataclass

import torch

REDUCTIONS = ("none", "sum", "mean")
MAX_DURATIONS = 32  # csrc/tdt.h: kMaxDurations


@dataclass(frozen=True)
class Sequences:
    """Targets and lengths normalised to int64 on the compute device, plus host copies for planning."""

    targets: torch.Tensor  # (B, U) int64
    logit_lengths: torch.Tensor  # (B,) int64, T_b
    target_lengths: torch.Tensor  # (B,) int64, U_b
    frames: tuple[int, ...]  # T_b on the host
    labels: tuple[int, ...]  # U_b on the host

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(targets, logit_lengths, target_lengths), the ops' arguments."""
        return self.targets, self.logit_lengths, self.target_lengths

    def permuted(self, order: torch.Tensor, host_order: tuple[int, ...]) -> Sequences:
        """The lattice with its samples in `order` (device (B,); `host_order` holds the same ids)."""
        return Sequences(
            targets=self.targets.index_select(0, order),
            logit_lengths=self.logit_lengths.index_select(0, order),
            target_lengths=self.target_lengths.index_select(0, order),
            frames=tuple(self.frames[i] for i in host_order),
            labels=tuple(self.labels[i] for i in host_order),
        )

    def rows(self, start: int, stop: int) -> Sequences:
        """Samples [start, stop) as views (no copy, no index op on the device)."""
        return Sequences(
            targets=self.targets[start:stop],
            logit_lengths=self.logit_lengths[start:stop],
            target_lengths=self.target_lengths[start:stop],
            frames=self.frames[start:stop],
            labels=self.labels[start:stop],
        )


def check_options(blank: int, reduction: str) -> None:
    if isinstance(blank, bool) or not isinstance(blank, int):
        raise TypeError(f"blank must be an int token id, got {blank!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _check_tensor(name: str, value, ndim: int, shape_text: str) -> None:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor {shape_text}, got {type(value).__name__}")
    if value.dim() != ndim:
        raise ValueError(f"{name} must have shape {shape_text}, got {tuple(value.shape)}")


def _check_integer(name: str, value: torch.Tensor) -> None:
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got {value.dtype}")


def check_float_input(name: str, value, ndim: int, shape_text: str) -> None:
    """`value` is a floating-point tensor with `ndim` dimensions (logits, encoder_out, predictor_out)."""
    _check_tensor(name, value, ndim, shape_text)
    if not value.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (float32, float16, bfloat16 or float64), got {value.dtype}"
        )


def check_same_device(device: torch.device, reference: str, **tensors: torch.Tensor) -> None:
    for name, tensor in tensors.items():
        if tensor.device != device:
            raise ValueError(
                f"{name} is on {tensor.device} but {reference} is on {device}: put all inputs on one device"
            )


def check_sequences(
    targets,
    logit_lengths,
    target_lengths,
    *,
    batch: int,
    frames: int,
    labels_plus_one: int,
    device: torch.device,
    source: str,
    labels_source: str | None = None,
) -> Sequences:
    """Shapes, dtypes and length ranges of the targets and lengths of a (B, T, U+1) lattice whose B and T come
    from the tensor named `source` and U+1 from `labels_source` (default: the same tensor)."""
    labels_source = labels_source or source
    _check_tensor("targets", targets, 2, "(B, U)")
    _check_tensor("logit_lengths", logit_lengths, 1, "(B,)")
    _check_tensor("target_lengths", target_lengths, 1, "(B,)")
    for name, value in (("targets", targets), ("logit_lengths", logit_lengths), ("target_lengths", target_lengths)):
        _check_integer(name, value)
        if value.shape[0] != batch:
            raise ValueError(f"{name} has batch size {value.shape[0]} but {source} has B = {batch}")
    check_same_device(device, source, targets=targets, logit_lengths=logit_lengths, target_lengths=target_lengths)
    if targets.shape[1] != labels_plus_one - 1:
        raise ValueError(
            f"targets has U = {targets.shape[1]} labels per sample but {labels_source} has U+1 = {labels_plus_one} "
            "label positions (expected U+1 = targets.shape[1] + 1)"
        )
    # One device-to-host copy for both lengths: the only host sync of the checks besides the targets'.
    host = torch.stack([logit_lengths.detach().long(), target_lengths.detach().long()]).cpu().tolist()
    for name, values, low, high, dim in (
        ("logit_lengths", host[0], 1, frames, f"T = {frames} of {source}"),
        ("target_lengths", host[1], 0, labels_plus_one - 1, f"U = {labels_plus_one - 1} of {labels_source}"),
    ):
        for b, value in enumerate(values):
            if value < low:
                raise ValueError(f"{name}[{b}] = {value} is below {low} (sample {b})")
            if value > high:
                raise ValueError(f"{name}[{b}] = {value} exceeds {dim} (sample {b})")
    return Sequences(
        targets=targets.detach().to(device, torch.int64).contiguous(),
        logit_lengths=logit_lengths.detach().to(torch.int64).contiguous(),
        target_lengths=target_lengths.detach().to(torch.int64).contiguous(),
        frames=tuple(host[0]),
        labels=tuple(host[1]),
    )


def check_joint_inputs(encoder_out, predictor_out, targets, logit_lengths, target_lengths) -> Sequences:
    """The inputs of a loss that calls the joint itself: encoder_out (B, T, H_e) and predictor_out (B, U+1, H_p),
    floating, of one batch size, on one device, and the targets and lengths of their (B, T, U+1) lattice."""
    check_float_input("encoder_out", encoder_out, 3, "(B, T, H_e)")
    check_float_input("predictor_out", predictor_out, 3, "(B, U+1, H_p)")
    if predictor_out.shape[0] != encoder_out.shape[0]:
        raise ValueError(
            f"predictor_out has batch size {predictor_out.shape[0]} but encoder_out has B = {encoder_out.shape[0]}"
        )
    check_same_device(encoder_out.device, "encoder_out", predictor_out=predictor_out)
    return check_sequences(
        targets,
        logit_lengths,
        target_lengths,
        batch=encoder_out.shape[0],
        frames=encoder_out.shape[1],
        labels_plus_one=predictor_out.shape[1],
        device=encoder_out.device,
        source="encoder_out",
        labels_source="predictor_out",
    )


def check_vocabulary(sequences: Sequences, width: int, blank: int, num_durations: int = 0) -> None:
    """V = width - num_durations >= 2, blank in [0, V), and every target id within its sample's length in
    [0, V) and != blank. `width` is the size of the scores' last dimension."""
    vocab = width - num_durations
    if vocab < 2:
        if num_durations:
            raise ValueError(
                f"the scores' last dimension ({width}) must hold V >= 2 token scores (blank + one label) and then the "
                f"{num_durations} duration scores, got V = {vocab}"
            )
        raise ValueError(f"the vocabulary size V must be >= 2 (blank + one label), got V = {vocab}")
    if not 0 <= blank < vocab:
        raise ValueError(f"blank = {blank} is out of range [0, V = {vocab})")
    targets = sequences.targets.to("cpu")
    valid = torch.arange(targets.shape[1]).unsqueeze(0) < torch.tensor(sequences.labels).unsqueeze(1)
    out_of_range = ((targets < 0) | (targets >= vocab)) & valid
    is_blank = (targets == blank) & valid
    if not (out_of_range | is_blank).any():  # one check on the host copy in the usual case
        return
    for bad, what in ((out_of_range, f"out of range [0, V = {vocab})"), (is_blank, f"equal to blank = {blank}")):
        if bad.any():
            b, u = (int(i) for i in bad.nonzero()[0])
            raise ValueError(f"targets[{b}, {u}] = {int(targets[b, u])} is {what} (sample {b})")


def check_finite(bad: torch.Tensor, host_order: tuple[int, ...] | None = None) -> None:
    """Raise naming the first sample flagged in `bad` (B,) by the log-probs kernel (one device sync).

    `host_order[i]` is the sample id of position i when `bad` is in a plan's order.
    """
    if bad.any():
        position = int(bad.nonzero()[0, 0])
        sample = host_order[position] if host_order is not None else position
        raise ValueError(
            f"logits of sample {sample} are not finite in its valid region (inf/NaN in the log-softmax "
            "denominator or log-probabilities); check the model output"
        )
