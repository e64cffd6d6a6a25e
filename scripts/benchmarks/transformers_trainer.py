"""docs/transformers.md's Trainer example, run for real on the mini corpus: a small ParakeetForRNNT /
ParakeetForTDT (transformers' config classes, random weights: no hub), a tokenizer.json made by transformers' own
conversion of a SentencePiece model of the training text, its processor, and transformers' `Trainer` with
transformers' own loss and with `use_samplewise`, seed by seed; dev WER (greedy `generate`, one utterance at a
time) before and after, and the logged training losses."""

from __future__ import annotations

import functools
import random
import tempfile
from pathlib import Path

import soundfile as sf

SIZES = dict(hidden_size=96, num_hidden_layers=2, num_attention_heads=4, intermediate_size=192)
LOSSES = ("transformers", "samplewise")
ENCODER = dict(**SIZES, subsampling_factor=4, subsampling_conv_channels=32, num_mel_bins=80, conv_kernel_size=9)


def read_split(corpus: Path, split: str) -> list[tuple[Path, str]]:
    """(flac path, lower-case transcript) of a LibriSpeech-layout split."""
    items = []
    for listing in sorted(corpus.glob(f"{split}/**/*.trans.txt")):
        for line in listing.read_text().splitlines():
            utterance, text = line.split(" ", 1)
            items.append((listing.parent / f"{utterance}.flac", text.lower()))
    return items


def build_processor(texts: list[str], pieces: int, directory: Path):
    """transformers' ParakeetProcessor with the tokenizer transformers' conversion makes of a BPE SentencePiece
    model of `texts` (<unk> first; the blank "<pad>" after the last piece, also the pad token)."""
    from tokenizers import AddedToken
    from transformers import ParakeetFeatureExtractor, ParakeetProcessor, ParakeetTokenizerFast
    from transformers.convert_slow_tokenizer import ParakeetConverter

    from benchmarks.nemo_examples import train_nemo_style_tokenizer

    train_nemo_style_tokenizer(directory, pieces, texts)
    tokenizer = ParakeetTokenizerFast(
        tokenizer_object=ParakeetConverter(str(directory / "tokenizer.model")).converted(),
        clean_up_tokenization_spaces=False,
    )
    special = {
        name: AddedToken(piece, normalized=False, special=True)
        for name, piece in (("unk_token", "<unk>"), ("pad_token", "<pad>"))
    }
    tokenizer.add_tokens(list(special.values()))
    tokenizer.add_special_tokens(special)
    return ParakeetProcessor(ParakeetFeatureExtractor(feature_size=80), tokenizer, blank_token="<pad>")


def build_model(kind: str, vocab_size: int, seed: int):
    import torch
    from transformers import ParakeetForRNNT, ParakeetForTDT, ParakeetRNNTConfig, ParakeetTDTConfig

    config_class, model_class = (
        (ParakeetTDTConfig, ParakeetForTDT) if kind == "tdt" else (ParakeetRNNTConfig, ParakeetForRNNT)
    )
    blank = vocab_size - 1
    config = config_class(
        vocab_size=vocab_size,
        blank_token_id=blank,
        pad_token_id=blank,
        decoder_start_token_id=blank,
        decoder_hidden_size=128,
        num_decoder_layers=1,
        encoder_config=ENCODER,
    )
    torch.manual_seed(seed)
    return model_class(config)


def dev_wer(model, processor, dev: list[tuple[Path, str]]) -> float:
    """Greedy `generate`'s WER on `dev`, one utterance per call (a batch's transcripts differ from each alone)."""
    import jiwer
    import torch

    model.eval()
    hypotheses = []
    with torch.no_grad():
        for path, _ in dev:
            inputs = processor(sf.read(path, dtype="float32")[0], sampling_rate=16000)
            tokens = model.generate(input_features=inputs["input_features"]).sequences[0, 1:]
            hypotheses.append(processor.decode(tokens, skip_special_tokens=True).strip())
    model.train()
    return jiwer.wer([text for _, text in dev], hypotheses)


def collate(examples: list[tuple[Path, str]], processor) -> dict:
    audio = [sf.read(path, dtype="float32")[0] for path, _ in examples]
    return dict(processor(audio, text=[text for _, text in examples], sampling_rate=16000))


def fine_tune(kind: str, loss: str, seed: int, train, dev, processor, steps: int, output_dir: Path) -> dict:
    """One run: {"before": dev WER, "after": dev WER, "losses": the logged training losses}."""
    from transformers import Trainer, TrainingArguments

    from asr_plugin.integrations.transformers import use_samplewise

    model = build_model(kind, len(processor.tokenizer), seed).train()
    before = dev_wer(model, processor, dev)
    if loss == "samplewise":
        use_samplewise(model, memory_budget="256MiB")
    args = TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=8,
        learning_rate=2e-3,
        warmup_steps=steps // 10,
        max_steps=steps,
        remove_unused_columns=False,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=max(1, steps // 10),
        disable_tqdm=True,
        seed=seed,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model, args=args, train_dataset=train, data_collator=functools.partial(collate, processor=processor)
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return {"before": before, "after": dev_wer(model, processor, dev), "losses": losses}


def run_example(corpus: Path, kinds, seeds, steps: int, pieces: int, losses=LOSSES) -> list[dict]:
    """Every (kind, seed, loss of `losses`): its before/after dev WER and training losses."""
    train, dev = read_split(corpus, "train"), read_split(corpus, "dev")
    random.Random(0).shuffle(train)
    results = []
    with tempfile.TemporaryDirectory() as work:
        processor = build_processor([text for _, text in train], pieces, Path(work))
        sample = processor(sf.read(train[0][0], dtype="float32")[0], text=train[0][1], sampling_rate=16000)
        blank = len(processor.tokenizer) - 1
        if sample["decoder_input_ids"][0].tolist() != [blank, *sample["labels"][0].tolist()]:
            raise RuntimeError("the processor's decoder_input_ids are not [blank] + labels")
        for kind in kinds:
            for seed in seeds:
                for loss in losses:
                    result = fine_tune(kind, loss, seed, train, dev, processor, steps, Path(work) / "out")
                    results.append(dict(kind=kind, loss=loss, seed=seed, **result))
                    print(results[-1], flush=True)
    return results
