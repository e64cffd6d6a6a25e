"""Sizes and data settings shared by the ONNX export tests (a module of its own so test files import it by name)."""

from __future__ import annotations

from pathlib import Path

from tiny_models import CharTokenizer

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
# the evaluation tests' micro model (tests/evaluation/test_evaluation_recipe.py) on 80 log-mel bins
MICRO = {
    "input_dim": 80,
    "d_model": 32,
    "num_layers": 1,
    "num_heads": 2,
    "ffn_dim": 64,
    "conv_kernel_size": 3,
    "predictor_embed_dim": 16,
    "predictor_dim": 32,
    "joint_dim": 32,
}


class LetterPieces(CharTokenizer):
    """CharTokenizer with SentencePiece-style pieces: id k >= 1 is "\u2581" + its letter."""

    def id_to_piece(self, token_id: int) -> str:
        return "\u2581" + self.decode([token_id])


TINY_DATA = [
    "data.mini_corpus.n_train=24",
    "data.mini_corpus.n_dev=8",
    "data.mini_corpus.n_test=8",
    "data.vocab_size=48",
    "data.num_workers=0",
    "data.prepare_num_workers=0",
    "data.max_duration=10",
]
