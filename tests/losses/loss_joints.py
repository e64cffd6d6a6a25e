"""Joints shared by the loss tests: a module of its own (not conftest.py), so that test files can import it
by a name no other test directory uses."""

import torch
from torch import nn


class TanhJoint(nn.Module):
    """Linear(tanh(enc_proj + pred_proj)), the usual transducer joint, run through its autograd graph; declares
    its hidden size and extra outputs (``asr_plugin.losses.JointShape``)."""

    def __init__(self, encoder_dim, predictor_dim, joint_dim, vocab, num_extra_outputs=0):
        super().__init__()
        self.hidden_dim = joint_dim
        self.num_extra_outputs = num_extra_outputs
        self.encoder_proj = nn.Linear(encoder_dim, joint_dim)
        self.predictor_proj = nn.Linear(predictor_dim, joint_dim)
        self.output = nn.Linear(joint_dim, vocab + num_extra_outputs)

    def forward(self, encoder_out, predictor_out):  # (N, T, H_e), (N, U+1, H_p) -> (N, T, U+1, V)
        hidden = self.encoder_proj(encoder_out).unsqueeze(2) + self.predictor_proj(predictor_out).unsqueeze(1)
        return self.output(torch.tanh(hidden))
