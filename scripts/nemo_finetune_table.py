"""The fine-tuning tables of docs/finetune.md: a NeMo model trained by NeMo on the mini corpus, decoded by NeMo and
by our import, fine-tuned by the recipe (``+finetune=from_nemo``, both loss modes) and by NeMo itself for the
same steps on data NeMo's training never saw (``--data``: the training utterances it left out, validated on the
reference's dev; or ``piper``, another engine's speech, validated on its own dev); greedy WER and RNN-T loss
per utterance on the validation set, the WER on the reference's own dev set after fine-tuning, and whether
eval.py's transcripts of each fine-tuned checkpoint equal NeMo's ``transcribe`` of its ``export_nemo`` (needs
NeMo).

    python scripts/nemo_finetune_table.py --cache /tmp/nemo_reference --out /tmp/ft_piper --steps 60 --preset --data piper --seed 0 --jobs 2
    python scripts/nemo_finetune_table.py --cache /tmp/nemo_reference --out /tmp/nemo_table --steps 30 --reference tests

The reference (`benchmarks.nemo_reference`; ``--reference trained``: `TRAINED_REFERENCE`, ~18 minutes of one
core of a 2-core CPU, ``tests``: the tests' few-minute one) is trained once into --cache and reused, as is the
Piper corpus; every recipe run goes to its own directory under --out, and the table to <out>/table.md.
``--jobs N`` runs N of the five fine-tuning runs at once, each in its own process (``--row``; its log in
<out>/<form>_<mode>.log): the runs are independent and seeded (``--seed``), so the table is the same as with
one job.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from asr_plugin.files import write_text_atomic
from asr_plugin.training import train
from asr_plugin.user_errors import exit_on_user_error
from benchmarks.nemo_reference import (
    CONF_DIR,
    EVAL_SPLITS,
    FINE_TUNING_DATA,
    TRAINED_REFERENCE,
    FineTuneSettings,
    ReferenceSettings,
    cached_reference,
    eval_transcripts,
    fine_tuning_manifests,
    imported_transcripts,
    manifest_texts,
    nemo_finetune,
    nemo_mean_loss,
    nemo_transcripts,
    read_nemo_manifest,
    recipe_overrides,
    word_error_rate,
)

REFERENCES = {"trained": TRAINED_REFERENCE, "tests": ReferenceSettings()}
# (form, mode): the recipe's fine-tuning in a loss mode, or "nemo": NeMo's own
ROWS = (("rnnt", "batched"), ("rnnt", "samplewise"), ("rnnt", "nemo"), ("hybrid", "samplewise"), ("hybrid", "nemo"))


def recipe_row(reference, form: str, mode: str, directory: Path, settings: FineTuneSettings) -> dict:
    """One recipe fine-tune: its first and last validation, eval.py's transcripts of the validation set by its
    last checkpoint against NeMo's ``transcribe`` of that checkpoint exported back to NeMo, and the export's
    WER on the reference's own dev set."""
    from nemo.collections.asr.models import ASRModel

    from asr_plugin.formats import export_nemo

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=recipe_overrides(reference, form, mode, directory, settings))
    result = train(cfg)
    checkpoint = result["last_model_path"]
    _, dev = fine_tuning_manifests(reference, settings)
    ours = eval_transcripts(checkpoint, dev, directory / "eval")
    exported = ASRModel.restore_from(str(export_nemo(checkpoint, directory / "finetuned.nemo")), map_location="cpu")
    theirs = nemo_transcripts(exported, dev)
    reference_dev = nemo_transcripts(exported, reference.manifests["dev"])
    return {
        "start": result["start_metrics"],
        "end": {k: v for k, v in result["metrics"].items() if k.startswith("val/")},
        "eval_identical": sum(a == b for a, b in zip(ours, theirs, strict=True)),
        "eval_wer": word_error_rate(ours, manifest_texts(dev)),
        "reference_dev_wer": word_error_rate(reference_dev, reference.references("dev")),
    }


def compute_row(reference, form: str, mode: str, out: Path, settings: FineTuneSettings) -> dict:
    """One row's figures (JSON-serialisable): NeMo's fine-tuning (mode "nemo") or the recipe's."""
    if mode == "nemo":
        nemo = nemo_finetune(reference, form, settings)
        return {key: nemo[key] for key in ("wer", "loss", "reference_dev_wer")}
    return recipe_row(reference, form, mode, out / f"{form}_{mode}", settings)


def run_rows_in_processes(argv: list[str], out: Path, jobs: int) -> dict:
    """Every row of `ROWS` by ``this script <argv> --row FORM:MODE``, `jobs` at a time; their figures."""
    pending, running, results = list(ROWS), {}, {}
    out.mkdir(parents=True, exist_ok=True)
    while pending or running:
        while pending and len(running) < jobs:
            form, mode = pending.pop(0)
            log = out / f"{form}_{mode}.log"
            command = [sys.executable, __file__, *argv, "--row", f"{form}:{mode}"]
            with log.open("w", encoding="utf-8") as handle:
                running[form, mode] = (subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT), log)
        for row, (process, log) in list(running.items()):
            if process.poll() is None:
                continue
            del running[row]
            if process.returncode != 0:
                for other, _ in running.values():
                    other.terminate()
                raise RuntimeError(f"the {row[0]} {row[1]} run failed (exit {process.returncode}): see {log}")
            results[row] = json.loads(row_json(out, *row).read_text(encoding="utf-8"))
        time.sleep(2)
    return results


def table(reference, valid_manifest: Path, results: dict, steps: int) -> list[str]:
    """The markdown table: the reference decoded by NeMo and by our import, then each fine-tuning run; WER and
    loss on the validation set, WER on the reference's own dev set and espeak-ng's test split."""
    from nemo.collections.asr.models import ASRModel

    texts = manifest_texts(valid_manifest)
    nemo_model = ASRModel.restore_from(str(reference.models["rnnt"]), map_location="cpu")
    nemo_valid = nemo_transcripts(nemo_model, valid_manifest)
    imported = {}
    for name, manifest in {
        "valid": valid_manifest,
        **{split: reference.manifests[split] for split in EVAL_SPLITS},
    }.items():
        ours = imported_transcripts(reference.models["rnnt"], manifest)
        theirs = nemo_valid if name == "valid" else reference.transcripts["rnnt"][name]
        same = sum(a == b for a, b in zip(ours, theirs, strict=True))
        imported[name] = f"{100 * word_error_rate(ours, manifest_texts(manifest)):.2f} % ({same}/{len(ours)} identical)"

    def percent(wer: float) -> str:
        return f"{100 * wer:.2f} %"

    test = EVAL_SPLITS[1]
    lines = [
        f"| model | validation WER | validation loss (nats/utt) | eval.py = NeMo `transcribe` | dev WER | {test} WER |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| NeMo's own `transcribe` | {percent(word_error_rate(nemo_valid, texts))} | "
        f"{nemo_mean_loss(nemo_model, valid_manifest):.2f} | | {percent(reference.wer['rnnt']['dev'])} | "
        f"{percent(reference.wer['rnnt'][test])} |",
        f"| `import_nemo` + its front end, tokenizer and our `greedy_search` | {imported['valid']} | | | "
        f"{imported['dev']} | {imported[test]} |",
    ]
    for form in ("rnnt", "hybrid"):
        modes = ("batched", "samplewise") if form == "rnnt" else ("samplewise",)
        start = results[form, modes[0]]["start"]
        lines.append(
            f"| {form}: recipe `+finetune=from_nemo`, before the first step | {percent(start['val/wer'])} | "
            f"{start['val/loss']:.2f} | | | |"
        )
        for mode in modes:
            row = results[form, mode]
            lines.append(
                f"| {form}: recipe, after {steps} steps, {mode} | {percent(row['end']['val/wer'])} | "
                f"{row['end']['val/loss']:.2f} | {row['eval_identical']}/{len(texts)} identical (eval.py WER "
                f"{percent(row['eval_wer'])}) | {percent(row['reference_dev_wer'])} | |"
            )
        nemo = results[form, "nemo"]
        lines.append(
            f"| {form}: NeMo's own fine-tuning, after {steps} steps | {percent(nemo['wer'])} | {nemo['loss']:.2f} | | "
            f"{percent(nemo['reference_dev_wer'])} | |"
        )
    return lines


def row_json(out: Path, form: str, mode: str) -> Path:
    return out / f"{form}_{mode}.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True, help="directory of the NeMo-trained reference (reused)")
    parser.add_argument("--out", required=True, help="directory for the recipe runs and table.md")
    parser.add_argument("--reference", choices=sorted(REFERENCES), default="trained", help="which reference")
    parser.add_argument("--steps", type=int, default=FineTuneSettings.steps)
    parser.add_argument(
        "--data",
        choices=FINE_TUNING_DATA,
        default=FineTuneSettings.data,
        help="fine-tune on the training utterances the reference never heard (validation on its dev), on the "
        "whole training split, or on another engine's speech (its own train and dev)",
    )
    parser.add_argument(
        "--preset",
        action="store_true",
        help="each side's defaults: the recipe's +finetune=from_nemo as is, NeMo's fine-tuning config",
    )
    parser.add_argument(
        "--seed", type=int, default=FineTuneSettings.seed, help="every run's seed (NeMo's and the recipe's)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="fine-tuning runs at once, each in its own process")
    parser.add_argument("--row", help="FORM:MODE: only this run, its figures to <out>/<form>_<mode>.json (--jobs)")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    settings = FineTuneSettings(steps=args.steps, preset=args.preset, data=args.data, seed=args.seed)
    reference = cached_reference(args.cache, REFERENCES[args.reference])
    out = Path(args.out)
    if args.row:
        if tuple(args.row.split(":")) not in ROWS:
            parser.error(f"--row {args.row}: not one of {[':'.join(row) for row in ROWS]}")
        form, mode = args.row.split(":")
        write_text_atomic(row_json(out, form, mode), json.dumps(compute_row(reference, form, mode, out, settings)))
        return
    train_manifest, valid_manifest = fine_tuning_manifests(reference, settings)
    if args.jobs == 1:
        results = {(form, mode): compute_row(reference, form, mode, out, settings) for form, mode in ROWS}
    else:
        passed = ["--cache", args.cache, "--out", args.out, "--reference", args.reference, "--steps", str(args.steps)]
        passed += ["--data", args.data, "--seed", str(args.seed), *(["--preset"] if args.preset else [])]
        results = run_rows_in_processes(passed, out, args.jobs)
    lines = [
        f"reference: {reference.directory}: {reference.settings}",
        f"fine-tuning: {dataclasses.asdict(settings)} on {train_manifest} "
        f"({len(read_nemo_manifest(train_manifest))} utterances), validation on {valid_manifest}",
        "",
        *table(reference, valid_manifest, results, args.steps),
    ]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    write_text_atomic(out / "table.md", text)


if __name__ == "__main__":
    exit_on_user_error()(main)()
