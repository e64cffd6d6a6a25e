"""Argument checks shared by the search functions."""

from __future__ import annotations

import torch


def check_encoder_output(
    encoder_out: torch.Tensor,
    encoder_lengths: torch.Tensor,
    names: tuple[str, str] = ("encoder_out", "encoder_lengths"),
) -> None:
    """Raises ValueError/TypeError unless (B, T, H_e) float frames come with (B,) integer lengths <= T; the errors
    call the two arguments `names`."""
    frames, lengths = names
    if encoder_out.dim() != 3:
        raise ValueError(f"{frames} must be (B, T, H_e), got shape {tuple(encoder_out.shape)}")
    if not encoder_out.is_floating_point():
        raise TypeError(f"{frames} must be a float tensor, got {encoder_out.dtype}")
    if encoder_lengths.shape != encoder_out.shape[:1]:
        raise ValueError(f"{lengths} must be (B,)=({encoder_out.shape[0]},), got shape {tuple(encoder_lengths.shape)}")
    if encoder_lengths.is_floating_point():
        raise TypeError(f"{lengths} must be an integer tensor, got {encoder_lengths.dtype}")
    if encoder_lengths.numel() and (
        int(encoder_lengths.max()) > encoder_out.shape[1] or int(encoder_lengths.min()) < 0
    ):
        raise ValueError(f"{lengths} must lie in [0, T={encoder_out.shape[1]}], got {encoder_lengths.tolist()}")


def check_int(name: str, value: object, minimum: int, unit: str = "") -> None:
    """ValueError naming `name` unless `value` is an int (not a bool) >= `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an int >= {minimum}{f' ({unit})' if unit else ''}")


def check_seconds(name: str, value: object, positive: bool = False) -> None:
    """ValueError naming `name` unless `value` is a number of seconds >= 0 (> 0 with `positive`)."""
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if not number or not (value > 0 if positive else value >= 0):
        raise ValueError(f"{name}={value!r} must be a number of seconds {'> 0' if positive else '>= 0'}")
