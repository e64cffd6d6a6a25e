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
SEARCH_BATCH = 16  # utterances our searches decode together (each encoded alone; each row's search is its own)


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
    """A SentencePiece listing (piece<TAB>score per line) with which sherpa-onnx spells hotwords as `tokenizer`
    does. sherpa-onnx segments each hotword into the pieces of the highest summed score (its ssentencepiece); a
    BPE model's own scores are negative merge ranks, with which it spells ``CAT`` as ``▁C AT`` where the
    tokenizer has ``▁CAT``; scoring each piece by its length squared makes the longest pieces win, as BPE's
    merges do for the corpus's words (the comparison's agreement checks it)."""
    pieces = spm.SentencePieceProcessor(model_proto=tokenizer.model_bytes)
    listing = "".join(
        f"{piece}\t{0 if pieces.is_control(i) or pieces.is_unknown(i) else len(piece) ** 2}\n"
        for i, piece in ((i, pieces.id_to_piece(i)) for i in range(pieces.get_piece_size()))
    )
    return write_text_atomic(path, listing)


def listing_spelling(listing: Path, word: str) -> list[str]:
    """The pieces of the highest summed score that spell "▁" + `word` in a SentencePiece listing: how
    sherpa-onnx's segmenter spells a hotword (as far as seen: with BPE's own scores CAT became ▁C AT)."""
    scores = {}
    for line in listing.read_text(encoding="utf-8").splitlines():
        piece, score = line.split("\t")
        scores[piece] = float(score)
    text = "\u2581" + word
    best: list[tuple[float, list[str]] | None] = [(0.0, [])] + [None] * len(text)
    for end in range(1, len(text) + 1):
        for start in range(end):
            piece, before = text[start:end], best[start]
            if piece in scores and before is not None:
                if best[end] is None or before[0] + scores[piece] > best[end][0]:
                    best[end] = (before[0] + scores[piece], before[1] + [piece])
    return [] if best[-1] is None else best[-1][1]


def agreement(a: Sequence[str], b: Sequence[str]) -> float:
    return sum(" ".join(x.split()) == " ".join(y.split()) for x, y in zip(a, b, strict=True)) / len(a)


# our searches against sherpa-onnx's: (name, sherpa-onnx's decoding method, with hotwords, our beam search's
# settings: None for greedy search, else (schedule, merge, boosting as sherpa-onnx scores, score_norm)). sherpa-onnx
# picks its final hypothesis by the unnormalised score, NeMo's malsd_batch (our default) by score / (tokens + 1).
SEARCHES = (
    ("greedy", "greedy_search", False, None),
    ("beam", "modified_beam_search", False, ("label", True, False, True)),
    ("beam, sherpa-onnx's schedule", "modified_beam_search", False, ("lowest_frame", False, False, False)),
    ("beam + hotwords", "modified_beam_search", True, ("label", True, False, True)),
    ("beam + hotwords, sherpa-onnx's schedule", "modified_beam_search", True, ("lowest_frame", False, False, False)),
    (
        "beam + hotwords, sherpa-onnx's schedule and scores",
        "modified_beam_search",
        True,
        ("lowest_frame", False, True, False),
    ),
)


@torch.no_grad()
def sherpa_and_ours(
    model, spec, tokenizer, waveforms: Sequence, words: Sequence[str], score: float, beam: int, export_dir: Path
) -> dict[str, tuple[list[str], list[str]]]:
    """Per search of `SEARCHES`, (sherpa-onnx's transcripts, ours) of the (N,) float waveforms at 16 kHz: the
    model exported to `export_dir` (with its BPE listing and the `words` as hotwords.txt) and decoded by
    sherpa-onnx, and our searches on the features sherpa-onnx computes. Only the words that sherpa-onnx spells as
    the tokenizer does (`listing_spelling`) are boosted: the others would be other phrases to it."""
    export_onnx(model, spec, tokenizer, export_dir)
    listing = write_bpe_vocab(tokenizer, export_dir / "bpe.vocab")
    words = [
        w for w in words if listing_spelling(listing, w) == [tokenizer.id_to_piece(k) for k in tokenizer.encode(w)]
    ]
    hotwords = write_text_atomic(export_dir / "hotwords.txt", "".join(f"{word}\n" for word in words))
    adapter = encoder_input(spec)
    encoded = []
    for waveform in waveforms:
        features = sherpa_features(waveform, adapter.sherpa_bins)
        lengths = torch.tensor([features.shape[0]])
        frames, frame_lengths = model.encode(adapter(features.T[None], lengths), lengths)
        encoded.append(frames[0, : int(frame_lengths[0])])  # (T, H_e) each, encoded alone as sherpa-onnx does
    batches = [
        (torch.nn.utils.rnn.pad_sequence(group, batch_first=True), torch.tensor([len(e) for e in group]))
        for group in (encoded[i : i + SEARCH_BATCH] for i in range(0, len(encoded), SEARCH_BATCH))
    ]
    boosting = {
        rule: [WeightedScorer(PhraseBoosting.from_phrases(list(words), tokenizer, score, sherpa_onnx=rule), 1.0)]
        for rule in (False, True)
    }
    theirs: dict[tuple[str, bool], list[str]] = {}
    results = {}
    for name, method, with_hotwords, settings in SEARCHES:
        if (method, with_hotwords) not in theirs:
            recognizer_ = recognizer(export_dir, method, beam, hotwords if with_hotwords else None, score)
            theirs[method, with_hotwords] = sherpa_transcribe(recognizer_, waveforms)
        if settings is None:
            hyps = [h for b in batches for h in greedy_search(model, *b, SHERPA_NEMO_MAX_SYMBOLS, tokenizer)]
        else:
            schedule, merge, rule, score_norm = settings
            fusion = boosting[rule] if with_hotwords else ()
            hyps = [
                h
                for b in batches
                for h in beam_search(
                    model,
                    *b,
                    beam,
                    tokenizer,
                    SHERPA_NEMO_MAX_SYMBOLS,
                    fusion=fusion,
                    schedule=schedule,
                    merge=merge,
                    score_norm=score_norm,
                )
            ]
        results[name] = (theirs[method, with_hotwords], [h.text or "" for h in hyps])
    return results


def sherpa_agreement(
    path: str | os.PathLike,
    manifest: str | os.PathLike,
    words: Sequence[str],
    score: float,
    beam: int,
    export_dir: str | os.PathLike,
    limit: int | None = None,
) -> dict[str, float]:
    """Per search of `SEARCHES`, the share of the manifest's utterances whose transcripts sherpa-onnx and we agree
    on, `words` boosted at `score` where the search has hotwords."""
    loaded = read_model(path)
    waveforms = [entry.load_audio(16000).numpy() for entry in read_manifest(manifest)[:limit]]
    pairs = sherpa_and_ours(
        loaded.model.eval(),
        loaded.require_frontend_spec(),
        model_tokenizer(loaded),
        waveforms,
        words,
        score,
        beam,
        Path(export_dir),
    )
    return {name: agreement(*pair) for name, pair in pairs.items()}
