"""Peak memory and time of one training step of transformers' ParakeetForRNNT / ParakeetForTDT: transformers' own
loss (the (B, T, U+1, V) joint output) against the sample-wise loss (``asr_plugin.integrations.transformers.
use_samplewise``), side by side in one run. Needs transformers (the transformers extra).

One step is the model's forward with labels and its backward (encoder, predictor, joint, loss; no optimizer) on
random features of --seconds per utterance (100 frames a second, as ParakeetFeatureExtractor's 10 ms hop gives)
with --tokens-per-second random labels, the model built by transformers from its config classes with random
weights. The default preset, "small", is a small Parakeet (FastConformer 256 wide, 4 layers, 8x subsampling with
256 channels, 80 mel bins) with Parakeet's joint (a 1-layer LSTM predictor and joint of 640) and V=1024;
"parakeet-tdt-0.6b-shrunk" has Parakeet-TDT-0.6B's sizes (1024 wide, 128 mel bins, a 2-layer predictor) with 2 of
its 24 encoder layers. In both the joint and the loss, what the two losses differ in, have their full size. Every
configuration runs in a fresh interpreter, --rounds times, interleaved: transformers' loss, the sample-wise loss
and, for the breakdown, the encoder's subsampling alone and the encoder and predictor alone (the sum of their
outputs as the loss: what either loss's joint and loss add to), each without and with the encoder's gradient
checkpointing (--checkpointing; the subsampling, which checkpointing does not reach, once). The sample-wise runs
also report their plan's largest joint call as a share of the batch's (B, T, U+1) lattice.

CPU: memory is the peak RSS above the RSS after the model and inputs were built and one warm-up step on a 2 s
batch ran, with glibc told to map every block over 64 KiB on its own (MALLOC_MMAP_THRESHOLD_) so freed tensors
leave the RSS; time is the wall and the process CPU time of the step. CUDA: peak allocated memory of the step
(model and inputs included) and its time.

    OMP_NUM_THREADS=1 python scripts/benchmark_transformers.py            # B=16 x 15 s, V=1024, TDT, CPU
    python scripts/benchmark_transformers.py --kind rnnt --device cuda
    python scripts/benchmark_transformers.py --preset tiny --rounds 1     # seconds: does it run
    python scripts/benchmark_transformers.py --preset parakeet-tdt-0.6b-shrunk --losses subsampling,encoder
"""

from __future__ import annotations

import argparse
import os

from benchmarks.loss import plan_figures
from benchmarks.training_step import add_round_options, measure_requested, print_rounds_table, run_rounds, time_steps

PRESETS = {
    # the headline: a small Parakeet (a few 256-wide layers, NeMo's small FastConformer sizes) with the joint and the
    # vocabulary at Parakeet's full size, where the joint's (B, T, U+1, V) output is most of transformers' step
    "small": dict(
        encoder=dict(
            hidden_size=256,
            num_hidden_layers=4,
            num_attention_heads=4,
            intermediate_size=1024,
            subsampling_factor=8,
            subsampling_conv_channels=256,
            num_mel_bins=80,
        ),
        decoder_hidden_size=640,
        num_decoder_layers=1,
        batch=16,
        seconds=15.0,
        vocab=1024,
    ),
    "parakeet-tdt-0.6b-shrunk": dict(
        encoder=dict(
            hidden_size=1024,
            num_hidden_layers=2,
            num_attention_heads=8,
            intermediate_size=4096,
            subsampling_factor=8,
            subsampling_conv_channels=256,
            num_mel_bins=128,
        ),
        decoder_hidden_size=640,
        num_decoder_layers=2,
        batch=16,
        seconds=15.0,
        vocab=1024,
    ),
    "tiny": dict(
        encoder=dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            subsampling_factor=4,
            subsampling_conv_channels=8,
            num_mel_bins=16,
        ),
        decoder_hidden_size=32,
        num_decoder_layers=1,
        batch=4,
        seconds=2.0,
        vocab=32,
    ),
}
FRAMES_PER_SECOND = 100
WARM_UP_SECONDS = 2.0
# "encoder": the encoder and the predictor alone (the sum of their outputs as the loss): what either loss adds to;
# "subsampling": the encoder's convolutional subsampling alone (its output's sum as the loss), the encoder's first part
LOSSES = ("subsampling", "encoder", "transformers", "samplewise")
CHECKPOINTING = {"off": [False], "on": [True], "both": [False, True]}


def build(run: dict):
    """transformers' model for `run` (random weights, seed 0, training mode, dropout as asked), its loss as the
    configuration asks, on the device."""
    import torch
    from transformers import ParakeetForRNNT, ParakeetForTDT, ParakeetRNNTConfig, ParakeetTDTConfig

    from asr_plugin.integrations.transformers import use_samplewise

    preset = PRESETS[run["preset"]]
    dropouts = dict(dropout=run["dropout"], activation_dropout=run["dropout"], attention_dropout=run["dropout"])
    config_class, model_class = (
        (ParakeetTDTConfig, ParakeetForTDT) if run["kind"] == "tdt" else (ParakeetRNNTConfig, ParakeetForRNNT)
    )
    config = config_class(
        vocab_size=run["vocab"],
        blank_token_id=run["vocab"] - 1,
        pad_token_id=0,
        decoder_hidden_size=preset["decoder_hidden_size"],
        num_decoder_layers=preset["num_decoder_layers"],
        encoder_config={**preset["encoder"], **dropouts, "layerdrop": 0.0},
    )
    torch.manual_seed(0)
    model = model_class(config).to(run["device"]).train()
    if run["checkpointing"]:  # the encoder's layers, as the Trainer's activation_checkpointing does
        model.gradient_checkpointing_enable()
    if run["loss"] == "samplewise":
        use_samplewise(model, memory_budget=run["memory_budget"])
    return model


def make_batch(run: dict, seconds: float, model) -> dict:
    """Every utterance `seconds` long with round(seconds x tokens-per-second) labels (ids 1 .. V - 2)."""
    import torch

    generator = torch.Generator().manual_seed(1)
    frames, tokens = int(seconds * FRAMES_PER_SECOND), max(1, round(seconds * run["tokens_per_second"]))
    config = model.config
    mel = config.encoder_config.num_mel_bins
    labels = torch.randint(1, config.vocab_size - 1, (run["batch"], tokens), generator=generator)
    blank = torch.full((run["batch"], 1), config.blank_token_id)
    batch = dict(
        input_features=torch.randn(run["batch"], frames, mel, generator=generator),
        attention_mask=torch.ones(run["batch"], frames, dtype=torch.long),
        labels=labels,
        decoder_input_ids=torch.cat([blank, labels], dim=1),
    )
    return {key: value.to(run["device"]) for key, value in batch.items()}


def step(model, batch: dict, loss: str) -> None:
    if loss == "subsampling":
        model.encoder.subsampling(batch["input_features"], batch["attention_mask"]).sum().backward()
    elif loss == "encoder":
        encoded = model.get_audio_features(
            input_features=batch["input_features"], attention_mask=batch["attention_mask"]
        )
        (encoded.pooler_output.sum() + model.decoder(batch["decoder_input_ids"]).sum()).backward()
    else:
        model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)


def measure(run: dict) -> dict:
    """One configuration in this interpreter: peak memory (bytes), step times (s) and the sample-wise plan."""
    model = build(run)
    batch = make_batch(run, run["seconds"], model)
    step(model, make_batch(run, WARM_UP_SECONDS, model), run["loss"])  # warm-up (and extension load)
    result = time_steps(lambda: step(model, batch, run["loss"]), run["repeats"], run["device"] == "cuda")
    plan = model.samplewise_loss.last_plan if run["loss"] == "samplewise" else None
    if plan is None:
        return dict(result)
    # the largest joint call against the whole (B, T, U+1) lattice: no joint-sized buffer may exist
    whole = sum(group.lattice_cells() for group in plan.groups)
    largest = max(group.cells() for group in plan.groups)
    return dict(result, **plan_figures(plan), largest_step_fraction=largest / whole)


def print_table(runs: list[dict], results: dict[str, list[dict]]) -> None:
    """The rounds table, then each sample-wise run against transformers' loss with the same checkpointing, and
    what the joint and loss add to the encoder and predictor alone."""
    ok = print_rounds_table(runs, results, "loss", 2)
    for run in runs:
        same = [r for r in runs if r["checkpointing"] == run["checkpointing"]]
        own = next((r["name"] for r in same if r["loss"] == "transformers"), None)
        encoder = next((r["name"] for r in same if r["loss"] == "encoder"), None)
        if run["loss"] != "samplewise" or not {run["name"], own, encoder} <= ok.keys():
            continue
        rounds = ok[run["name"]]
        memory = max(r["peak_bytes"] for r in rounds) / min(r["peak_bytes"] for r in ok[own])
        wall = max(r["time_s"] for r in rounds) / min(r["time_s"] for r in ok[own])
        cpu = max(r["cpu_s"] for r in rounds) / min(r["cpu_s"] for r in ok[own])
        base = min(r["peak_bytes"] for r in ok[encoder])
        added = {name: min(r["peak_bytes"] for r in ok[name]) - base for name in (own, run["name"])}
        subsampling = [min(r["peak_bytes"] for r in ok[r_["name"]]) for r_ in runs if r_["loss"] == "subsampling"]
        subsampled = f"; the subsampling alone: {subsampling[0] / 2**20:,.0f} MiB" if subsampling else ""
        print(
            f"\n{run['name']} / transformers' loss (worst round against its best): peak memory {memory:.2f}x "
            f"(target <= 0.25x), step time {wall:.2f}x wall, {cpu:.2f}x CPU (target <= 1.3x); "
            f"plan: {rounds[-1]['groups']} groups, {rounds[-1]['runner']} joint, its largest call on "
            f"{rounds[-1]['largest_step_fraction']:.1%} of the batch's lattice cells, the loss's estimated peak "
            f"{rounds[-1]['estimated_peak_bytes'] / 2**20:,.0f} MiB. The encoder and "
            f"predictor alone: {base / 2**20:,.0f} MiB{subsampled}; the joint and loss add "
            f"{added[own] / 2**20:,.0f} MiB (transformers') and {added[run['name']] / 2**20:,.0f} MiB (sample-wise)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--kind", choices=["tdt", "rnnt"], default="tdt", help="ParakeetForTDT or ParakeetForRNNT")
    parser.add_argument("--batch", type=int, help="utterances per batch (default: the preset's)")
    parser.add_argument("--seconds", type=float, help="seconds per utterance (default: the preset's)")
    parser.add_argument("--vocab", type=int, help="config.vocab_size, blank included (default: the preset's)")
    parser.add_argument("--tokens-per-second", type=float, default=4.0, help="labels per second of audio")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dropout", type=float, default=0.1, help="the encoder's dropouts (Parakeet's 0.1)")
    parser.add_argument(
        "--memory-budgets",
        type=lambda text: [v if v != "default" else None for v in text.split(",")],
        default=[None],
        help="sample-wise loss budgets, comma-separated ('default': the loss's, 256 MiB on CPU, 1 GiB on CUDA)",
    )
    parser.add_argument(
        "--checkpointing",
        choices=sorted(CHECKPOINTING),
        default="both",
        help="the encoder's gradient checkpointing (model.gradient_checkpointing_enable(): off, on or both)",
    )
    parser.add_argument(
        "--losses",
        type=lambda text: text.split(","),
        default=list(LOSSES),
        help=f"the configurations to run, comma-separated, of {','.join(LOSSES)} (default: all)",
    )
    add_round_options(parser)
    args = parser.parse_args()
    if not set(args.losses) <= set(LOSSES):
        parser.error(f"--losses: {','.join(sorted(set(args.losses) - set(LOSSES)))} not among {','.join(LOSSES)}")
    if measure_requested(args, measure):
        return

    preset = PRESETS[args.preset]
    common = dict(
        preset=args.preset,
        kind=args.kind,
        batch=args.batch or preset["batch"],
        seconds=args.seconds or preset["seconds"],
        vocab=args.vocab or preset["vocab"],
        tokens_per_second=args.tokens_per_second,
        device=args.device,
        dropout=args.dropout,
        repeats=args.repeats,
    )
    # checkpointing covers the encoder's layers only, not its subsampling: measured once
    runs = [dict(common, checkpointing=False, memory_budget=None, name="subsampling alone", loss="subsampling")]
    for checkpointing in CHECKPOINTING[args.checkpointing]:
        run = dict(common, checkpointing=checkpointing, memory_budget=None)
        suffix = ", checkpointed" if checkpointing else ""
        runs.append(dict(run, name=f"encoder and predictor alone{suffix}", loss="encoder"))
        runs.append(dict(run, name=f"transformers' own {args.kind} loss{suffix}", loss="transformers"))
        for budget in args.memory_budgets:
            name = f"sample-wise, {budget or 'default budget'}{suffix}"
            runs.append(dict(run, name=name, loss="samplewise", memory_budget=budget))
    runs = [run for run in runs if run["loss"] in args.losses]
    print(
        f"{args.preset} ({args.kind}): encoder {preset['encoder']}, predictor/joint {preset['decoder_hidden_size']}, "
        f"V={common['vocab']}, batch {common['batch']} x {common['seconds']:g} s, {args.tokens_per_second:g} "
        f"labels/s, {args.device}, dropout {args.dropout:g}, OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, {args.rounds} rounds (values: round 1 / round 2 ...)\n"
    )
    results = run_rounds(__file__, runs, args, {})
    print_table(runs, results)


if __name__ == "__main__":
    main()
