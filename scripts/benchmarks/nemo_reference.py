"""A small NeMo transducer trained by NeMo itself on the mini corpus: the reference of the fine-tuning tests
and of docs/finetune.md's table (needs NeMo).

`train_reference` generates the mini corpus (`asr_plugin.data.make_mini_librispeech`), writes NeMo manifests
(``audio_filepath``, ``duration``, lower-case ``text``, as NeMo's English recipes train), trains a SentencePiece
tokenizer the way NeMo's tokenizer script does, and trains NeMo's hybrid RNNT-CTC FastConformer
(``EncDecHybridRNNTCTCBPEModel``, the example config of `benchmarks.nemo_examples` at the sizes of
`ReferenceSettings`) with NeMo's own training step and data loader, on the first ``pretrain_utterances``
utterances of the training split (by id), so that fine-tuning on the others (``manifests["finetune"]``) sees
new sentences, mostly of speakers it never heard, as a user's own recordings would be. It saves the result
as a hybrid ``.nemo`` and, with the same weights minus the CTC decoder, as an ``EncDecRNNTBPEModel`` ``.nemo``,
and records NeMo's own ``transcribe`` output, WER and per-utterance loss on dev and test for both.

One substitution: NeMo 3.0's RNN-T losses on CPU are Python loops over the lattice (``warprnnt_numba``'s CPU
path takes 6 s for a batch of 8 three-second utterances here; ``pytorch`` 3 s), so the training replaces the
RNN-T loss function inside NeMo's ``RNNTLoss`` by ``torchaudio.functional.rnnt_loss`` (the same per-utterance
loss, computed by torchaudio's C++ kernel); NeMo's reduction, joint, CTC loss and everything else are NeMo's.
A TDT reference (`TDTReferenceSettings`) has no NeMo loss on CPU at all (``TDTLossNumba`` raises "TDT is not yet
implemented for non CUDA computation", ``TDTLossPytorch`` moves its tensors to CUDA), so there the loss function
is this project's TDT loss (`asr_plugin.losses`, the C++ CPU kernel; tests/losses/test_tdt_nemo.py compares it
with NeMo's per utterance), with NeMo's durations and sigma.

`cached_reference` keeps each result in ``<cache_dir>/nemo_reference_<key>``, the key a hash of the settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import soundfile
import torch
import torchaudio
from torch import nn

from asr_plugin.audio import probe_audio
from asr_plugin.data import make_mini_librispeech, scan_split
from asr_plugin.data.demo.corpus import CORPUS_VERSION, engine_test_split
from asr_plugin.files import write_atomic, write_bytes_atomic, write_text_atomic
from asr_plugin.formats.nemo.writer import HYBRID_TARGET, RNNT_TARGET
from benchmarks.nemo_examples import nemo_config, save_nemo_atomic, train_nemo_style_tokenizer

# The reference speaks espeak-ng only (ReferenceSettings.train_engines): dev and espeak-ng's test split are
# decoded by NeMo.
EVAL_SPLITS = ("dev", engine_test_split("espeak"))
SPLITS = ("train", *EVAL_SPLITS)
FORMS = ("hybrid", "rnnt")  # EncDecHybridRNNTCTCBPEModel, EncDecRNNTBPEModel
RESULT_NAME = "reference.json"
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"  # the recipe's Hydra configs


@dataclass(frozen=True)
class ReferenceSettings:
    """Everything the reference model depends on (its cache key).

    Attributes:
        n_train, n_dev, n_test, corpus_seed: the mini corpus (`make_mini_librispeech`); corpus_version: its
            `CORPUS_VERSION` (a new version is a new corpus, so a new cache key); train_engines: the engines of
            its train and dev splits (espeak-ng alone: 500 steps on 160 utterances learn one engine, and the
            comparison with NeMo needs no second).
        pretrain_utterances: NeMo trains on the first this many training utterances (by id).
        silence_margin: seconds of silence added before and after every utterance's audio (the mini corpus'
            speech runs from its first sample to its last; recordings such as LibriSpeech's segments begin and
            end with some silence).
        vocab_size: SentencePiece pieces (NeMo's ``num_classes``; the model has one more output, the blank).
        d_model, n_layers, n_heads, conv_kernel_size, subsampling_factor: the FastConformer encoder.
        hidden: predictor and joint width.
        dropout: every dropout of the encoder, predictor and joint.
        steps, batch_size, lr, warmup_steps: NeMo's AdamW with cosine annealing; gradient clipping at 1.
        ctc_weight: NeMo's ``aux_ctc.ctc_loss_weight``.
        seed: weights and batch order.
    """

    n_train: int = 400
    n_dev: int = 40
    n_test: int = 40
    corpus_seed: int = 0
    corpus_version: int = CORPUS_VERSION
    train_engines: tuple[str, ...] = ("espeak",)
    pretrain_utterances: int = 160
    silence_margin: float = 0.0
    vocab_size: int = 128
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    conv_kernel_size: int = 9
    subsampling_factor: int = 8
    hidden: int = 128
    dropout: float = 0.05
    steps: int = 500
    batch_size: int = 8
    lr: float = 5e-3
    warmup_steps: int = 50
    ctc_weight: float = 0.5
    seed: int = 0

    # the example config (`benchmarks.nemo_examples`) the model is NeMo's of (a class constant: not in the key)
    example: ClassVar[str] = "fast_conformer_transducer"

    def key(self) -> str:
        """16 hex digits of the sha256 of the settings (the cache directory's suffix)."""
        return hashlib.sha256(json.dumps(dataclasses.asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def encoder_overrides(self) -> dict[str, Any]:
        """Encoder keys set beyond the example's and the sizes above (none)."""
        return {}


@dataclass(frozen=True)
class StreamingReferenceSettings(ReferenceSettings):
    """The reference as NeMo's cache-aware streaming hybrid FastConformer (``fastconformer_hybrid_transducer_ctc_
    bpe_streaming.yaml``, the example "fast_conformer_streaming": causal subsampling, a causal convolution with
    LayerNorm, features not normalised per utterance) at the sizes above, trained by NeMo with its multi-lookahead
    ``att_context_size`` (``chunked_limited``; NeMo draws one per training step, uniformly; the first is the
    default): what the streaming comparison with NeMo decodes (tests/finetune/test_nemo_streaming.py).

    Its utterances have 0.3 s of silence before and after the speech, as recordings have: NeMo's cache-aware
    buffer never feeds a stream's last frames (fewer than the subsampling factor) and adds a padding frame
    (`benchmarks.nemo_streaming`), so on speech that runs to the file's last sample, as the mini corpus' does, the
    end of the file decides some of NeMo's streaming transcripts. 1500 steps on 320 utterances: after the 500 of
    the full-context reference, a streaming model (WER 0.90) still emitted many tokens on an utterance's last
    frames."""

    att_context_size: tuple[tuple[int, int], ...] = ((16, 3), (16, 1), (16, 0))
    silence_margin: float = 0.3
    pretrain_utterances: int = 320
    steps: int = 1500
    warmup_steps: int = 150
    example: ClassVar[str] = "fast_conformer_streaming"

    def encoder_overrides(self) -> dict[str, Any]:
        return {"att_context_size": [list(context) for context in self.att_context_size]}


@dataclass(frozen=True)
class TDTReferenceSettings(ReferenceSettings):
    """The reference as NeMo's TDT FastConformer (the example "fast_conformer_tdt": ``loss_name: tdt``, the joint's
    duration outputs, ``decoding.model_type: tdt``, 96 mel features) at the sizes above, hybrid TDT-CTC as
    Parakeet-TDT-CTC is: what the TDT comparisons with NeMo's decoding decode (tests/decoding/
    test_nemo_trained_decoding.py). 100 dev and 100 test utterances: 200 to compare on.

    Attributes:
        tdt_durations: the frames a token or blank may advance, Parakeet-TDT's.
        tdt_sigma: the loss' logit under-normalisation (NeMo's TDT configs' 0.02).
    """

    n_dev: int = 100
    n_test: int = 100
    tdt_durations: tuple[int, ...] = (0, 1, 2, 3, 4)
    tdt_sigma: float = 0.02
    example: ClassVar[str] = "fast_conformer_tdt"


# The reference of docs/finetune.md's tables: a model NeMo trains well on this project's 2-core CPU (17 min 43 s
# at OMP_NUM_THREADS=1 with the other core busy, 54 minutes on a machine shared with other jobs): the size (2.0 M parameters, 4 FastConformer layers), 2500 steps of
# 8 utterances (12.5 epochs) of 1600 training utterances, warmup a tenth of the run, NeMo's default dropout 0.1;
# the other 400 training utterances (new sentences, 390 of them by 8 speakers it never heard) are the fine-tuning
# data (manifests["finetune"]), and 100 dev and test utterances (~770 words each) make a WER point ~8 words.
# ReferenceSettings() stays the tests' reference: a few minutes of training.
TRAINED_REFERENCE = ReferenceSettings(
    n_train=2000,
    n_dev=100,
    n_test=100,
    pretrain_utterances=1600,
    n_layers=4,
    dropout=0.1,
    steps=2500,
    warmup_steps=250,
)


@dataclass
class NemoReference:
    """What `train_reference` made, all under `directory`.

    Attributes:
        corpus: the mini corpus root (LibriSpeech layout).
        manifests: NeMo manifests per split ("train" is the whole split; "pretrain" the part NeMo trained on,
            "finetune" the rest, when there is a rest).
        models: the ``.nemo`` files per form ("hybrid", "rnnt").
        transcripts: NeMo's ``transcribe`` output per form and split (dev, test), in manifest order.
        wer: NeMo's WER (0-1) per form and split.
        loss: NeMo's transducer (RNN-T or TDT) loss per utterance (eval mode, mean over the split) per split.
        settings: the `ReferenceSettings` as a dict.
    """

    directory: Path
    corpus: Path
    manifests: dict[str, Path]
    models: dict[str, Path]
    transcripts: dict[str, dict[str, list[str]]]
    wer: dict[str, dict[str, float]]
    loss: dict[str, float]
    settings: dict[str, Any]

    def references(self, split: str) -> list[str]:
        """The lower-case reference texts of `split`, in manifest order."""
        return manifest_texts(self.manifests[split])


class ProjectTDTLoss(nn.Module):
    """The per-utterance TDT loss with the call signature NeMo's ``RNNTLoss`` gives its inner loss (``acts``
    (B, T, U+1, V + D): token then duration scores), computed by `asr_plugin.losses.transducer_loss`.

    NeMo's CPU joint log-softmaxes token and duration scores together; the loss log-softmaxes each head, which a
    shift common to both leaves unchanged: the loss of NeMo's raw scores, as ``TDTLossNumba`` computes it."""

    def __init__(self, blank: int, durations: list[int], sigma: float) -> None:
        super().__init__()
        from asr_plugin.losses import TDT

        self.blank, self.lattice = blank, TDT(list(durations), sigma=sigma)
        self.reduction = None  # NeMo's RNNTLoss sets and restores it around the call, and reduces itself

    def forward(
        self, acts: torch.Tensor, labels: torch.Tensor, act_lens: torch.Tensor, label_lens: torch.Tensor
    ) -> torch.Tensor:
        from asr_plugin.losses import transducer_loss

        frames, tokens = int(act_lens.max()), int(label_lens.max())
        return transducer_loss(
            acts[:, :frames, : tokens + 1].float(),
            labels[:, :tokens],
            act_lens,
            label_lens,
            self.lattice,
            blank=self.blank,
            reduction="none",
        )


class TorchaudioRNNTLoss(nn.Module):
    """The per-utterance RNN-T loss with the call signature NeMo's ``RNNTLoss`` gives its inner loss
    (``acts`` (B, T, U+1, V) joint output, ``labels``, ``act_lens``, ``label_lens``), computed by torchaudio.

    NeMo's joint returns log-probabilities on CPU; torchaudio's log-softmax of them is the identity.
    """

    def __init__(self, blank: int) -> None:
        super().__init__()
        self.blank = blank
        self.reduction = None  # NeMo's RNNTLoss sets and restores it around the call, and reduces itself

    def forward(
        self, acts: torch.Tensor, labels: torch.Tensor, act_lens: torch.Tensor, label_lens: torch.Tensor
    ) -> torch.Tensor:
        frames, tokens = int(act_lens.max()), int(label_lens.max())  # torchaudio wants the padding trimmed
        return torchaudio.functional.rnnt_loss(
            acts[:, :frames, : tokens + 1].float().contiguous(),
            labels[:, :tokens].int().contiguous(),
            act_lens.int(),
            label_lens.int(),
            blank=self.blank,
            reduction="none",
        )


def read_nemo_manifest(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The JSON lines of a NeMo manifest."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def manifest_texts(path: str | os.PathLike) -> list[str]:
    """The ``text`` of every entry of a NeMo manifest, in order."""
    return [entry["text"] for entry in read_nemo_manifest(path)]


def split_entries(corpus: Path, split: str) -> list[dict[str, Any]]:
    """NeMo manifest entries (``audio_filepath``, ``duration``, lower-case ``text``) of a corpus split, by id."""
    candidates, skipped = scan_split(corpus, split)
    if skipped:
        raise ValueError(f"{corpus}/{split}: unreadable files {[s.path for s in skipped[:3]]}")
    entries = []
    for candidate in sorted(candidates, key=lambda c: c.id):
        duration, problem = probe_audio(candidate.path)
        if problem:
            raise ValueError(f"{candidate.path}: {problem}")
        entries.append({"audio_filepath": candidate.path, "duration": duration, "text": candidate.text.lower()})
    return entries


def with_silence_margins(entries: list[dict[str, Any]], directory: Path, seconds: float) -> list[dict[str, Any]]:
    """`entries` with their audio `seconds` of digital silence longer on each side: copies written into
    `directory` (atomically; one already there of the padded length is reused) under the same file names."""
    padded = []
    for entry in entries:
        source = Path(entry["audio_filepath"])
        target, info = directory / source.name, soundfile.info(source)
        margin_samples = round(seconds * info.samplerate)
        if not (target.is_file() and soundfile.info(target).frames == info.frames + 2 * margin_samples):
            samples, rate = soundfile.read(source, dtype="float32")
            margin = np.zeros(margin_samples, dtype=np.float32)
            audio, subtype = np.concatenate([margin, samples, margin]), info.subtype

            def write(tmp: Path, audio=audio, rate=rate, subtype=subtype) -> None:
                soundfile.write(tmp, audio, rate, subtype=subtype, format="FLAC")

            write_atomic(target, write)
        padded.append({**entry, "audio_filepath": str(target), "duration": entry["duration"] + 2 * seconds})
    return padded


def write_nemo_manifests(
    corpus: Path, directory: Path, pretrain_utterances: int, silence_margin: float = 0.0
) -> dict[str, Path]:
    """NeMo manifests of the corpus' splits (lower-case text), "pretrain": the first `pretrain_utterances`
    training utterances (by id), and "finetune": the other training utterances (none when there are none); with
    a `silence_margin` (seconds) they name copies of the audio with that much silence before and after
    (`with_silence_margins`, in ``directory/audio/<split>``)."""
    manifests = {}
    for split in SPLITS:
        entries = split_entries(corpus, split)
        if silence_margin:
            entries = with_silence_margins(entries, directory / "audio" / split, silence_margin)
        manifests[split] = _write_manifest(directory / f"{split}.json", entries)
        if split == "train":
            if not 0 < pretrain_utterances <= len(entries):
                raise ValueError(f"pretrain_utterances={pretrain_utterances} must lie in [1, {len(entries)}]")
            manifests["pretrain"] = _write_manifest(directory / "pretrain.json", entries[:pretrain_utterances])
            if pretrain_utterances < len(entries):  # the rest: new sentences for a fine-tune, as a user's own data
                manifests["finetune"] = _write_manifest(directory / "finetune.json", entries[pretrain_utterances:])
    return manifests


def _write_manifest(path: Path, entries: list[dict[str, Any]]) -> Path:
    return write_text_atomic(path, "".join(json.dumps(entry) + "\n" for entry in entries))


def _model_config(settings: ReferenceSettings, tokenizer_dir: Path, manifests: dict[str, Path]) -> dict[str, Any]:
    """The example FastConformer config of `settings` at its sizes, hybrid, with NeMo's data and optimiser
    sections."""
    config = nemo_config(settings.example, tokenizer_dir)
    config["encoder"].update(
        d_model=settings.d_model,
        n_layers=settings.n_layers,
        n_heads=settings.n_heads,
        conv_kernel_size=settings.conv_kernel_size,
        subsampling_factor=settings.subsampling_factor,
        subsampling_conv_channels=settings.d_model,
        **settings.encoder_overrides(),
    )
    for key in ("dropout", "dropout_pre_encoder", "dropout_att"):
        config["encoder"][key] = settings.dropout
    config["model_defaults"].update(
        enc_hidden=settings.d_model, pred_hidden=settings.hidden, joint_hidden=settings.hidden
    )
    config["decoder"]["prednet"].update(pred_hidden=settings.hidden, dropout=settings.dropout)
    config["joint"]["jointnet"].update(joint_hidden=settings.hidden, dropout=settings.dropout)
    config["spec_augment"] = None  # a few hundred steps: masking would only slow the learning down
    if isinstance(settings, TDTReferenceSettings):  # the example's interpolations carry these to the loss, decoding
        config["model_defaults"].update(
            tdt_durations=list(settings.tdt_durations), num_tdt_durations=len(settings.tdt_durations)
        )
        config["loss"]["tdt_kwargs"]["sigma"] = settings.tdt_sigma
    dataset = {
        "sample_rate": 16000,
        "batch_size": settings.batch_size,
        "num_workers": 0,
        "pin_memory": False,
        "max_duration": 30.0,
        "min_duration": 0.1,
    }
    config["train_ds"] = {**dataset, "manifest_filepath": str(manifests["pretrain"]), "shuffle": True}
    config["validation_ds"] = {**dataset, "manifest_filepath": str(manifests["dev"]), "shuffle": False}
    config["optim"] = {
        "name": "adamw",
        "lr": settings.lr,
        "betas": [0.9, 0.98],
        "weight_decay": 1e-3,
        "sched": {"name": "CosineAnnealing", "warmup_steps": settings.warmup_steps, "min_lr": 1e-5},
    }
    config["target"] = HYBRID_TARGET  # the class ASRModel.restore_from builds
    config["aux_ctc"] = {
        "ctc_loss_weight": settings.ctc_weight,
        "use_cer": False,
        "ctc_reduction": "mean_batch",
        "decoder": {
            "_target_": "nemo.collections.asr.modules.ConvASRDecoder",
            "feat_in": None,
            "num_classes": -1,
            "vocabulary": [],
        },
        "decoding": {"strategy": "greedy"},
    }
    return config


def nemo_trainer(max_steps: int, gradient_clip_val: float = 1.0):
    """A CPU Lightning trainer for NeMo models: no logger, checkpoints, progress bar or validation."""
    import lightning.pytorch as pl

    return pl.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        gradient_clip_val=gradient_clip_val,
    )


def cpu_loss(model) -> nn.Module:
    """The loss function of NeMo's ``model`` that runs on CPU (module docstring): torchaudio's RNN-T loss, or this
    project's TDT loss with the model's durations and sigma for a TDT model."""
    blank = model.joint.num_classes_with_blank - 1 - model.joint.num_extra_outputs  # NeMo's blank: last token
    if model.cfg.loss.get("loss_name") == "tdt":
        kwargs = model.cfg.loss.tdt_kwargs
        return ProjectTDTLoss(blank, list(kwargs.durations), float(kwargs.get("sigma", 0.0)))
    return TorchaudioRNNTLoss(blank)


def use_torchaudio_rnnt_loss(model) -> None:
    """Replaces the loss function inside NeMo's ``model.loss`` by `cpu_loss` (module docstring: NeMo's CPU
    losses are slow, and it has none for TDT)."""
    model.loss._loss = cpu_loss(model)


def _rnnt_form(hybrid) -> Any:
    """An ``EncDecRNNTBPEModel`` with the hybrid's config minus ``aux_ctc`` and all its weights but the CTC decoder."""
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf, open_dict

    config = OmegaConf.create(OmegaConf.to_container(hybrid.cfg, resolve=True))
    with open_dict(config):
        config.pop("aux_ctc")
        config.target = RNNT_TARGET
    model = EncDecRNNTBPEModel(cfg=config)
    state = {key: value for key, value in hybrid.state_dict().items() if not key.startswith("ctc_decoder.")}
    model.load_state_dict(state, strict=True)
    return model.eval()


@torch.no_grad()
def nemo_transcripts(model, manifest: Path, batch_size: int = 16) -> list[str]:
    """NeMo's ``transcribe`` of a manifest's audio (greedy, the model's decoding config), in order."""
    paths = [entry["audio_filepath"] for entry in read_nemo_manifest(manifest)]
    hypotheses = model.eval().transcribe(paths, batch_size=batch_size, verbose=False)
    hypotheses = hypotheses[0] if isinstance(hypotheses, tuple) else hypotheses
    return [h.text if hasattr(h, "text") else str(h) for h in hypotheses]


@torch.no_grad()
def nemo_mean_loss(model, manifest: Path, batch_size: int = 16) -> float:
    """NeMo's RNN-T loss per utterance on a manifest (eval mode: no dither, no dropout), mean over utterances.

    NeMo's preprocessor, encoder, decoder and joint (log-probabilities, blank last), the loss by `cpu_loss`.
    """
    from asr_plugin.audio import load_audio

    model.eval()
    entries = read_nemo_manifest(manifest)
    total = 0.0
    for start in range(0, len(entries), batch_size):
        chunk = entries[start : start + batch_size]
        waves = [load_audio(entry["audio_filepath"]) for entry in chunk]
        audio = nn.utils.rnn.pad_sequence(waves, batch_first=True)
        lengths = torch.tensor([len(w) for w in waves])
        tokens = [torch.tensor(model.tokenizer.text_to_ids(entry["text"])) for entry in chunk]
        targets = nn.utils.rnn.pad_sequence(tokens, batch_first=True)
        target_lengths = torch.tensor([len(t) for t in tokens])
        encoded, encoded_lengths = model.forward(input_signal=audio, input_signal_length=lengths)
        decoder_out, _, _ = model.decoder(targets=targets, target_length=target_lengths)
        log_probs = model.joint(encoder_outputs=encoded, decoder_outputs=decoder_out)  # (B, T, U+1, V)
        losses = cpu_loss(model)(log_probs, targets, encoded_lengths, target_lengths)
        total += float(losses.sum())
    return total / len(entries)


def word_error_rate(hypotheses: list[str], references: list[str]) -> float:
    """Corpus WER (word edits / reference words), torchmetrics' definition."""
    from torchmetrics.functional.text import word_error_rate as wer

    return float(wer(hypotheses, references))


CORPUS_FIELDS = ("n_train", "n_dev", "n_test", "corpus_seed", "corpus_version", "train_engines")


def corpus_key(settings: ReferenceSettings) -> str:
    """16 hex digits of the sha256 of the settings the mini corpus is made of (`CORPUS_FIELDS`): references
    with the same key speak the same corpus."""
    fields = {name: getattr(settings, name) for name in CORPUS_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def reference_corpus(root: str | os.PathLike, settings: ReferenceSettings) -> Path:
    """The mini corpus of `settings` at `root`, synthesised where it is not complete (`make_mini_librispeech`
    refuses a root made with other settings)."""
    return make_mini_librispeech(
        root,
        settings.n_train,
        settings.n_dev,
        settings.n_test,
        settings.corpus_seed,
        list(settings.train_engines),
    )


def train_reference(directory: str | os.PathLike, settings: ReferenceSettings = ReferenceSettings()) -> NemoReference:
    """Trains the reference model into `directory` (see the module docstring) and returns what it made.

    What a previous, interrupted run left complete is reused: the corpus, the tokenizer, and the two
    ``.nemo`` files (each written atomically; the hybrid last, so both present means the training finished).
    """
    import lightning.pytorch as pl
    from nemo.collections.asr.models import ASRModel, EncDecHybridRNNTCTCBPEModel
    from omegaconf import OmegaConf

    directory = Path(directory)
    corpus = reference_corpus(directory / "mini_librispeech", settings)
    manifests = write_nemo_manifests(
        corpus, directory / "manifests", settings.pretrain_utterances, settings.silence_margin
    )
    texts = [entry["text"] for entry in read_nemo_manifest(manifests["pretrain"])]
    tokenizer_dir = directory / "tokenizer"
    if not (tokenizer_dir / "tokenizer.model").is_file():
        train_nemo_style_tokenizer(tokenizer_dir, settings.vocab_size, texts)

    models = {"hybrid": directory / "hybrid.nemo", "rnnt": directory / "rnnt.nemo"}
    if not all(path.is_file() for path in models.values()):  # written atomically: both there = trained
        pl.seed_everything(settings.seed, workers=True, verbose=False)
        trainer = nemo_trainer(settings.steps)
        # under a "model" root, as in NeMo's yaml files, so that the TDT example's ${model...} interpolations resolve
        config = OmegaConf.create({"model": _model_config(settings, tokenizer_dir, manifests)}).model
        hybrid = EncDecHybridRNNTCTCBPEModel(cfg=config, trainer=trainer)
        use_torchaudio_rnnt_loss(hybrid)
        trainer.fit(hybrid)
        hybrid.eval()
        save_nemo_atomic(_rnnt_form(hybrid), models["rnnt"])
        save_nemo_atomic(hybrid, models["hybrid"])

    transcripts: dict[str, dict[str, list[str]]] = {}
    wer: dict[str, dict[str, float]] = {}
    loss: dict[str, float] = {}
    for form, path in models.items():
        restored = ASRModel.restore_from(str(path), map_location="cpu").eval()
        transcripts[form], wer[form] = {}, {}
        for split in EVAL_SPLITS:
            references = manifest_texts(manifests[split])
            transcripts[form][split] = nemo_transcripts(restored, manifests[split])
            wer[form][split] = word_error_rate(transcripts[form][split], references)
            if form == "rnnt":
                loss[split] = nemo_mean_loss(restored, manifests[split])
    result = NemoReference(directory, corpus, manifests, models, transcripts, wer, loss, dataclasses.asdict(settings))
    record = {**dataclasses.asdict(result), "directory": None}
    write_text_atomic(directory / RESULT_NAME, json.dumps(record, default=str, indent=1))
    return result


# NeMo's own fine-tuning optimiser (examples/asr/conf/asr_finetune/speech_to_text_finetune.yaml), with the warmup
# as a tenth of the run (its 5000 steps would outlast these runs), as conf/finetune/from_checkpoint.yaml has it
NEMO_FINETUNE_OPTIM = {
    "name": "adamw",
    "lr": 1e-4,
    "betas": [0.9, 0.98],
    "weight_decay": 1e-3,
    "sched": {"name": "CosineAnnealing", "warmup_steps": None, "warmup_ratio": 0.1, "min_lr": 5e-6},
}


@dataclass(frozen=True)
class FineTuneSettings:
    """A fine-tuning run of the reference, the same for NeMo (`nemo_finetune`) and the recipe (docs/finetune.md).

    Matched settings (``preset=False``): AdamW (betas 0.9/0.98, weight decay 1e-3), linear warmup then cosine
    decay to ``min_lr_ratio * lr``, gradient norm clipped at 5, no SpecAugment.
    ``preset=True``: each side's defaults instead, as a user gets them: the recipe's ``+finetune=from_nemo`` with
    no optimiser, augmentation or CTC overrides, NeMo with its fine-tuning config's optimiser
    (`NEMO_FINETUNE_OPTIM`, no gradient clipping) and the model's own config (its SpecAugment and CTC weight).
    ``data``: what both train and validate on (`fine_tuning_manifests`): "finetune" (the training utterances
    NeMo's training left out: new sentences, mostly of speakers it never heard, as a user's own recordings
    are; validation on the reference's dev), "train" (the whole training split, the pretraining data
    included), or `NEW_ENGINE` (another engine's speech, which the reference never heard: a corpus of its own
    with ``new_engine_utterances`` = (train, dev) utterances; validation on its dev).
    ``seed``: NeMo's (weights' dropout draws and batch order; `pl.seed_everything`) and the recipe's ``seed``.
    """

    steps: int = 30
    lr: float = 5e-4
    warmup_steps: int = 5
    min_lr_ratio: float = 0.01
    batch_size: int = 12  # ~30 s of the mini corpus' ~2.3 s utterances: the recipe's data.max_duration=30
    preset: bool = False
    data: str = "finetune"
    new_engine_utterances: tuple[int, int] = (400, 100)
    seed: int = 0


# The engine of FineTuneSettings.data=NEW_ENGINE: Piper's neural voice, where the reference learnt espeak-ng's
# formant synthesis alone (ReferenceSettings.train_engines), as a user's recordings come from another domain
# than a checkpoint's training data. Its corpus has its own seed: other sentences and speakers.
NEW_ENGINE = "piper"
NEW_ENGINE_SEED = 1
FINE_TUNING_DATA = ("finetune", "train", NEW_ENGINE)


def new_engine_manifests(reference: NemoReference, utterances: tuple[int, int]) -> dict[str, Path]:
    """NeMo manifests "train" and "dev" of a `NEW_ENGINE` mini corpus of `utterances` = (train, dev)
    utterances, made (or reused) under the reference's directory."""
    n_train, n_dev = utterances
    name = f"{NEW_ENGINE}_{n_train}_{n_dev}"
    corpus = make_mini_librispeech(
        reference.directory / f"{name}_corpus", n_train, n_dev, 1, NEW_ENGINE_SEED, [NEW_ENGINE]
    )
    return {
        split: _write_manifest(
            reference.directory / f"{name}_manifests" / f"{split}.json", split_entries(corpus, split)
        )
        for split in ("train", "dev")
    }


def fine_tuning_manifests(reference: NemoReference, settings: FineTuneSettings) -> tuple[Path, Path]:
    """(training, validation) manifests of ``settings.data``; ValueError naming it when the reference has none."""
    if settings.data == NEW_ENGINE:
        manifests = new_engine_manifests(reference, settings.new_engine_utterances)
        return manifests["train"], manifests["dev"]
    if settings.data not in FINE_TUNING_DATA or settings.data not in reference.manifests:
        raise ValueError(
            f"FineTuneSettings.data={settings.data!r}: the reference in {reference.directory} has no such "
            f"training manifest (it has {sorted(set(reference.manifests) & {'train', 'finetune'})} and "
            f"{NEW_ENGINE!r}; 'finetune' needs ReferenceSettings.pretrain_utterances < n_train)"
        )
    return reference.manifests[settings.data], reference.manifests["dev"]


def nemo_finetune(
    reference: NemoReference, form: str, settings: FineTuneSettings = FineTuneSettings()
) -> dict[str, Any]:
    """NeMo's own fine-tuning of the reference's `form` for ``settings.steps`` steps on the manifest of
    ``settings.data`` (its own training step, data loader and dither; the RNN-T loss by torchaudio, module
    docstring).

    Returns the WER and RNN-T loss per utterance after it on the validation manifest of ``settings.data``
    (`fine_tuning_manifests`), NeMo's transcripts of it, and the WER on the reference's own dev set
    (``reference_dev_wer``: what a fine-tune on another domain keeps of the first).
    """
    import lightning.pytorch as pl
    from nemo.collections.asr.models import ASRModel
    from omegaconf import open_dict

    train, dev = fine_tuning_manifests(reference, settings)
    pl.seed_everything(settings.seed, workers=True, verbose=False)
    trainer = nemo_trainer(settings.steps, gradient_clip_val=0.0 if settings.preset else 5.0)
    model = ASRModel.restore_from(str(reference.models[form]), map_location="cpu", trainer=trainer)
    with open_dict(model.cfg):
        model.cfg.train_ds.manifest_filepath = str(train)
        model.cfg.train_ds.batch_size = settings.batch_size
        model.cfg.optim = (
            NEMO_FINETUNE_OPTIM
            if settings.preset
            else {
                "name": "adamw",
                "lr": settings.lr,
                "betas": [0.9, 0.98],
                "weight_decay": 1e-3,
                "sched": {
                    "name": "CosineAnnealing",
                    "warmup_steps": settings.warmup_steps,
                    "min_lr": settings.lr * settings.min_lr_ratio,
                },
            }
        )
    model.setup_training_data(model.cfg.train_ds)
    model.setup_optimization(model.cfg.optim)
    use_torchaudio_rnnt_loss(model)
    trainer.fit(model)
    transcripts = nemo_transcripts(model, dev)
    return {
        "wer": word_error_rate(transcripts, manifest_texts(dev)),
        "loss": nemo_mean_loss(model, dev),
        "transcripts": transcripts,
        "reference_dev_wer": word_error_rate(
            nemo_transcripts(model, reference.manifests["dev"]), reference.references("dev")
        ),
    }


def recipe_overrides(
    reference: NemoReference,
    form: str,
    mode: str,
    directory: str | os.PathLike,
    settings: FineTuneSettings = FineTuneSettings(),
) -> list[str]:
    """Hydra overrides of ``conf/train.yaml`` that fine-tune the reference's `form` in the recipe
    (``+finetune=from_nemo``) as `settings` say, in loss `mode`, on the reference's NeMo manifests as a user's
    own data (``data=nemo``: the manifests of ``settings.data``, `fine_tuning_manifests`); the run and its prepared
    data go under `directory`. Validation before the first step and after the last; no test.
    A hybrid trains its CTC decoder as the auxiliary head with the reference's CTC weight. With ``settings.preset``
    the optimiser, schedule, augmentation and CTC weight are the preset's and the checkpoint's (no overrides)."""
    ctc_weight = reference.settings["ctc_weight"] if form == "hybrid" else 0.0
    train, dev = fine_tuning_manifests(reference, settings)
    matched = [
        "spec_augment=null",
        "finetune.augmentation=config",
        f"optim.optimizer.lr={settings.lr}",
        "optim.scheduler.warmup_ratio=null",
        f"optim.scheduler.warmup_steps={settings.warmup_steps}",
        f"optim.scheduler.min_lr_ratio={settings.min_lr_ratio}",
        f"ctc_weight={ctc_weight}",
    ]
    return [
        "+finetune=from_nemo",
        f"finetune.path={reference.models[form]}",
        f"+loss={mode}",
        "data=nemo",
        f"data.train_manifests=[{train}]",
        f"data.valid_manifests=[{dev}]",
        f"data.work_dir={directory}/work",
        f"paths.root_dir={directory}",
        f"paths.output_dir={directory}/run",
        "data.num_workers=0",
        "data.max_duration=30",
        f"seed={settings.seed}",
        f"trainer.max_steps={settings.steps}",
        f"trainer.val_check_interval={settings.steps}",
        "trainer.check_val_every_n_epoch=null",  # val_check_interval counts steps across epochs
        "trainer.enable_progress_bar=false",
        "test=false",
        "callbacks.model_summary=null",
        *([] if settings.preset else matched),
    ]


@torch.no_grad()
def imported_transcripts(
    path: str | os.PathLike,
    manifest: Path,
    batch_size: int = 8,
    lm: str | os.PathLike | None = None,
    lm_weight: float = 0.0,
    beam: int | None = None,
    lm_final: bool = True,
    score_norm: bool = True,
) -> list[str]:
    """`import_nemo` of the ``.nemo`` `path` (its front end, tokenizer and our `greedy_search`, or `beam_search`
    with `beam` hypotheses, `lm_final` and `score_norm` when given, with NeMo's ``max_symbols``, fused with the ARPA
    file `lm` at `lm_weight` when given) on a manifest's audio, in order."""
    from asr_plugin.audio import load_audio
    from asr_plugin.decoding import beam_search, greedy_search
    from asr_plugin.decoding.ngram_lm import lm_fusion
    from asr_plugin.formats.nemo import import_nemo, nemo_training_options

    imported = import_nemo(path)
    max_symbols = nemo_training_options(imported.config)["max_symbols_per_frame"]
    entries = read_nemo_manifest(manifest)
    fusion = lm_fusion(lm, lm_weight, imported.tokenizer, names=("lm", "lm_weight"))
    texts = []
    for start in range(0, len(entries), batch_size):
        waves = [load_audio(entry["audio_filepath"]) for entry in entries[start : start + batch_size]]
        features = imported.frontend(
            nn.utils.rnn.pad_sequence(waves, batch_first=True), torch.tensor([len(w) for w in waves])
        )
        encoded = imported.model.encode(*features)
        if beam is None:
            hyps = greedy_search(imported.model, *encoded, max_symbols, imported.tokenizer, fusion=fusion)
        else:
            hyps = beam_search(
                imported.model,
                *encoded,
                beam,
                imported.tokenizer,
                max_symbols,
                fusion=fusion,
                lm_final=lm_final,
                score_norm=score_norm,
            )
        texts += [hyp.text for hyp in hyps]
    return texts


def eval_transcripts(checkpoint: str | os.PathLike, manifest: Path, directory: str | os.PathLike) -> list[str]:
    """What ``recipes/librispeech/eval.py checkpoint=... data=nemo data.test_manifests={dev: <manifest>}`` writes (greedy,
    the checkpoint's own tokenizer, front end and ``max_symbols_per_frame``): its recogs file's hypotheses, in
    manifest order. Its result files go to `directory`."""
    from hydra import compose, initialize_config_dir

    from asr_plugin.evaluation import evaluate

    directory = Path(directory)
    overrides = [
        f"checkpoint={checkpoint}",
        "data=nemo",
        f"data.work_dir={directory}/work",
        "data.num_workers=0",
        f"data.test_manifests={{dev: {manifest}}}",  # a NeMo manifest as a test set of data=nemo
        "decoding.methods=[greedy]",
        f"output_dir={directory}",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("eval", overrides=overrides)
    evaluate(cfg)
    recogs = (directory / "recogs-dev-greedy.txt").read_text(encoding="utf-8").splitlines()[1:]
    # ids are "<manifest stem>-<line>" (asr_plugin.data.sources.manifest_sets.utterance_id): sorted = in order
    rows = [line.split("\t") for line in recogs]
    if len(rows) != len(read_nemo_manifest(manifest)):
        raise ValueError(f"{directory}/recogs-dev-greedy.txt has {len(rows)} lines, {manifest} more or fewer")
    return [row[2] if len(row) > 2 else "" for row in rows]


def load_reference(directory: str | os.PathLike) -> NemoReference:
    """The `NemoReference` recorded in `directory` (FileNotFoundError without one)."""
    directory = Path(directory)
    record = json.loads((directory / RESULT_NAME).read_text(encoding="utf-8"))
    return NemoReference(
        directory=directory,
        corpus=Path(record["corpus"]),
        manifests={key: Path(value) for key, value in record["manifests"].items()},
        models={key: Path(value) for key, value in record["models"].items()},
        transcripts=record["transcripts"],
        wer=record["wer"],
        loss=record["loss"],
        settings=record["settings"],
    )


def cached_reference(cache_dir: str | os.PathLike, settings: ReferenceSettings = ReferenceSettings()) -> NemoReference:
    """`train_reference` into ``<cache_dir>/nemo_reference_<settings.key()>``, or what is already there.

    ``reference.json`` is written last; a directory without it is an interrupted run, which `train_reference`
    continues (the corpus, tokenizer and ``.nemo`` files it finds complete are kept). Paths inside are
    absolute: the cache directory is not meant to be moved.
    """
    target = Path(cache_dir) / f"nemo_reference_{settings.key()}"
    if (target / RESULT_NAME).is_file():
        return load_reference(target)
    return train_reference(target, settings)


# The references the tests marked nemo use, trained once by scripts/make_nemo_references.py and committed under
# REFERENCES_DIR/<name>/ (their .nemo files and settings.json); `committed_reference` rebuilds the rest.
COMMITTED_REFERENCES: dict[str, ReferenceSettings] = {
    "full_context": ReferenceSettings(),
    "streaming": StreamingReferenceSettings(),
    "tdt": TDTReferenceSettings(),
}
REFERENCES_DIR = Path(__file__).resolve().parents[2] / "tests" / "nemo_references"
SETTINGS_NAME = "settings.json"
REMAKE = "python scripts/make_nemo_references.py"


def commit_reference(reference: NemoReference, name: str, references_dir: Path = REFERENCES_DIR) -> Path:
    """Copies `reference`'s ``.nemo`` files and settings (with their key) into ``references_dir/name``."""
    target = references_dir / name
    target.mkdir(parents=True, exist_ok=True)
    for form, path in reference.models.items():
        write_bytes_atomic(target / f"{form}.nemo", Path(path).read_bytes())
    settings = {"key": COMMITTED_REFERENCES[name].key(), "settings": reference.settings}
    write_text_atomic(target / SETTINGS_NAME, json.dumps(settings, indent=1, sort_keys=True) + "\n")
    return target


def committed_reference(
    directory: str | os.PathLike,
    name: str,
    references_dir: Path = REFERENCES_DIR,
    corpus: str | os.PathLike | None = None,
) -> NemoReference:
    """The committed reference `name` in `directory`: its ``.nemo`` files copied in, the corpus, manifests and
    NeMo's transcripts, WER and loss rebuilt by `train_reference` (which finds the models and trains nothing).
    `corpus`: a complete `reference_corpus` of the reference's corpus settings made before (the references share
    one: `corpus_key`), copied in, so that nothing is synthesised again.

    Raises ValueError naming scripts/make_nemo_references.py when the committed models were trained with other
    settings than `COMMITTED_REFERENCES[name]` (the code changed what the reference is) or are missing."""
    settings = COMMITTED_REFERENCES[name]
    source = references_dir / name
    recorded = json.loads((source / SETTINGS_NAME).read_text()) if (source / SETTINGS_NAME).is_file() else None
    if recorded is None or not all((source / f"{form}.nemo").is_file() for form in FORMS):
        raise ValueError(f"{source} holds no committed NeMo reference {name!r}: make it with `{REMAKE}`")
    if recorded["key"] != settings.key():
        changed = sorted(
            key
            for key, value in dataclasses.asdict(settings).items()
            if json.loads(json.dumps(value)) != recorded["settings"].get(key)
        )
        raise ValueError(
            f"the committed NeMo reference {source} was trained with other settings than "
            f"benchmarks.nemo_reference.COMMITTED_REFERENCES[{name!r}] (differing: {', '.join(changed) or 'the key'}): "
            f"retrain it with `{REMAKE} --only {name}` and commit what it writes"
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for form in FORMS:
        write_bytes_atomic(directory / f"{form}.nemo", (source / f"{form}.nemo").read_bytes())
    if corpus is not None:
        shutil.copytree(corpus, directory / "mini_librispeech", dirs_exist_ok=True)
    return train_reference(directory, settings)
