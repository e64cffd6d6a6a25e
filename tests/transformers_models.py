"""Tiny Parakeet transducers built from transformers' own config classes (random weights, no hub), ragged
batches as ``ParakeetProcessor`` lays them out, the gradients of one backward and saved model directories, for the
transformers integration's and the transformers format's tests."""

from __future__ import annotations

import torch

from asr_plugin.decoding import greedy_search

VOCAB = 12  # ids 1..10 are labels, 0 is the pad token, 11 the blank (transformers' default: blank last)
PAD, BLANK = 0, 11
MEL_BINS = 16
FRAMES = [48, 40, 25, 33]  # feature frames per sample (subsampled 4x by the encoder)
LABELS = [5, 3, 4, 1]
# Every dropout off, so that two forwards of the same weights compute the same thing.
ENCODER = dict(
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    conv_kernel_size=3,
    subsampling_factor=4,
    subsampling_conv_channels=4,
    num_mel_bins=MEL_BINS,
    dropout=0.0,
    dropout_positions=0.0,
    layerdrop=0.0,
    activation_dropout=0.0,
    attention_dropout=0.0,
)
KINDS = ["rnnt", "tdt"]


def build_model(
    kind: str, seed: int = 0, hidden_act: str = "relu", initializer_range: float = 0.02, vocab_size: int = VOCAB
):
    """A randomly initialised ParakeetForRNNT ("rnnt") or ParakeetForTDT ("tdt", durations 0..4), in eval mode
    (BatchNorm on its running statistics: in training mode the convolution bias before it gets a gradient that
    is zero in exact arithmetic, which no relative comparison can judge). `initializer_range`: the weights'
    standard deviation (transformers' 0.02 gives nearly the same scores on every frame); the blank is the last
    of `vocab_size` ids, the pad token 0."""
    from transformers import ParakeetForRNNT, ParakeetForTDT, ParakeetRNNTConfig, ParakeetTDTConfig

    config_class, model_class = {
        "rnnt": (ParakeetRNNTConfig, ParakeetForRNNT),
        "tdt": (ParakeetTDTConfig, ParakeetForTDT),
    }[kind]
    config = config_class(
        vocab_size=vocab_size,
        decoder_hidden_size=16,
        num_decoder_layers=1,
        hidden_act=hidden_act,
        encoder_config={**ENCODER, "initializer_range": initializer_range},
        pad_token_id=PAD,
        blank_token_id=vocab_size - 1,
        decoder_start_token_id=vocab_size - 1,  # generate's first decoder input, as in the hub's Parakeet configs
    )
    torch.manual_seed(seed)
    return model_class(config).eval()


def decodable_model(kind: str, vocab_size: int = VOCAB, seed: int = 0):
    """A model whose greedy transcripts mix blanks and several tokens, and that transformers' generate decodes.

    Weights far from transformers' default scale (with the defaults every frame emits the same token
    max_symbols_per_step times), a blank favoured (RNN-T). TDT: every duration score lowered by the same amount,
    which changes no decision of the model, since transformers' TDT generate takes the next token by the argmax
    over the token and the duration scores (an id past the vocabulary whenever a duration's is the largest), and
    duration 0 made unlikely, as its generate has no guard against a token of duration 0 repeated forever.
    """
    model = build_model(kind, seed=seed, initializer_range=1.0, vocab_size=vocab_size)
    with torch.no_grad():
        if kind == "rnnt":
            model.joint.head.bias[vocab_size - 1] += 20.0
        else:
            model.joint.head.bias[vocab_size:] -= 1000.0
            model.joint.head.bias[vocab_size] -= 50.0
    return model.eval()


def assert_same_greedy_transcripts(model, ours, batch) -> None:
    """Our greedy search on `ours` (read from `model`'s directory) gives `model.generate`'s tokens, utterance by
    utterance: one at a time, as transformers' (5.23.0) batched RNN-T and TDT generate give another transcript
    for an utterance than it alone (tokens past its end), and pad finished rows with the pad id, a token here."""
    counts = []
    cap = model.config.max_symbols_per_step
    for row in range(len(batch["input_features"])):
        frames = int(batch["attention_mask"][row].sum())
        features = batch["input_features"][row : row + 1, :frames]
        with torch.no_grad():
            encoder_out, encoder_lengths = ours.encode(features, torch.tensor([frames]))
            room = cap * int(encoder_lengths[0]) + 1  # generate's default length holds one token fewer
            generated = model.generate(input_features=features, max_new_tokens=room).sequences[0, 1:]
            (hypothesis,) = greedy_search(ours, encoder_out, encoder_lengths, cap)
        blank = model.config.blank_token_id
        expected = [t + 1 for t in generated.tolist() if t != blank]  # our ids: blank 0, their token k our k + 1
        assert hypothesis.tokens == expected, f"utterance {row}"
        counts.append(len(expected))
    # neither mostly blanks nor the same count everywhere
    assert len(set(counts)) > 1 and sum(count > 0 for count in counts) > len(counts) / 2


def label_padding(kind: str) -> int:
    """The id transformers' loss does not count as a label: the blank for RNN-T, the pad token for TDT."""
    return BLANK if kind == "rnnt" else PAD


def make_batch(kind: str, frames=FRAMES, labels=LABELS, seed: int = 1) -> dict[str, torch.Tensor]:
    """A ragged batch as ParakeetProcessor gives it: features (B, F_max, mel) with their attention mask, labels
    padded with `label_padding(kind)` and decoder_input_ids = [blank] + labels padded with the pad token."""
    generator = torch.Generator().manual_seed(seed)
    batch = len(frames)
    features = torch.randn(batch, max(frames), MEL_BINS, generator=generator)
    mask = torch.zeros(batch, max(frames), dtype=torch.long)
    padded = torch.full((batch, max(labels)), label_padding(kind))
    decoder_input_ids = torch.full((batch, max(labels) + 1), PAD)
    for row, (length, count) in enumerate(zip(frames, labels)):
        mask[row, :length] = 1
        features[row, length:] = 0.0
        tokens = torch.randint(1, BLANK, (count,), generator=generator)
        padded[row, :count] = tokens
        decoder_input_ids[row, 0] = BLANK
        decoder_input_ids[row, 1 : count + 1] = tokens
    return {
        "input_features": features,
        "attention_mask": mask,
        "labels": padded,
        "decoder_input_ids": decoder_input_ids,
    }


def loss_and_gradients(model, batch: dict, **kwargs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The model's loss on `batch` (keyword arguments: the loss's, e.g. reduction) and every parameter's gradient."""
    model.zero_grad(set_to_none=True)
    loss = model(**batch, **kwargs).loss
    loss.sum().backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_same_gradients(grads: dict, reference: dict, rtol: float = 1e-5) -> None:
    """Every parameter's gradient within `rtol` of the reference's largest entry; the attention's key bias, whose
    gradient the softmax cancels (zero in exact arithmetic, ~1e-13 here), against a millionth of the largest
    gradient of all."""
    assert grads.keys() == reference.keys()
    overall = max(float(g.abs().max()) for g in reference.values())
    for name, expected in reference.items():
        scale = max(float(expected.abs().max()), 1e-6 * overall)
        error = float((grads[name] - expected).abs().max())
        assert error <= rtol * scale, f"{name}: max error {error:.3g}, {error / scale:.3g} relative"


def examples(kind: str, count: int = 8, seed: int = 2) -> list[dict[str, torch.Tensor]]:
    """`count` single utterances of random lengths (a Trainer's dataset), as `collate` pads them."""
    generator = torch.Generator().manual_seed(seed)
    frames = torch.randint(20, 49, (count,), generator=generator).tolist()
    labels = torch.randint(1, 6, (count,), generator=generator).tolist()
    batch = make_batch(kind, frames, labels, seed)
    out = []
    for row, (length, tokens) in enumerate(zip(frames, labels)):
        out.append(
            {
                "input_features": batch["input_features"][row, :length],
                "labels": batch["labels"][row, :tokens],
                "decoder_input_ids": batch["decoder_input_ids"][row, : tokens + 1],
            }
        )
    return out


def collate(items: list[dict[str, torch.Tensor]], kind: str) -> dict[str, torch.Tensor]:
    """A padded batch of `examples` items, as ParakeetProcessor pads (features with an attention mask, labels
    with `label_padding(kind)`, decoder inputs with the pad token)."""
    batch = len(items)
    frames = [len(item["input_features"]) for item in items]
    tokens = [len(item["labels"]) for item in items]
    out = {
        "input_features": torch.zeros(batch, max(frames), MEL_BINS),
        "attention_mask": torch.zeros(batch, max(frames), dtype=torch.long),
        "labels": torch.full((batch, max(tokens)), label_padding(kind)),
        "decoder_input_ids": torch.full((batch, max(tokens) + 1), PAD),
    }
    for row, item in enumerate(items):
        out["input_features"][row, : frames[row]] = item["input_features"]
        out["attention_mask"][row, : frames[row]] = 1
        out["labels"][row, : tokens[row]] = item["labels"]
        out["decoder_input_ids"][row, : tokens[row] + 1] = item["decoder_input_ids"]
    return out


def save_directory(model, directory, sentencepiece_bytes: bytes | None = None) -> None:
    """`model` as transformers saves it, with the processor's feature extractor (`MEL_BINS` mel bins) and, given
    a SentencePiece model, its tokenizer (`save_tokenizer`); its BatchNorms get random running statistics first,
    so that eval mode differs from a fresh BatchNorm."""
    from transformers import ParakeetFeatureExtractor

    generator = torch.Generator().manual_seed(3)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator))
            module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
    model.save_pretrained(directory)
    ParakeetFeatureExtractor(feature_size=MEL_BINS).save_pretrained(directory)
    if sentencepiece_bytes is not None:
        save_tokenizer(sentencepiece_bytes, directory)


def train_sentencepiece(lines: list[str], pieces: int, model_type: str) -> bytes:
    """A NeMo-like SentencePiece model of `pieces` pieces (<unk> first, no bos/eos/pad: NeMo's blank comes after
    the last piece) trained on `lines`."""
    import io

    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=pieces,
        model_type=model_type,
        character_coverage=1.0,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return out.getvalue()


def save_tokenizer(sentencepiece_bytes: bytes, directory) -> None:
    """The tokenizer.json transformers makes of a NeMo SentencePiece model (its Parakeet conversion:
    ``ParakeetConverter``, then <unk> and the blank <pad> as special added tokens), written into `directory`.
    A Unigram model takes the same converter with SentencePiece's Unigram model in place of its BPE."""
    from pathlib import Path

    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken
    from transformers import ParakeetTokenizerFast
    from transformers.convert_slow_tokenizer import ParakeetConverter, SpmConverter

    class UnigramConverter(ParakeetConverter):
        tokenizer = SpmConverter.tokenizer

    proto = sentencepiece_model_pb2.ModelProto.FromString(sentencepiece_bytes)
    model_file = Path(directory) / "sentencepiece.model.tmp"
    model_file.write_bytes(sentencepiece_bytes)
    converter = ParakeetConverter if proto.trainer_spec.model_type == proto.trainer_spec.BPE else UnigramConverter
    try:
        converted = converter(str(model_file)).converted()
    finally:
        model_file.unlink()
    tokenizer = ParakeetTokenizerFast(tokenizer_object=converted, clean_up_tokenization_spaces=False)
    tokens = {"unk_token": AddedToken("<unk>", normalized=False, special=True)}
    tokens["pad_token"] = AddedToken("<pad>", normalized=False, special=True)
    tokenizer.add_tokens(list(tokens.values()))
    tokenizer.add_special_tokens(tokens)
    tokenizer.save_pretrained(directory)


def sentencepiece_of(lines: list[str], pieces: int) -> bytes:
    """A BPE SentencePiece model of exactly `pieces` pieces on `lines` (for a model of `pieces` + 1 ids)."""
    import sentencepiece as spm

    model = train_sentencepiece(lines, pieces, "bpe")
    count = spm.SentencePieceProcessor(model_proto=model).get_piece_size()
    if count != pieces:
        raise ValueError(f"the lines give {count} SentencePiece pieces, not {pieces}: give more text")
    return model
