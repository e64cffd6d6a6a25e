"""`.nemo` files laid out as NeMo writes them, written without NeMo, for the import and fine-tuning tests
(tests/ is on sys.path: see tests/conftest.py). NeMo-built models come from `benchmarks.nemo_examples`."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import torch
import yaml
from omegaconf import OmegaConf

from asr_plugin.formats.nemo.config import transducer_kwargs
from asr_plugin.models import Transducer, build_transducer
from asr_plugin.text import Tokenizer, train_tokenizer
from benchmarks.nemo_examples import SENTENCES, nemo_config, train_nemo_style_tokenizer

# Our key -> NeMo's, written out independently of asr_plugin.formats.nemo.weights (the inverse direction).
OURS_TO_NEMO = (
    (r"encoder\.subsampling\.(.+)", r"encoder.pre_encode.\1"),
    (r"encoder\.layers\.(.+)", r"encoder.layers.\1"),
    (r"predictor\.embedding\.weight", "decoder.prediction.embed.weight"),
    (r"predictor\.lstm\.(.+)", r"decoder.prediction.dec_rnn.lstm.\1"),
    (r"joint\.encoder_proj\.(.+)", r"joint.enc.\1"),
    (r"joint\.predictor_proj\.(.+)", r"joint.pred.\1"),
    (r"joint\.output\.(.+)", r"joint.joint_net.2.\1"),
)
VOCAB_LAYERS = ("decoder.prediction.embed.weight", "joint.joint_net.2.weight", "joint.joint_net.2.bias")


def nemo_layout(model: Transducer) -> dict[str, torch.Tensor]:
    """Our state dict under NeMo's names, blank rows moved from first to after the last token (NeMo's order; a
    TDT joint's duration rows stay at the end)."""
    state = {}
    for key, value in model.state_dict().items():
        pattern, replacement = next((p, r) for p, r in OURS_TO_NEMO if re.fullmatch(p, key))
        name = re.sub(pattern, replacement, key)
        tokens = model.vocab_size
        state[name] = torch.cat([value[1:tokens], value[:1], value[tokens:]]) if name in VOCAB_LAYERS else value.clone()
    state["preprocessor.featurizer.window"] = torch.hann_window(400, periodic=False)
    state["preprocessor.featurizer.fb"] = torch.zeros(1, 80, 257)
    return state


def write_synthetic_nemo(
    directory: Path,
    name: str = "conformer_transducer",
    seed: int = 0,
    config_edit=None,
    extra_weights: dict | None = None,
) -> tuple[Path, Transducer]:
    """A `.nemo` file laid out as NeMo writes one (`nemo_config(name)`, SentencePiece tokenizer,
    random weights under NeMo's names) and the model of ours it should import as. No NeMo needed.

    `config_edit(config)` may change the config before it is written (to test unsupported keys);
    `extra_weights` are added to the state dict (tensors NeMo models have and ours do not).
    """
    tokenizer_dir = train_nemo_style_tokenizer(directory / f"{name}_tokenizer")
    config = nemo_config(name, tokenizer_dir)
    pieces = len((tokenizer_dir / "vocab.txt").read_text().split())
    config["tokenizer"]["model_path"] = "nemo:abc_tokenizer.model"
    config["decoder"]["vocab_size"] = pieces
    config["joint"]["num_classes"] = pieces
    torch.manual_seed(seed)
    resolved = OmegaConf.to_container(OmegaConf.create({"model": config}).model, resolve=True)  # NeMo's ${model...}
    model = build_transducer(pieces + 1, **transducer_kwargs(resolved)).eval()
    with torch.no_grad():
        for key, parameter in model.named_parameters():
            if "pos_bias" in key or "batch_norm" in key:
                parameter.normal_(0.0, 0.3)
        model.predictor.embedding.weight[0] = 0.0  # NeMo's blank row is its padding_idx
    if config_edit is not None:
        config_edit(config)
    weights = io.BytesIO()
    torch.save({**nemo_layout(model), **(extra_weights or {})}, weights)
    members = {
        "model_config.yaml": yaml.safe_dump(config).encode(),
        "model_weights.ckpt": weights.getvalue(),
        "abc_tokenizer.model": (tokenizer_dir / "tokenizer.model").read_bytes(),
    }
    path = directory / f"{name}.nemo"
    with tarfile.open(path, "w") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(f"./{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path, model


# NeMo-expressible sizes none of the NeMo example fixtures use (64 mel bins, no biases, 2-layer LSTM, tanh joint)
OUR_ARCHITECTURE = dict(
    input_dim=64,
    d_model=24,
    num_layers=2,
    num_heads=2,
    ffn_dim=96,
    conv_kernel_size=7,
    subsampling_factor=4,
    dropout=0.0,
    attention="rel_pos",
    subsampling="dw_striding",
    subsampling_channels=8,
    xscaling=False,
    encoder_bias=False,
    predictor_embed_dim=20,
    predictor_dim=20,
    predictor_layers=2,
    predictor_dropout=0.0,
    joint_dim=28,
    joint_activation="tanh",
    joint_dropout=0.0,
)
OUR_FRONTEND = {
    "kind": "nemo",
    "options": {
        "num_mel_bins": 64,
        "n_fft": 400,
        "win_length": 320,
        "preemphasis": None,
        "log_guard": 1e-6,
        "normalize": "all_features",
        "window": "hamming",
    },
}


def our_model_and_tokenizer(directory: Path) -> tuple[Transducer, dict, Tokenizer]:
    """A model of this project's own kind (random weights, eval mode), its `build_transducer` arguments and its
    SentencePiece tokenizer ("asr_plugin" convention, trained into `directory`); NeMo's front end is `OUR_FRONTEND`."""
    tokenizer = train_tokenizer([s.upper() for s in SENTENCES] * 4, directory / "ours.model", vocab_size=36)
    torch.manual_seed(5)
    architecture = {**OUR_ARCHITECTURE, "vocab_size": tokenizer.vocab_size}
    return build_transducer(**architecture).eval(), architecture, tokenizer


def nemo_parameter_counts(config: dict, vocab_size: int) -> dict[str, int]:
    """Parameters of NeMo's own ConformerEncoder, RNNTDecoder and RNNTJoint built at the sizes of our
    `build_transducer` arguments `config` (a preset), with `vocab_size` outputs (blank included). Needs NeMo."""
    from nemo.collections.asr.modules import ConformerEncoder, RNNTDecoder, RNNTJoint

    d_model = config["d_model"]
    encoder = ConformerEncoder(
        feat_in=config["input_dim"],
        n_layers=config["num_layers"],
        d_model=d_model,
        subsampling=config["subsampling"],
        subsampling_factor=config["subsampling_factor"],
        subsampling_conv_channels=config["subsampling_channels"],
        causal_downsampling=config.get("causal_downsampling", False),
        ff_expansion_factor=config["ffn_dim"] // d_model,
        self_attention_model="rel_pos",
        n_heads=config["num_heads"],
        att_context_size=config.get("att_context_size") or [-1, -1],
        att_context_style=config.get("att_context_style", "regular"),
        xscaling=config["xscaling"],
        conv_kernel_size=config["conv_kernel_size"],
        conv_norm_type=config.get("conv_norm_type", "batch_norm"),
        conv_context_size=config.get("conv_context_size"),
    )
    decoder = RNNTDecoder(
        prednet=dict(pred_hidden=config["predictor_dim"], pred_rnn_layers=config["predictor_layers"]),
        vocab_size=vocab_size - 1,
        blank_as_pad=True,
    )
    joint = RNNTJoint(
        jointnet=dict(
            encoder_hidden=d_model,
            pred_hidden=config["predictor_dim"],
            joint_hidden=config["joint_dim"],
            activation=config["joint_activation"],
        ),
        num_classes=vocab_size - 1,
    )
    modules = {"encoder": encoder, "predictor": decoder, "joint": joint}
    return {name: sum(p.numel() for p in module.parameters()) for name, module in modules.items()}
