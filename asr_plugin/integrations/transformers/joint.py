"""transformers' Parakeet joint network as the sample-wise loss's joint, run fused where it has the standard form.

``ParakeetRNNTJointNetwork`` (and the TDT one, whose head has D more rows for the durations) computes, for the
projected encoder frames f (N, T, H) (``encoder_projector``'s output, the encoder's ``pooler_output``) and the
predictor states g (N, U+1, H) (the decoder's output, after its ``decoder_projector``),

    head(act(f[:, :, None] + g[:, None]))

with no projection of its own: the sample-wise loss's projections are the identity, and the loss takes the
model's projected frames and predictor states. A joint of another class, another activation or a head that is
not a plain Linear (a PEFT adapter on it, say) is called as transformers computes it, through its autograd graph.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.parakeet.modeling_parakeet import ParakeetRNNTJointNetwork, ParakeetTDTJointNetwork

_FUSED_ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu"}
_PARAKEET_JOINTS = (ParakeetRNNTJointNetwork, ParakeetTDTJointNetwork)


class ParakeetJoint(nn.Module):
    """``(N, T, H), (N, U+1, H) -> (N, T, U+1, V [+ D])`` scores of a Parakeet joint network, with the members of
    ``asr_plugin.losses.StandardJoint`` so the sample-wise loss runs it fused when it has the standard form.

    A view: its parameters are the Parakeet joint's own (created per loss call, never registered on the model).
    """

    def __init__(self, parakeet_joint: nn.Module, num_extra_outputs: int) -> None:
        super().__init__()
        self.parakeet_joint = parakeet_joint
        self.hidden_dim = parakeet_joint.head.in_features  # H, read by the loss's memory estimate
        self.num_extra_outputs = num_extra_outputs  # TDT: the D duration scores after the token scores
        standard = type(parakeet_joint) in _PARAKEET_JOINTS and type(parakeet_joint.head) is nn.Linear
        self._activation = _FUSED_ACTIVATIONS.get(type(parakeet_joint.activation)) if standard else None

    @property
    def output(self) -> nn.Module:
        return self.parakeet_joint.head

    @property
    def fused_activation(self) -> str | None:
        return self._activation

    @property
    def fused_dropout(self) -> float:
        return 0.0  # the Parakeet joint has no dropout

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor:
        return encoder_out  # already projected by the model's encoder_projector

    def project_predictor(self, predictor_out: torch.Tensor) -> torch.Tensor:
        return predictor_out  # already projected by the decoder's decoder_projector

    def forward(self, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
        return self.parakeet_joint(
            decoder_hidden_states=predictor_out[:, None], encoder_hidden_states=encoder_out[:, :, None]
        )
