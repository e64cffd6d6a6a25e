"""Peak memory and time of one NeMo training step: NeMo's RNNTJoint (fused path off, and on with several
fused_batch_size settings) against SampleWiseRNNTJoint (``use_samplewise``). Needs NeMo (the nemo extra).

One step is NeMo's own ``EncDecRNNTModel.training_step`` and its backward (preprocessor, encoder, predictor,
joint, loss; dropout on, the training WER not computed) on random audio of --seconds per utterance with
--tokens-per-second random targets, the model built by NeMo from its example config (a character vocabulary of
--vocab labels stands in for the BPE tokenizer of that size: only the embedding and the output layer see it).
Every configuration runs in a fresh interpreter, --rounds times, interleaved.

CPU: memory is the peak RSS above the RSS after the model and inputs were built and one warm-up step on a 2 s
batch ran (JIT and extension loads), with glibc told to map every block over 64 KiB on its own
(MALLOC_MMAP_THRESHOLD_) so freed tensors leave the RSS; time is the wall and the process CPU time of the step.
CUDA: peak allocated memory of the step (inputs and model included) and its time, under --dtype autocast.

    OMP_NUM_THREADS=1 python scripts/benchmark_nemo_plugin.py                    # CPU, shrunk Conformer-Transducer Small
    python scripts/benchmark_nemo_plugin.py --preset parakeet-rnnt-1.1b          # GPU: batch 32 x 40 s, bf16
"""

from __future__ import annotations

import argparse
import os

from asr_plugin.user_errors import exit_on_user_error
from benchmarks.training_step import add_round_options, measure_requested, print_rounds_table, run_rounds, time_steps

# name -> NeMo example (benchmarks.nemo_examples) and its sizes, batch, audio seconds, vocabulary,
# device, dtype and the fused_batch_size settings to try
PRESETS = {
    # NeMo's Conformer-Transducer Small (d_model 176, 4 heads, 16 layers, predictor/joint 320, 1024 tokens) with
    # 2 of its 16 layers: the joint and the loss, what the configurations differ in, keep their full size.
    "conformer-small-shrunk": dict(
        architecture="conformer_transducer",
        sizes=dict(d_model=176, n_heads=4, n_layers=2, hidden=320),
        batch=4,
        seconds=30.0,
        vocab=1024,
        device="cpu",
        dtype="fp32",
        fused_batch_sizes=[1, 2, 4],
    ),
    # Parakeet-RNNT-1.1B: FastConformer XXL (d_model 1024, 8 heads, 42 layers, 2-layer LSTM 640, joint 640).
    "parakeet-rnnt-1.1b": dict(
        architecture="fast_conformer_transducer",
        sizes=dict(d_model=1024, n_heads=8, n_layers=42, hidden=640, pred_rnn_layers=2, subsampling_conv_channels=256),
        batch=32,
        seconds=40.0,
        vocab=1024,
        device="cuda",
        dtype="bf16",
        fused_batch_sizes=[1, 4, 8, 16],
    ),
}
WARM_UP_SECONDS = 2.0
JOINTS = ("nemo", "fused", "samplewise")
DROPOUTS = (("encoder", "dropout"), ("encoder", "dropout_pre_encoder"), ("encoder", "dropout_att"))


def model_config(run: dict) -> dict:
    """NeMo's example config of the run's architecture at its sizes and dropout, with a character vocabulary of
    run["vocab"] labels (an EncDecRNNTModel) and NeMo's fused path as the run asks."""
    from benchmarks.nemo_examples import nemo_config

    config = nemo_config(run["architecture"], tokenizer_dir="unused")
    del config["tokenizer"]
    config["labels"] = [chr(0x4E00 + i) for i in range(run["vocab"])]  # one character per label
    sizes = {"pred_rnn_layers": 1, **run["sizes"]}
    for key in ("d_model", "n_heads", "n_layers", "subsampling_conv_channels"):
        if key in sizes:
            config["encoder"][key] = sizes[key]
    config["model_defaults"] = {
        "enc_hidden": sizes["d_model"],
        "pred_hidden": sizes["hidden"],
        "joint_hidden": sizes["hidden"],
    }
    config["decoder"]["prednet"].update(pred_hidden=sizes["hidden"], pred_rnn_layers=sizes["pred_rnn_layers"])
    config["joint"]["jointnet"]["joint_hidden"] = sizes["hidden"]
    for section, key in DROPOUTS:
        config[section][key] = run["dropout"]
    config["decoder"]["prednet"]["dropout"] = config["joint"]["jointnet"]["dropout"] = run["dropout"]
    if run["fused_batch_size"]:
        config["joint"].update(fuse_loss_wer=True, fused_batch_size=run["fused_batch_size"])
    return config


def build(run: dict):
    """NeMo's model for `run` (random weights, seed 0) with its joint as the configuration asks, on the device."""
    import lightning.pytorch as pl
    import torch
    from nemo.collections.asr.models import EncDecRNNTModel
    from omegaconf import OmegaConf

    from asr_plugin.integrations.nemo import use_samplewise

    torch.manual_seed(0)
    model = EncDecRNNTModel(cfg=OmegaConf.create(model_config(run)))
    if run["samplewise"]:
        use_samplewise(model, memory_budget=run["memory_budget"])
    trainer = pl.Trainer(accelerator=run["device"], devices=1, barebones=True)
    trainer.log_every_n_steps = 10**9  # NeMo's training step decodes the training WER only every n steps
    model.set_trainer(trainer)
    model.setup_optimization(OmegaConf.create({"name": "adamw", "lr": 1e-4}))
    return model.to(run["device"]).train()


def make_batch(run: dict, seconds: float, device):
    import torch

    generator = torch.Generator().manual_seed(1)
    samples = int(seconds * 16000)
    tokens = max(1, round(seconds * run["tokens_per_second"]))
    audio = 0.1 * torch.randn(run["batch"], samples, generator=generator)
    targets = torch.randint(0, run["vocab"], (run["batch"], tokens), generator=generator)
    lengths = torch.full((run["batch"],), samples), torch.full((run["batch"],), tokens)
    return audio.to(device), lengths[0].to(device), targets.to(device), lengths[1].to(device)


def step(model, batch, run: dict) -> None:
    import torch

    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[run["dtype"]]
    with torch.autocast(run["device"], dtype=dtype, enabled=dtype is not None):
        loss = model.training_step(batch, 0)["loss"]
    loss.backward()
    model.zero_grad(set_to_none=True)


def measure(run: dict) -> dict:
    """One configuration in this interpreter: peak memory (bytes) and step times (s)."""
    import torch

    device = torch.device(run["device"])
    model = build(run)
    batch = make_batch(run, run["seconds"], device)
    step(model, make_batch(run, WARM_UP_SECONDS, device), run)
    return time_steps(lambda: step(model, batch, run), run["repeats"], device.type == "cuda")


def configurations(args, preset: dict) -> list[dict]:
    """The joints to compare: NeMo's unfused, NeMo's fused per fused_batch_size, sample-wise per budget."""
    runs = []
    if "nemo" in args.joints:
        runs.append(dict(name="NeMo RNNTJoint", fused_batch_size=None, samplewise=False, memory_budget=None))
    for size in (args.fused_batch_sizes or preset["fused_batch_sizes"]) if "fused" in args.joints else []:
        runs.append(
            dict(name=f"NeMo fused_batch_size={size}", fused_batch_size=size, samplewise=False, memory_budget=None)
        )
    for budget in args.memory_budgets if "samplewise" in args.joints else []:
        name = f"SampleWiseRNNTJoint {budget or 'default budget'}"
        runs.append(dict(name=name, fused_batch_size=None, samplewise=True, memory_budget=budget))
    common = dict(
        architecture=preset["architecture"],
        sizes=preset["sizes"],
        vocab=preset["vocab"],
        batch=args.batch or preset["batch"],
        seconds=args.seconds or preset["seconds"],
        device=args.device or preset["device"],
        dtype=args.dtype or preset["dtype"],
        tokens_per_second=args.tokens_per_second,
        dropout=args.dropout,
        repeats=args.repeats,
    )
    return [{**common, **run} for run in runs]


def print_table(runs: list[dict], results: dict[str, list[dict]]) -> None:
    ok = print_rounds_table(runs, results, "configuration", 1)
    fused = [name for name in ok if "fused_batch_size" in name]
    samplewise = [name for name in ok if name.startswith("SampleWise")]
    if not fused or not samplewise:
        return

    def worst(name: str, key: str) -> float:
        return max(r[key] for r in ok[name])

    best = min(fused, key=lambda name: (worst(name, "peak_bytes"), worst(name, "time_s")))
    print(f"\nNeMo's best fused setting (lowest peak memory): {best}")
    for name in samplewise:
        memory = 1 - worst(name, "peak_bytes") / worst(best, "peak_bytes")
        wall = worst(name, "time_s") / min(r["time_s"] for r in ok[best]) - 1
        cpu = worst(name, "cpu_s") / min(r["cpu_s"] for r in ok[best]) - 1
        print(
            f"{name}: peak memory {memory:.0%} below it (target >= 30 %), step time {wall:+.0%} wall, "
            f"{cpu:+.0%} CPU (target <= +10 %), worst round against its best"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="conformer-small-shrunk")
    parser.add_argument("--batch", type=int, help="utterances per batch (default: the preset's)")
    parser.add_argument("--seconds", type=float, help="seconds per utterance (default: the preset's)")
    parser.add_argument("--tokens-per-second", type=float, default=4.0, help="target tokens per second of audio")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: the preset's")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], help="autocast dtype (default: the preset's)")
    parser.add_argument("--dropout", type=float, default=0.1, help="every dropout of the model (the examples' 0.1)")
    parser.add_argument(
        "--joints",
        type=lambda text: text.split(","),
        default=list(JOINTS),
        help=f"which of {','.join(JOINTS)} to run (NeMo's unfused and fused joint, SampleWiseRNNTJoint)",
    )
    parser.add_argument(
        "--fused-batch-sizes",
        type=lambda text: [int(v) for v in text.split(",")],
        help="NeMo fused_batch_size settings, comma-separated (default: the preset's)",
    )
    parser.add_argument(
        "--memory-budgets",
        type=lambda text: [v if v != "default" else None for v in text.split(",")],
        default=[None, "1GiB"],
        help="SampleWiseRNNTJoint budgets, comma-separated ('default': the loss's)",
    )
    add_round_options(parser)
    args = parser.parse_args()
    if measure_requested(args, measure):
        return

    preset = PRESETS[args.preset]
    if not set(args.joints) <= set(JOINTS) or not args.joints:
        parser.error(f"--joints: choose from {','.join(JOINTS)}, got {','.join(args.joints)}")
    runs = configurations(args, preset)
    first = runs[0]
    print(
        f"{args.preset}: {first['architecture']} {first['sizes']}, V={first['vocab'] + 1}, batch {first['batch']} x "
        f"{first['seconds']:g} s, {args.tokens_per_second:g} tokens/s, {first['device']} {first['dtype']}, "
        f"dropout {args.dropout:g}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"{args.rounds} rounds (values: round 1 / round 2 ...)\n"
    )
    results = run_rounds(__file__, runs, args, dict(preset=args.preset))
    print_table(runs, results)


if __name__ == "__main__":
    exit_on_user_error()(main)()
