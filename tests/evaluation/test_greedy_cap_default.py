"""The greedy cap on tokens per encoder frame defaults to NeMo's and sherpa-onnx's (10, what sherpa-onnx's NeMo
greedy searches hard-code: `SHERPA_MAX_SYMBOLS`) wherever none is given: the training run's validation (and so
what its checkpoint records for eval.py and transcribe.py), a file that records none, and every search."""

from __future__ import annotations

import inspect
from pathlib import Path

from hydra import compose, initialize_config_dir

from asr_plugin.decoding import StreamingRecognizer, beam_search, decode, greedy_search
from asr_plugin.decoding.streaming_greedy import StreamingGreedyDecoder
from asr_plugin.evaluation.decode_sets import decode_batches
from asr_plugin.export.onnx_export import SHERPA_MAX_SYMBOLS
from asr_plugin.formats.base import DEFAULT_MAX_SYMBOLS_PER_FRAME
from asr_plugin.training.lightning_module import TransducerModule

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def test_every_default_greedy_cap_is_sherpa_onnxs():
    cap = SHERPA_MAX_SYMBOLS["rnnt"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        assert compose(config_name="train").max_symbols_per_frame == cap
    assert DEFAULT_MAX_SYMBOLS_PER_FRAME == cap
    searches = (
        greedy_search,
        beam_search,
        decode,
        decode_batches,
        StreamingRecognizer,
        StreamingGreedyDecoder,
    )
    for search in (*searches, TransducerModule):
        default = inspect.signature(search).parameters["max_symbols_per_frame"].default
        assert default == cap, search.__qualname__
