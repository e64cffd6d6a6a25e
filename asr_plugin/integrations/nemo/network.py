"""NeMo's RNN-T joint network as the sample-wise loss's joint, run fused where it has the standard form.

NeMo's ``RNNTJoint.joint(f, g)`` computes, for encoder frames f (N, T, H_e) and predictor states g (N, U+1, H_p),

    joint_net(enc(f)[:, :, None] + pred(g)[:, None])        joint_net = [act, (Dropout), Linear(H, V)]

followed by a log-softmax on the CPU (``log_softmax=None``) or when ``log_softmax=True``. The loss normalises
the scores itself, and log-softmax is idempotent (``log_softmax(log_softmax(x)) = log_softmax(x)``, with the
same Jacobian), so that log-softmax changes neither the loss nor its gradients and the fused path leaves it
out. Every other joint (a sigmoid or replaced activation, adapters on the joint hidden, HAINAN's predictor
masking in training, a decoding temperature under an applied log-softmax, a subclass overriding the joint)
is called as NeMo computes it, through its autograd graph: slower per cell, but exactly NeMo's joint.
"""

from __future__ import annotations

import torch
from nemo.collections.asr.modules import RNNTJoint
from torch import nn

_FUSED_ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu"}
_JOINT_METHODS = ("joint", "joint_after_projection", "project_encoder", "project_prednet")


def fused_activation(nemo_joint: RNNTJoint) -> str | None:
    """ "tanh" or "relu" when `nemo_joint` computes ``Linear(dropout(act(enc(f) + pred(g))))`` (log-softmax aside),
    else None."""
    if any(getattr(type(nemo_joint), name) is not getattr(RNNTJoint, name) for name in _JOINT_METHODS):
        return None
    if nemo_joint.is_adapter_available():
        return None
    if nemo_joint.training and nemo_joint.masking_prob > 0:
        return None
    if nemo_joint.temperature != 1.0 and nemo_joint.log_softmax is not False:
        return None
    layers = list(nemo_joint.joint_net)
    middle = layers[1:-1]
    if len(layers) not in (2, 3) or type(layers[-1]) is not nn.Linear:
        return None
    if any(type(layer) is not nn.Dropout for layer in middle):
        return None
    return _FUSED_ACTIVATIONS.get(type(layers[0]))


class JointNetwork(nn.Module):
    """``(N, T, H_e), (N, U+1, H_p) -> (N, T, U+1, V)`` scores of a NeMo ``RNNTJoint``, with the members of
    ``asr_plugin.losses.StandardJoint`` so the sample-wise loss runs it fused when it has the standard form.

    A view: its parameters are the NeMo joint's own (created per loss call, never registered on the joint).
    """

    def __init__(self, nemo_joint: RNNTJoint) -> None:
        super().__init__()
        self.nemo_joint = nemo_joint
        self.hidden_dim = nemo_joint.joint_hidden  # H, read by the loss's memory estimate
        self.num_extra_outputs = nemo_joint.num_extra_outputs  # scores after the token scores (TDT durations)
        self._activation = fused_activation(nemo_joint)

    @property
    def output(self) -> nn.Linear:
        return self.nemo_joint.joint_net[-1]

    @property
    def fused_activation(self) -> str | None:
        return self._activation

    @property
    def fused_dropout(self) -> float:
        """The dropout probability between activation and output layer while that Dropout is in training mode."""
        dropouts = [layer for layer in self.nemo_joint.joint_net if type(layer) is nn.Dropout and layer.training]
        return dropouts[0].p if dropouts else 0.0

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor:  # (N, T, H_e) -> (N, T, H)
        return self.nemo_joint.project_encoder(encoder_out)

    def project_predictor(self, predictor_out: torch.Tensor) -> torch.Tensor:  # (N, U+1, H_p) -> (N, U+1, H)
        return self.nemo_joint.project_prednet(predictor_out)

    def forward(self, encoder_out: torch.Tensor, predictor_out: torch.Tensor) -> torch.Tensor:
        return self.nemo_joint.joint(encoder_out, predictor_out)  # (N, T, U+1, V), as NeMo computes it
