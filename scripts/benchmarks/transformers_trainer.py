"""docs/transformers.md's Trainer example, run for real on the mini corpus: a small ParakeetForRNNT /
ParakeetForTDT (transformers' config classes, random weights: no hub), a tokenizer.json made by transformers' own
conversion of a SentencePiece model of the training text, its processor, and transformers' `Trainer` with
transformers' own loss and with `use_samplewise`, seed by seed; the dev WER curve (every `eval_steps`) and the
logged training losses.

Dev WER is the greedy search of the model as the format seam reads it back from ``save_pretrained``'s directory
(``asr_plugin.formats``, whose greedy transcripts equal transformers' ``generate`` for RNN-T on 100 % of the round
trip's utterances): transformers' own TDT ``generate`` (5.23.0) takes the argmax over token and duration scores
together, emitting ids past the vocabulary, so it cannot decode a TDT model that learns its durations."""

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
    model = model_class(config)
    # transformers initialises every convolution and linear layer with N(0, 0.02), made for loading trained
    # weights over: the dw_striding subsampling's convolutions then shrink the normalised features (std 1) to a
    # std of ~6e-5, and a model trained from scratch sees next to nothing of its input for hundreds of steps.
    # PyTorch's own initialisation of each layer gives ~7e-2; the relative-position biases keep
    # transformers' values.
    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.LSTM)):
            module.reset_parameters()
    return model


def dev_wer(model, processor, dev: list[tuple[Path, str]], directory: Path) -> float:
    """WER on `dev` of the greedy search of `model` as the format seam reads it from `save_pretrained`'s
    `directory` (with the processor's files), the whole dev set as one batch."""
    import jiwer
    import torch

    from asr_plugin.decoding import greedy_search
    from asr_plugin.formats import read_model

    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    ours = read_model(directory, format="transformers").model
    inputs = processor([sf.read(path, dtype="float32")[0] for path, _ in dev], sampling_rate=16000)
    with torch.no_grad():
        encoded = ours.encode(inputs["input_features"], inputs["attention_mask"].sum(-1))
        hypotheses = greedy_search(ours, *encoded, model.config.max_symbols_per_step)
    # our ids: blank 0, transformers' token k is our k + 1
    texts = [processor.decode([t - 1 for t in h.tokens], skip_special_tokens=True).strip() for h in hypotheses]
    return jiwer.wer([text for _, text in dev], texts)


def wer_callback(processor, dev, directory: Path, eval_steps: int, curve: list[tuple[int, float]]):
    """A Trainer callback appending (step, dev WER) to `curve` every `eval_steps` optimizer steps."""
    from transformers import TrainerCallback

    class DevWer(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % eval_steps == 0:
                curve.append((state.global_step, dev_wer(model, processor, dev, directory)))
                print(f"step {state.global_step}: dev WER {curve[-1][1]:.1%}", flush=True)

    return DevWer()


def collate(examples: list[tuple[Path, str]], processor) -> dict:
    audio = [sf.read(path, dtype="float32")[0] for path, _ in examples]
    return dict(processor(audio, text=[text for _, text in examples], sampling_rate=16000))


def fine_tune(kind: str, loss: str, seed: int, train, dev, processor, settings: dict, output_dir: Path) -> dict:
    """One run of `settings` (steps, learning_rate, eval_steps): {"curve": [(step, dev WER), ...] from step 0,
    "losses": the logged training losses}."""
    from transformers import Trainer, TrainingArguments

    from asr_plugin.integrations.transformers import use_samplewise

    steps = settings["steps"]
    model = build_model(kind, len(processor.tokenizer), seed).train()
    curve = [(0, dev_wer(model, processor, dev, output_dir / "dev"))]
    if loss == "samplewise":
        use_samplewise(model, memory_budget="256MiB")
    args = TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=8,
        learning_rate=settings["learning_rate"],
        warmup_steps=steps // 10,
        max_steps=steps,
        remove_unused_columns=False,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=settings["eval_steps"],
        disable_tqdm=True,
        seed=seed,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train,
        data_collator=functools.partial(collate, processor=processor),
        callbacks=[wer_callback(processor, dev, output_dir / "dev", settings["eval_steps"], curve)],
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return {"curve": curve, "losses": losses}


def run_example(corpus: Path, kinds, seeds, settings: dict, pieces: int, losses=LOSSES) -> list[dict]:
    """Every (kind, seed, loss of `losses`) trained with `settings` (`fine_tune`): its dev WER curve and training
    losses."""
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
                    result = fine_tune(kind, loss, seed, train, dev, processor, settings, Path(work) / "out")
                    results.append(dict(kind=kind, loss=loss, seed=seed, **result))
                    print(results[-1], flush=True)
    return results
