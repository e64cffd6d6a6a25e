"""Joint network: combines encoder frames and predictor states into token scores."""

from __future__ import annotations

import torch
from torch import nn

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


class Joint(nn.Module):
    """``out(act(W_e enc + W_p pred))`` on every (t, u) pair.

    Honours the loss engine's joint contract ``(N, T, H_e), (N, U+1, H_p) -> (N, T, U+1, V + D)``, so the
    sample-wise loss can call it on one sample's own lattice. The projections are applied before the
    broadcast, so they cost O(T + U) rather than O(T * U). It also satisfies
    ``asr_plugin.losses.StandardJoint`` (``project_encoder``, ``project_predictor``, ``output``,
    ``hidden_dim``, ``num_extra_outputs``, ``fused_activation``, ``fused_dropout``), so the sample-wise loss
    runs it fused, dropout included.

    Args:
        encoder_dim: H_e.
        predictor_dim: H_p.
        joint_dim: H_j, the hidden size of the lattice (``hidden_dim``, the loss's memory estimate).
        vocab_size: V, including blank.
        activation: "tanh" (default, as NeMo and torchaudio), "relu" or "gelu".
        dropout: dropout on the joint hidden activations.
        num_extra_outputs: D scores per cell after the V token scores: the model's lattice's
            (``num_extra_outputs``; TDT: its D duration scores), 0 for RNN-T.
    """

    def __init__(
        self,
        encoder_dim: int,
        predictor_dim: int,
        joint_dim: int,
        vocab_size: int,
        activation: str = "tanh",
        dropout: float = 0.0,
        num_extra_outputs: int = 0,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation={activation!r}; choose one of {sorted(_ACTIVATIONS)}")
        if isinstance(num_extra_outputs, bool) or not isinstance(num_extra_outputs, int) or num_extra_outputs < 0:
            raise ValueError(
                f"num_extra_outputs must be an int >= 0 (TDT: the number of durations), got {num_extra_outputs!r}"
            )
        self.hidden_dim = joint_dim
        self.vocab_size = vocab_size
        self.num_extra_outputs = num_extra_outputs
        self.encoder_proj = nn.Linear(encoder_dim, joint_dim)
        self.predictor_proj = nn.Linear(predictor_dim, joint_dim)
        self.activation_name = activation
        self.activation = _ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(joint_dim, vocab_size + num_extra_outputs)  # V token scores, then D

    @property
    def fused_activation(self) -> str | None:
        """The activation for the loss's fused path; None when a subclass or a replaced module changes how the
        scores are formed (the loss then calls the joint itself)."""
        standard = type(self).combine is Joint.combine and type(self).forward is Joint.forward
        standard &= type(self.activation) is _ACTIVATIONS[self.activation_name]
        standard &= getattr(self.activation, "approximate", "none") == "none"  # the loss fuses exact GELU
        standard &= type(self.dropout) is nn.Dropout
        return self.activation_name if standard else None

    @property
    def fused_dropout(self) -> float:
        """Dropout probability on the activations that the loss's fused path applies (0 in eval mode)."""
        return self.dropout.p if self.training else 0.0

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """(..., H_e) -> (..., H_j); decoding projects every frame once."""
        return self.encoder_proj(encoder_out)

    def project_predictor(self, predictor_out: torch.Tensor) -> torch.Tensor:
        """(..., H_p) -> (..., H_j)."""
        return self.predictor_proj(predictor_out)

    def combine(self, encoder_proj: torch.Tensor, predictor_proj: torch.Tensor) -> torch.Tensor:
        """Broadcastable projections (..., H_j) -> raw scores (..., V + D)."""
        return self.output(self.dropout(self.activation(encoder_proj + predictor_proj)))

    def forward(self, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
        """(N, T, H_e), (N, U+1, H_p) -> (N, T, U+1, V + D) raw scores (log-softmax is fused into the loss)."""
        enc = self.project_encoder(encoder_out).unsqueeze(2)  # (N, T, 1, H_j)
        pred = self.project_predictor(predictor_out).unsqueeze(1)  # (N, 1, U+1, H_j)
        return self.combine(enc, pred)
