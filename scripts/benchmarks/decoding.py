"""WER and decoding speed of greedy and beam search, ours and NeMo's, on the same model and utterances.

For every model file (a checkpoint, or a ``.nemo``, which NeMo also loads when it is importable): each batch of
utterances (sorted by length, `batch_size` at a time) is encoded once, by our front end and encoder for our
searches and by NeMo's preprocessor and encoder for NeMo's, and only the decoding of those encoder outputs is
timed: our `greedy_search` and `beam_search` at beams 1, 4 and 8 (the model's own ``max_symbols_per_frame``),
NeMo's ``greedy_batch`` (label looping) and ``malsd_batch`` at the same beams (``score_norm`` off, as ours). WER
is against the manifest's transcripts, both sides normalised by the model's tokenizer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from asr_plugin.data import read_manifest
from asr_plugin.decoding import beam_search, greedy_search
from asr_plugin.evaluation.decoding_settings import decoding_settings, model_tokenizer
from asr_plugin.evaluation.scoring import Recognition, score
from asr_plugin.formats import read_model
from asr_plugin.frontend.spec import build_frontend

BEAMS = (1, 4, 8)


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    model: str
    lattice: str
    decoder: str
    method: str
    wer: float
    utterances_per_second: float


Batches = list[tuple[list[int], torch.Tensor, torch.Tensor]]  # (utterance indices, encoder output, lengths)


def batched(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Utterance indices sorted by length, `batch_size` at a time."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def timed_texts(batches: Batches, count: int, decode: Callable[[torch.Tensor, torch.Tensor], list[str]]):
    """(texts in utterance order, seconds spent in `decode` over all batches)."""
    texts: list[str] = [""] * count
    seconds = 0.0
    for indices, encoded, lengths in batches:
        start = time.perf_counter()
        out = decode(encoded, lengths)
        seconds += time.perf_counter() - start
        for index, text in zip(indices, out):
            texts[index] = text
    return texts, seconds


@torch.no_grad()
def benchmark_model(
    path: str | os.PathLike, manifest: str | os.PathLike, batch_size: int = 16, limit: int | None = None
) -> list[Row]:
    """The rows of one model file (module docstring)."""
    loaded = read_model(path)
    model, tokenizer = loaded.model.eval(), model_tokenizer(loaded)
    cap = decoding_settings(loaded, {})["max_symbols_per_frame"]
    frontend = build_frontend(loaded.require_frontend_spec()).eval()
    entries = read_manifest(manifest)[:limit]
    audio = [entry.load_audio(frontend.sample_rate) for entry in entries]
    refs = [tokenizer.normalize(entry.text) for entry in entries]
    groups = batched([a.shape[0] for a in audio], batch_size)
    lattice = "tdt" if model.lattice.num_extra_outputs else "rnnt"
    name = os.path.basename(str(path))

    def padded(indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([audio[i].shape[0] for i in indices])
        return torch.nn.utils.rnn.pad_sequence([audio[i] for i in indices], batch_first=True), lengths

    ours: Batches = [(g, *model.encode(*frontend(*padded(g)))) for g in groups]
    methods: dict[str, Callable] = {
        "greedy": lambda e, n: [h.text for h in greedy_search(model, e, n, cap, tokenizer)],
        **{
            f"beam {k}": (lambda e, n, k=k: [h.text for h in beam_search(model, e, n, k, tokenizer, cap)])
            for k in BEAMS
        },
    }
    rows = [row(name, lattice, "ours", method, refs, *timed_texts(ours, len(audio), run), tokenizer)
            for method, run in methods.items()]  # fmt: skip
    if str(path).endswith(".nemo") and nemo_available():
        rows += nemo_rows(path, name, lattice, audio, refs, groups, padded, cap, tokenizer)
    return rows


def row(name, lattice, decoder, method, refs, texts, seconds, tokenizer) -> Row:
    recognitions = [
        Recognition(str(i), ref, tokenizer.normalize(text)) for i, (ref, text) in enumerate(zip(refs, texts))
    ]
    return Row(name, lattice, decoder, method, score(recognitions).wer, len(texts) / seconds if seconds else 0.0)


def nemo_available() -> bool:
    try:
        import nemo.collections.asr  # noqa: F401
    except ImportError:
        return False
    return True


def nemo_rows(path, name, lattice, audio, refs, groups, padded, cap, tokenizer) -> list[Row]:
    """NeMo's greedy_batch and malsd_batch rows on NeMo's own encoder output of the same batches."""
    from nemo.collections.asr.models import ASRModel
    from omegaconf import OmegaConf, open_dict

    nemo = ASRModel.restore_from(str(path), map_location="cpu").eval()
    saved = OmegaConf.to_container(nemo.cfg.decoding, resolve=True)
    batches: Batches = []
    for group in groups:
        signal, lengths = padded(group)
        features, feature_lengths = nemo.preprocessor(input_signal=signal, length=lengths)
        batches.append((group, *nemo.encoder(audio_signal=features, length=feature_lengths)))

    def strategy(kind: str, beam: int = 1) -> Callable:
        config = OmegaConf.create(saved)
        with open_dict(config):
            config.strategy = kind
            key = "max_symbols" if "max_symbols" in config.greedy else "max_symbols_per_step"
            config.greedy[key] = cap
            config.beam = {
                **config.get("beam", {}),
                "beam_size": beam,
                "max_symbols_per_step": cap,
                "score_norm": False,
            }
        nemo.change_decoding_strategy(config, verbose=False)

        def run(encoded, lengths):
            hyps = nemo.decoding.rnnt_decoder_predictions_tensor(encoded, lengths, return_hypotheses=True)
            hyps = hyps[0] if isinstance(hyps, tuple) else hyps
            return [(h[0] if isinstance(h, list) else h).text for h in hyps]

        return run

    rows = [
        row(
            name,
            lattice,
            "NeMo",
            "greedy",
            refs,
            *timed_texts(batches, len(audio), strategy("greedy_batch")),
            tokenizer,
        )
    ]
    for k in BEAMS:
        texts, seconds = timed_texts(batches, len(audio), strategy("malsd_batch", k))
        rows.append(row(name, lattice, "NeMo", f"beam {k}", refs, texts, seconds, tokenizer))
    return rows


def table(rows: Sequence[Row]) -> str:
    """The Markdown table of `rows`."""
    lines = ["| model | lattice | decoder | method | WER % | utterances/s |", "|---|---|---|---|---:|---:|"]
    lines += [
        f"| {r.model} | {r.lattice} | {r.decoder} | {r.method} | {r.wer:.2f} | {r.utterances_per_second:.1f} |"
        for r in rows
    ]
    return "\n".join(lines)
