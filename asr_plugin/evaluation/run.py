"""``evaluate(cfg)``: a model file (a checkpoint, the average of several, a ``.nemo``) -> decode the configured sets,
offline or as streams -> result files (conf/eval.yaml)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig

from asr_plugin.evaluation.decode_sets import decode_batches, write_set_results, write_summary
from asr_plugin.evaluation.decoding_settings import decoding_settings
from asr_plugin.evaluation.fusion_spec import FusionSpec
from asr_plugin.evaluation.streaming_eval import (
    STREAM_BATCH_SIZE,
    describe_run,
    eval_runs,
    run_fields,
    sessions,
    stream_set,
)
from asr_plugin.evaluation.streaming_transcriber import PIECE_MS
from asr_plugin.formats import LoadedModel, model_files, read_model

log = logging.getLogger(__name__)


def _eval_sets(manifests: Any, datamodule: Any) -> dict[str, str]:
    """{set name: manifest path or split name}: null -> the data config's test splits; a list of split
    names or paths (name = split or file stem); or a mapping name -> path."""
    if manifests is None:
        return {name: str(path) for name, path in datamodule.test_manifests.items()}
    if isinstance(manifests, (Mapping, DictConfig)):
        return {str(k): str(v) for k, v in manifests.items()}
    if isinstance(manifests, str):
        manifests = [manifests]
    if not isinstance(manifests, (list, tuple, ListConfig)) or not manifests:
        raise ValueError(f"manifests={manifests!r}: give null, a list of split names/paths or a name -> path mapping")
    return {Path(str(m)).stem if Path(str(m)).suffix else str(m): str(m) for m in manifests}


def describe_weights(paths: list[Path]) -> str:
    """The weights a decoding used, for summaries: one checkpoint, or the average of several."""
    if len(paths) == 1:
        return f"checkpoint {paths[0]}"
    return f"average of {len(paths)} checkpoints: {', '.join(p.name for p in paths)}"


def evaluate_streaming(
    cfg: DictConfig,
    loaded: LoadedModel,
    datamodule: Any,
    sets: Mapping[str, str],
    max_symbols: int,
    device: torch.device,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every set decoded by every run ``cfg.streaming`` and ``cfg.att_context_size`` ask for
    (`asr_plugin.evaluation.streaming_eval`): streamed runs with greedy search, offline ones (a multi-lookahead
    model's full context) with greedy search on the data module's whole-utterance features. Returns the summary
    rows and what the summary's JSON records of the runs."""
    stream = cfg.get("stream") or {}
    runs = eval_runs(cfg.streaming, cfg.get("att_context_size"), stream, loaded)
    fusion = FusionSpec.from_config(cfg.decoding)
    built = sessions(runs, loaded, max_symbols, device, fusion)
    offline_fusion = fusion.scorers(datamodule.tokenizer) if any(session is None for session in built) else []
    if list(cfg.decoding.methods) != ["greedy"]:
        log.warning(
            "streaming evaluation decodes with greedy search only (decoding.methods=%s)", list(cfg.decoding.methods)
        )
    frontend = datamodule.frontend
    rows = []
    for name, manifest in sets.items():
        entries = datamodule.eval_entries(manifest)
        log.info("decoding %s as streams: %d utterances, %d runs", name, len(entries), len(runs))
        for run, session in zip(runs, built):
            if session is None:
                loader = datamodule.eval_dataloader(manifest)
                frame_shift = frontend.hop_length / frontend.sample_rate
                results = {
                    "greedy": decode_batches(
                        loaded.model,
                        loader,
                        ["greedy"],
                        datamodule.tokenizer,
                        frame_shift,
                        device,
                        max_symbols_per_frame=max_symbols,
                        att_context_size=run.att_context_size,
                        fusion=offline_fusion,
                    )["greedy"]
                }
            else:
                piece_ms = float(stream.get("piece_ms", PIECE_MS))
                batch_size = int(stream.get("batch_size", STREAM_BATCH_SIZE))
                results = {"greedy": stream_set(session, entries, piece_ms, batch_size, device)}
            rows += write_set_results(results, name, cfg.output_dir, run_fields(run, session), run.tag)
            log.info("decoded %s (%s): WER %.2f %%", name, run.tag or "offline", rows[-1]["wer"])
    return rows, {"streaming": [describe_run(run, session) for run, session in zip(runs, built)]}


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Decodes every evaluation set with every method and writes the result files to ``cfg.output_dir``.

    ``cfg.checkpoint`` is any model file `asr_plugin.formats.read_model` reads: a training checkpoint, a
    directory of them (the last ``avg`` averaged), a NeMo ``.nemo``. The tokenizer and the front end (features,
    statistics) are the file's own (a checkpoint's records): the data config only says where the audio and the
    transcripts are. A checkpoint written before checkpoints carried them is decoded with the data config's
    tokenizer and features, with a warning. The greedy and beam searches' ``max_symbols_per_frame`` is the
    file's (its validation's) unless ``decoding`` sets one (logged as an override). ``cfg.streaming`` true or
    ``buffered`` streams the sets' audio instead (`evaluate_streaming`). ``decoding.hotwords`` (a sherpa-onnx
    hotwords file) boosts its phrases in every search, each token by ``decoding.hotwords_score`` or the
    phrase's own score (`asr_plugin.evaluation.fusion_spec`).

    Returns ``{"rows": summary rows, "checkpoints": [...], "weights": ..., "output_dir": ...}``.
    """
    if not cfg.get("checkpoint"):
        raise ValueError("checkpoint: set a checkpoint file or a directory of checkpoints (checkpoint=...)")
    device = torch.device(cfg.get("device", "cpu"))
    paths = model_files(cfg.checkpoint, int(cfg.get("avg", 1)))
    loaded = read_model(paths, device=device)
    model = loaded.model

    if loaded.tokenizer is not None and loaded.frontend_spec is not None:
        datamodule = instantiate(cfg.data, tokenizer=loaded.tokenizer, frontend=loaded.frontend_spec, num_mel_bins=None)
    else:
        log.warning(
            "%s records no tokenizer and front end: decoding with the data config's, which must be the ones "
            "it was trained with",
            loaded.path,
        )
        datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("test")
    tokenizer = datamodule.tokenizer
    if tokenizer.vocab_size != model.vocab_size:
        raise ValueError(
            f"data tokenizer has {tokenizer.vocab_size} tokens but the checkpoint's model {model.vocab_size}: "
            "evaluate with the data config the model was trained with"
        )
    frontend = datamodule.frontend
    frame_shift = frontend.hop_length / frontend.sample_rate
    decoding = cfg.decoding
    max_symbols = decoding_settings(
        loaded, {"max_symbols_per_frame": decoding.get("max_symbols_per_frame")}, "decoding."
    )["max_symbols_per_frame"]
    fusion = FusionSpec.from_config(decoding)
    out_dir = Path(cfg.output_dir)
    sets = _eval_sets(cfg.get("manifests"), datamodule)
    extra: dict[str, Any] = {}
    streaming = cfg.get("streaming", False)
    if streaming is False:
        if cfg.get("att_context_size") is not None:
            raise ValueError("att_context_size: the context of streaming evaluation; set streaming=true with it")
        scorers = fusion.scorers(tokenizer)  # a bad hotwords file is refused before anything is decoded
        rows = []
        for name, manifest in sets.items():
            log.info(
                "decoding %s: %d utterances, %s",
                name,
                len(datamodule.eval_entries(manifest)),
                "+".join(decoding.methods),
            )
            results = decode_batches(
                model,
                datamodule.eval_dataloader(manifest),
                list(decoding.methods),
                tokenizer,
                frame_shift,
                device,
                beam=int(decoding.beam),
                max_symbols_per_frame=max_symbols,
                timestamps=bool(decoding.get("timestamps", False)),
                fusion=scorers,
                score_norm=decoding.score_norm,
            )
            rows += write_set_results(results, name, out_dir)
            log.info(
                "decoded %s: %s",
                name,
                ", ".join(f"{row['method']} WER {row['wer']:.2f} %" for row in rows if row["set"] == name),
            )
    else:
        rows, extra = evaluate_streaming(cfg, loaded, datamodule, sets, max_symbols, device)
    weights = describe_weights(paths)
    write_summary(
        rows,
        out_dir,
        {
            "checkpoints": [str(p) for p in paths],
            "weights": weights,
            "beam": int(decoding.beam),
            "score_norm": decoding.score_norm,
            "max_symbols_per_frame": max_symbols,
            **fusion.record(),
            **extra,
        },
    )
    log.info("results in %s", out_dir)
    return {"rows": rows, "checkpoints": [str(p) for p in paths], "weights": weights, "output_dir": str(out_dir)}
