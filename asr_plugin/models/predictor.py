"""LSTM prediction network (the transducer's label-context model)."""

from __future__ import annotations

import torch
from torch import nn

LSTMState = tuple[torch.Tensor, torch.Tensor]  # h, c: (num_layers, N, hidden_dim) each


def cpu_autocast_lacks_bf16_lstm(x: torch.Tensor) -> bool:
    """True under CPU bf16 autocast on a CPU whose oneDNN has no bf16 LSTM (no AVX-512: e.g. AVX2-only
    AMD EPYC), where autocast's bf16 LSTM fails with "could not create a primitive descriptor"."""
    return (
        x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
        and not torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


class LSTMPredictor(nn.Module):
    """Embedding + LSTM over the previous labels, with blank as the start symbol.

    Args:
        vocab_size: V, including blank.
        embed_dim: embedding size.
        hidden_dim: H_p, LSTM size and output dimension.
        num_layers: LSTM layers.
        dropout: dropout on the embedding and between LSTM layers.
        blank_id: the start symbol (and blank) id, 0 by the project's policy.
        blank_as_pad: the blank's embedding row is a padding row (NeMo's ``blank_as_pad``): zero and never
            trained, so the start symbol's input is the zero vector NeMo's prediction network starts from.
            False: the start symbol has a trainable embedding of its own.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 256,
        hidden_dim: int = 320,
        num_layers: int = 1,
        dropout: float = 0.1,
        blank_id: int = 0,
        blank_as_pad: bool = False,
    ) -> None:
        super().__init__()
        if not 0 <= blank_id < vocab_size:
            raise ValueError(f"blank_id={blank_id} must lie in [0, vocab_size={vocab_size})")
        self.blank_id = blank_id
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.output_dim = hidden_dim
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=blank_id if blank_as_pad else None)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(
            embed_dim, hidden_dim, num_layers=num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0
        )

    def forward(self, targets: torch.Tensor) -> torch.Tensor:
        """(B, U) int64 label ids (padding is harmless: it only follows the valid labels) -> (B, U+1, H_p).

        Output position u summarises the start symbol and the first u labels.
        """
        start = targets.new_full((targets.shape[0], 1), self.blank_id)  # also right for U = 0
        x = self.dropout(self.embedding(torch.cat([start, targets], dim=1)))  # (B, U+1, E)
        out, _ = self.run_lstm(x)
        return out  # (B, U+1, H_p)

    def run_lstm(self, x: torch.Tensor, state: LSTMState | None = None) -> tuple[torch.Tensor, LSTMState]:
        """The LSTM over (N, L, E) inputs; in float32 where CPU bf16 autocast has no LSTM kernel."""
        if cpu_autocast_lacks_bf16_lstm(x):
            with torch.autocast("cpu", enabled=False):
                state = None if state is None else (state[0].float(), state[1].float())
                return self.lstm(x.float(), state)
        return self.lstm(x, state)

    def initial_state(
        self, batch_size: int, device: torch.device | str, dtype: torch.dtype = torch.float32
    ) -> LSTMState:
        """Zero state for `batch_size` hypotheses."""
        zeros = torch.zeros(self.num_layers, batch_size, self.hidden_dim, device=device, dtype=dtype)
        return zeros, zeros.clone()

    def step(self, tokens: torch.Tensor, state: LSTMState | None = None) -> tuple[torch.Tensor, LSTMState]:
        """One decoding step: (N,) int64 last tokens (blank at the start), state -> (N, H_p) output, new state."""
        if state is None:
            state = self.initial_state(tokens.shape[0], tokens.device, self.embedding.weight.dtype)
        x = self.dropout(self.embedding(tokens.unsqueeze(1)))  # (N, 1, E)
        out, new_state = self.run_lstm(x, state)
        return out.squeeze(1), new_state

    @staticmethod
    def select_state(state: LSTMState, index: torch.Tensor) -> LSTMState:
        """Gathers hypotheses `index` (K,) from a state of N hypotheses."""
        return state[0][:, index], state[1][:, index]
