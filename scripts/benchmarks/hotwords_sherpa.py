"""Phrase boosting against sherpa-onnx's (docs/decoding.md, "Phrase boosting"): a model file exported with
`export_onnx`, decoded by sherpa-onnx's `OfflineRecognizer` (``modified_beam_search``, its hotwords file and score)
and by our beam search with the same phrases, score and beam on the features sherpa-onnx computes (its
kaldi-native-fbank through the export's feature adapter, so that only the searches differ); greedy search of
both, which must agree, shows that they do."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm
import torch

from asr_plugin.data import read_manifest
from asr_plugin.decoding import WeightedScorer, beam_search, greedy_search
from asr_plugin.decoding.phrase_boosting import PhraseBoosting
from asr_plugin.evaluation.decoding_settings import model_tokenizer
from asr_plugin.export import export_onnx
from asr_plugin.export.feature_adapter import encoder_input
from asr_plugin.export.sherpa_decode import onnx_metadata, sherpa_features, sherpa_transcribe
from asr_plugin.files import write_text_atomic
from asr_plugin.formats import read_model

SHERPA_NEMO_MAX_SYMBOLS = 10  # sherpa-onnx's NeMo transducer searches' cap


def recognizer(export_dir: Path, method: str, beam: int, hotwords: Path | None = None, score: float = 1.5):
    """sherpa-onnx's recogniser of an export directory; with `hotwords`, its BPE hotwords (the .vocab listing)."""
    import sherpa_onnx

    boosting = {}
    if hotwords is not None:
        boosting = {"hotwords_file": str(hotwords), "hotwords_score": score, "modeling_unit": "bpe"}
        boosting["bpe_vocab"] = str(export_dir / "bpe.vocab")
    return sherpa_onnx.OfflineRecognizer.from_transducer(
        encoder=str(export_dir / "encoder.onnx"),
        decoder=str(export_dir / "decoder.onnx"),
        joiner=str(export_dir / "joiner.onnx"),
        tokens=str(export_dir / "tokens.txt"),
        num_threads=1,
        feature_dim=int(onnx_metadata(export_dir / "encoder.onnx")["feat_dim"]),
        model_type="nemo_transducer",
        decoding_method=method,
        max_active_paths=beam,
        **boosting,
    )


def write_bpe_vocab(tokenizer, path: Path) -> Path:
    """The tokenizer's SentencePiece listing (piece<TAB>score per line), with which sherpa-onnx spells hotwords."""
    pieces = spm.SentencePieceProcessor(model_proto=tokenizer.model_bytes)
    listing = "".join(f"{pieces.id_to_piece(i)}\t{pieces.get_score(i):g}\n" for i in range(pieces.get_piece_size()))
    return write_text_atomic(path, listing)


def agreement(a: Sequence[str], b: Sequence[str]) -> float:
    return sum(" ".join(x.split()) == " ".join(y.split()) for x, y in zip(a, b, strict=True)) / len(a)


@torch.no_grad()
def sherpa_agreement(
    path: str | os.PathLike,
    manifest: str | os.PathLike,
    words: Sequence[str],
    score: float,
    beam: int,
    export_dir: str | os.PathLike,
    limit: int | None = None,
) -> dict[str, float]:
    """The share of the manifest's utterances whose transcripts sherpa-onnx and we agree on: greedy, beam, beam
    with `words` boosted at `score`."""
    loaded = read_model(path)
    model, tokenizer, spec = loaded.model.eval(), model_tokenizer(loaded), loaded.require_frontend_spec()
    export_dir = Path(export_dir)
    export_onnx(model, spec, tokenizer, export_dir)
    write_bpe_vocab(tokenizer, export_dir / "bpe.vocab")
    hotwords = write_text_atomic(export_dir / "hotwords.txt", "".join(f"{word}\n" for word in words))
    waveforms = [entry.load_audio(16000).numpy() for entry in read_manifest(manifest)[:limit]]
    adapter = encoder_input(spec)
    encoded = []
    for waveform in waveforms:
        features = sherpa_features(waveform, adapter.sherpa_bins)
        lengths = torch.tensor([features.shape[0]])
        encoded.append(model.encode(adapter(features.T[None], lengths), lengths))
    fusion = [WeightedScorer(PhraseBoosting.from_phrases(list(words), tokenizer, score), 1.0)]
    ours = {
        "greedy": [greedy_search(model, *e, SHERPA_NEMO_MAX_SYMBOLS, tokenizer)[0].text for e in encoded],
        "beam": [beam_search(model, *e, beam, tokenizer, SHERPA_NEMO_MAX_SYMBOLS)[0].text for e in encoded],
        "beam + hotwords": [
            beam_search(model, *e, beam, tokenizer, SHERPA_NEMO_MAX_SYMBOLS, fusion=fusion)[0].text for e in encoded
        ],
    }
    theirs = {
        "greedy": sherpa_transcribe(recognizer(export_dir, "greedy_search", beam), waveforms),
        "beam": sherpa_transcribe(recognizer(export_dir, "modified_beam_search", beam), waveforms),
        "beam + hotwords": sherpa_transcribe(
            recognizer(export_dir, "modified_beam_search", beam, hotwords, score), waveforms
        ),
    }
    return {name: agreement([t or "" for t in ours[name]], theirs[name]) for name in ours}
