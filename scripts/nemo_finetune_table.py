"""The fine-tuning table of docs/finetune.md: a NeMo model trained by NeMo on the mini corpus, decoded by NeMo and
by our import, fine-tuned by the recipe (``+finetune=from_nemo``, both loss modes) and by NeMo itself for the
same steps; greedy WER and RNN-T loss per utterance on the dev set (needs NeMo).

    python scripts/nemo_finetune_table.py --cache /tmp/nemo_reference --out /tmp/nemo_table --steps 30
    python scripts/nemo_finetune_table.py --cache /tmp/nemo_reference --out /tmp/nemo_preset --steps 60 --preset

The reference (`asr_plugin.benchmarks.nemo_reference`) is trained once into --cache (a few minutes on a CPU) and
reused; every recipe run goes to its own directory under --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hydra import compose, initialize_config_dir

from asr_plugin.benchmarks.nemo_reference import (
    EVAL_SPLITS,
    FineTuneSettings,
    cached_reference,
    imported_transcripts,
    nemo_finetune,
    recipe_overrides,
    word_error_rate,
)
from asr_plugin.training import train

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def recipe_row(reference, form: str, mode: str, directory: Path, settings: FineTuneSettings) -> dict:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=recipe_overrides(reference, form, mode, directory, settings))
    result = train(cfg)
    return {
        "start": result["start_metrics"],
        "end": {k: v for k, v in result["metrics"].items() if k.startswith("val/")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True, help="directory of the NeMo-trained reference (reused)")
    parser.add_argument("--out", required=True, help="directory for the recipe runs")
    parser.add_argument("--steps", type=int, default=FineTuneSettings.steps)
    parser.add_argument(
        "--preset",
        action="store_true",
        help="each side's defaults: the recipe's +finetune=from_nemo as is, NeMo's fine-tuning config",
    )
    args = parser.parse_args()
    settings = FineTuneSettings(steps=args.steps, preset=args.preset)
    reference = cached_reference(args.cache)
    imported = {}
    for split in EVAL_SPLITS:
        ours = imported_transcripts(reference.models["rnnt"], reference.manifests[split])
        same = sum(a == b for a, b in zip(ours, reference.transcripts["rnnt"][split]))
        imported[split] = (
            f"{100 * word_error_rate(ours, reference.references(split)):.2f} % ({same}/{len(ours)} identical)"
        )
    results = {}
    for form, modes in (("rnnt", ("batched", "samplewise")), ("hybrid", ("samplewise",))):
        for mode in modes:
            results[form, mode] = recipe_row(reference, form, mode, Path(args.out) / f"{form}_{mode}", settings)
        results[form, "nemo"] = nemo_finetune(reference, form, settings)

    def cell(wer: float, loss: float) -> str:
        return f"{100 * wer:.2f} % | {loss:.2f}"

    print(f"\nreference: {reference.settings}\nfine-tuning: {settings}\n")
    tests = EVAL_SPLITS[1:]
    blank = " |" * len(tests)
    print("| model | dev WER | dev loss (nats/utt) |" + "".join(f" {split} WER |" for split in tests))
    print("| --- | --- | --- |" + " --- |" * len(tests))
    print(
        f"| NeMo's own `transcribe` | {cell(reference.wer['rnnt']['dev'], reference.loss['dev'])} |"
        + "".join(f" {100 * reference.wer['rnnt'][split]:.2f} % |" for split in tests)
    )
    print(
        f"| `import_nemo` + its front end, tokenizer and our `greedy_search` | {imported['dev']} | |"
        + "".join(f" {imported[split]} |" for split in tests)
    )
    for form in ("rnnt", "hybrid"):
        modes = ("batched", "samplewise") if form == "rnnt" else ("samplewise",)
        start = results[form, modes[0]]["start"]
        print(
            f"| {form}: recipe `+finetune=from_nemo`, before the first step | "
            f"{cell(start['val/wer'], start['val/loss'])} |{blank}"
        )
        for mode in modes:
            end = results[form, mode]["end"]
            print(
                f"| {form}: recipe, after {args.steps} steps, {mode} | {cell(end['val/wer'], end['val/loss'])} |{blank}"
            )
        nemo = results[form, "nemo"]
        print(
            f"| {form}: NeMo's own fine-tuning, after {args.steps} steps | {cell(nemo['wer'], nemo['loss'])} |{blank}"
        )


if __name__ == "__main__":
    main()
