"""Limited attention contexts, as NeMo's cache-aware ConformerEncoder defines them (names kept: ``att_context_size``,
``att_context_style``, ``att_context_probs``).

A context is ``(left, right)`` in encoder frames; -1 is unlimited. ``(-1, -1)`` is full context (the default:
every frame sees every frame). Two styles:

- ``regular``: frame i sees the frames j with ``i - left <= j <= i + right``. Stacked over N layers the right
  context grows to N * right frames.
- ``chunked_limited``: the frames form chunks of ``right + 1``; a frame sees its own chunk and the
  ``left // (right + 1)`` chunks before it (``left`` must be a multiple of ``right + 1``). The lookahead does
  not grow with depth: the last frame of a chunk sees no frame after it, the first sees ``right``.

A model may be trained with several contexts (a multi-lookahead model: ``[[70, 13], [70, 6], [70, 1], [70, 0]]``),
one drawn per training step with ``att_context_probs`` (`draw_context`); the first is the default for
validation, test and decoding.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import torch

CONTEXT_STYLES = ("regular", "chunked_limited")
FULL_CONTEXT = (-1, -1)


def _pair(value: object, name: str) -> tuple[int, int]:
    if (
        isinstance(value, (str, bytes))
        or not isinstance(value, Sequence)
        or len(value) != 2
        or not all(isinstance(side, int) and not isinstance(side, bool) and side >= -1 for side in value)
    ):
        raise ValueError(f"{name}={value!r} must be [left, right]: two integers >= -1 (-1: unlimited)")
    return int(value[0]), int(value[1])


def context_sizes(att_context_size: object, style: str) -> list[tuple[int, int]]:
    """``att_context_size`` (None, one ``[left, right]`` or a list of them) as a list of (left, right) pairs,
    checked: the style is known, and with ``chunked_limited`` every ``left`` is a multiple of ``right + 1``.

    None is ``[(-1, -1)]``, full context.
    """
    if style not in CONTEXT_STYLES:
        raise ValueError(f"att_context_style={style!r}; choose one of {CONTEXT_STYLES}")
    if att_context_size is None:
        return [FULL_CONTEXT]
    if not isinstance(att_context_size, Sequence) or isinstance(att_context_size, (str, bytes)):
        raise ValueError(f"att_context_size={att_context_size!r} must be [left, right] or a list of them")
    if att_context_size and all(isinstance(item, int) for item in att_context_size):
        att_context_size = [att_context_size]
    if not att_context_size:
        raise ValueError("att_context_size=[] is empty: give [left, right] or a list of them")
    sizes = [_pair(item, f"att_context_size[{i}]") for i, item in enumerate(att_context_size)]
    if style == "chunked_limited":
        for i, (left, right) in enumerate(sizes):
            if left > 0 and right >= 0 and left % (right + 1):
                raise ValueError(
                    f"att_context_size[{i}]={[left, right]}: with att_context_style=chunked_limited the left "
                    f"context must be a multiple of the chunk, right + 1 = {right + 1} frames"
                )
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"att_context_size={[list(size) for size in sizes]} lists a context twice")
    return sizes


def context_probs(att_context_probs: Sequence[float] | None, count: int) -> list[float]:
    """``att_context_probs`` checked against `count` contexts (non-negative, summing to 1); None: uniform."""
    if att_context_probs is None:
        return [1.0 / count] * count
    probs = [float(p) for p in att_context_probs]
    if len(probs) != count:
        raise ValueError(f"att_context_probs has {len(probs)} entries for {count} att_context_size entries")
    if any(p < 0 for p in probs) or not math.isclose(sum(probs), 1.0, abs_tol=1e-6):
        raise ValueError(f"att_context_probs={probs} must be non-negative and sum to 1")
    return probs


def draw_context(sizes: Sequence[tuple[int, int]], probs: Sequence[float], seed: int, step: int) -> tuple[int, int]:
    """The context of training step `step`, drawn with `probs` by a generator seeded with (`seed`, `step`).

    Every process that passes the same seed and step draws the same context, without communicating (all DDP
    ranks), and a resumed run draws the sequence it would have drawn. (NeMo draws from Python's global
    ``random``, which differs between ranks.)
    """
    if not 0 <= seed < 2**32 or step < 0:
        raise ValueError(f"seed={seed} must lie in [0, 2**32) and step={step} be >= 0")
    # torch's CPU generator keeps 32 bits of its seed: (seed, step) is hashed into them, not packed
    digest = hashlib.sha256(f"{seed}:{step}".encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:4], "little"))
    index = int(torch.multinomial(torch.tensor(probs, dtype=torch.float64), 1, generator=generator))
    return tuple(sizes[index])


def visible(
    query_positions: torch.Tensor, key_positions: torch.Tensor, context: tuple[int, int], style: str
) -> torch.Tensor:
    """(Tq,) and (Tk,) int64 frame positions -> (Tq, Tk) bool: True where the query may attend to the key.

    Positions may be relative to any origin on a chunk boundary (a multiple of ``right + 1``), so a streaming
    step passes positions relative to its chunk (the cached frames negative).
    """
    left, right = context
    query, key = query_positions.unsqueeze(1), key_positions.unsqueeze(0)  # (Tq, 1), (1, Tk)
    if style == "chunked_limited" and right >= 0:
        chunk = right + 1
        chunks_back = torch.div(query, chunk, rounding_mode="floor") - torch.div(key, chunk, rounding_mode="floor")
        allowed = chunks_back >= 0  # (Tq, Tk)
        return allowed & (chunks_back <= left // chunk) if left >= 0 else allowed
    allowed = torch.ones(query.shape[0], key.shape[1], dtype=torch.bool, device=query.device)
    if left >= 0:
        allowed = allowed & (key >= query - left)
    if right >= 0:  # regular style (chunked_limited with right = -1 limits only the left, as NeMo's)
        allowed = allowed & (key <= query + right)
    return allowed


def blocked_attention(
    context: tuple[int, int], style: str, query_valid: torch.Tensor, key_valid: torch.Tensor, key_offset: int = 0
) -> torch.Tensor:
    """The attention mask of a limited context: (B, Tq, Tk) bool, True where attention is blocked.

    Args:
        context, style: the context (see `visible`).
        query_valid: (B, Tq) bool, the real (not padded) query frames, at positions 0 .. Tq - 1.
        key_valid: (B, Tk) bool, the real key frames, at positions ``key_offset`` .. (a streaming step's
            cached frames come first: ``key_offset = -cache size``).

    A padded query row attends to every key instead of none: its output is never used, and a row with no
    key would give NaN, which the keys of the next layer would carry into every frame.
    """
    queries = torch.arange(query_valid.shape[1], device=query_valid.device)
    keys = torch.arange(key_valid.shape[1], device=key_valid.device) + key_offset
    allowed = visible(queries, keys, context, style).unsqueeze(0) & key_valid.unsqueeze(1)  # (B, Tq, Tk)
    return ~(allowed | ~query_valid.unsqueeze(2))
