"""The fine-tuning table of docs/finetune.md: a NeMo model trained by NeMo on the mini corpus, decoded by NeMo and
by our import, fine-tuned by the recipe (``+finetune=from_nemo``, both loss modes) and by NeMo itself for the
same steps on training utterances NeMo's training left out; greedy WER and RNN-T loss per utterance on the dev
set, and whether eval.py's transcripts of each fine-tuned checkpoint equal NeMo's ``transcribe`` of its
``export_nemo`` (needs NeMo).

    python scripts/nemo_finetune_table.py --cache /tmp/nemo_reference --out /tmp/nemo_preset --steps 60 --preset
    python scripts/nemo_finetune_table.py --cache /tmp/nemo_reference --out /tmp/nemo_table --steps 30 --reference tests

The reference (`asr_plugin.benchmarks.nemo_reference`; ``--reference trained``: `TRAINED_REFERENCE`, ~35 minutes
of a 2-core CPU, ``tests``: the tests' few-minute one) is trained once into --cache and reused; every recipe run
goes to its own directory under --out, and the table to <out>/table.md. ``--jobs N`` runs N of the five
fine-tuning runs at once, each in its own process (``--row``; its log in <out>/<form>_<mode>.log): the runs are
independent and seeded, so the table is the same as with one job.
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

from asr_plugin.benchmarks.nemo_reference import (
    CONF_DIR,
    EVAL_SPLITS,
    TRAINED_REFERENCE,
    FineTuneSettings,
    ReferenceSettings,
    cached_reference,
    eval_transcripts,
    fine_tuning_manifest,
    imported_transcripts,
    nemo_finetune,
    nemo_transcripts,
    read_nemo_manifest,
    recipe_overrides,
    word_error_rate,
)
from asr_plugin.data.atomic import write_text_atomic
from asr_plugin.training import train

REFERENCES = {"trained": TRAINED_REFERENCE, "tests": ReferenceSettings()}
# (form, mode): the recipe's fine-tuning in a loss mode, or "nemo": NeMo's own
ROWS = (("rnnt", "batched"), ("rnnt", "samplewise"), ("rnnt", "nemo"), ("hybrid", "samplewise"), ("hybrid", "nemo"))


def recipe_row(reference, form: str, mode: str, directory: Path, settings: FineTuneSettings) -> dict:
    """One recipe fine-tune: its first and last validation, and eval.py's dev transcripts of its last checkpoint
    against NeMo's ``transcribe`` of that checkpoint exported back to NeMo."""
    from nemo.collections.asr.models import ASRModel

    from asr_plugin.finetune.nemo.export import export_nemo

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=recipe_overrides(reference, form, mode, directory, settings))
    result = train(cfg)
    checkpoint = result["last_model_path"]
    ours = eval_transcripts(checkpoint, reference.manifests["dev"], directory / "eval")
    exported = export_nemo(checkpoint, directory / "finetuned.nemo")
    theirs = nemo_transcripts(ASRModel.restore_from(str(exported), map_location="cpu"), reference.manifests["dev"])
    return {
        "start": result["start_metrics"],
        "end": {k: v for k, v in result["metrics"].items() if k.startswith("val/")},
        "eval_identical": sum(a == b for a, b in zip(ours, theirs, strict=True)),
        "eval_wer": word_error_rate(ours, reference.references("dev")),
    }


def compute_row(reference, form: str, mode: str, out: Path, settings: FineTuneSettings) -> dict:
    """One row's figures (JSON-serialisable): NeMo's fine-tuning (mode "nemo") or the recipe's."""
    if mode == "nemo":
        nemo = nemo_finetune(reference, form, settings)
        return {"wer": nemo["wer"], "loss": nemo["loss"]}
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
        choices=("finetune", "train"),
        default=FineTuneSettings.data,
        help="fine-tune on the training utterances the reference never heard, or on the whole training split",
    )
    parser.add_argument(
        "--preset",
        action="store_true",
        help="each side's defaults: the recipe's +finetune=from_nemo as is, NeMo's fine-tuning config",
    )
    parser.add_argument("--jobs", type=int, default=1, help="fine-tuning runs at once, each in its own process")
    parser.add_argument("--row", help="FORM:MODE: only this run, its figures to <out>/<form>_<mode>.json (--jobs)")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    settings = FineTuneSettings(steps=args.steps, preset=args.preset, data=args.data)
    reference = cached_reference(args.cache, REFERENCES[args.reference])
    out = Path(args.out)
    if args.row:
        if tuple(args.row.split(":")) not in ROWS:
            parser.error(f"--row {args.row}: not one of {[':'.join(row) for row in ROWS]}")
        form, mode = args.row.split(":")
        write_text_atomic(row_json(out, form, mode), json.dumps(compute_row(reference, form, mode, out, settings)))
        return
    imported = {}
    for split in EVAL_SPLITS:
        ours = imported_transcripts(reference.models["rnnt"], reference.manifests[split])
        same = sum(a == b for a, b in zip(ours, reference.transcripts["rnnt"][split]))
        imported[split] = (
            f"{100 * word_error_rate(ours, reference.references(split)):.2f} % ({same}/{len(ours)} identical)"
        )
    if args.jobs == 1:
        results = {(form, mode): compute_row(reference, form, mode, out, settings) for form, mode in ROWS}
    else:
        passed = ["--cache", args.cache, "--out", args.out, "--reference", args.reference, "--steps", str(args.steps)]
        passed += ["--data", args.data, *(["--preset"] if args.preset else [])]
        results = run_rows_in_processes(passed, out, args.jobs)

    def cell(wer: float, loss: float) -> str:
        return f"{100 * wer:.2f} % | {loss:.2f}"

    dev = len(read_nemo_manifest(reference.manifests["dev"]))
    lines = [
        f"reference: {reference.directory}: {reference.settings}",
        f"fine-tuning: {dataclasses.asdict(settings)} on {fine_tuning_manifest(reference, settings)} "
        f"({len(read_nemo_manifest(fine_tuning_manifest(reference, settings)))} utterances)",
        "",
    ]
    tests = EVAL_SPLITS[1:]
    blank = " |" * len(tests)
    lines.append(
        "| model | dev WER | dev loss (nats/utt) | eval.py = NeMo `transcribe` |"
        + "".join(f" {split} WER |" for split in tests)
    )
    lines.append("| --- | --- | --- | --- |" + " --- |" * len(tests))
    lines.append(
        f"| NeMo's own `transcribe` | {cell(reference.wer['rnnt']['dev'], reference.loss['dev'])} | |"
        + "".join(f" {100 * reference.wer['rnnt'][split]:.2f} % |" for split in tests)
    )
    lines.append(
        f"| `import_nemo` + its front end, tokenizer and our `greedy_search` | {imported['dev']} | | |"
        + "".join(f" {imported[split]} |" for split in tests)
    )
    for form in ("rnnt", "hybrid"):
        modes = ("batched", "samplewise") if form == "rnnt" else ("samplewise",)
        start = results[form, modes[0]]["start"]
        lines.append(
            f"| {form}: recipe `+finetune=from_nemo`, before the first step | "
            f"{cell(start['val/wer'], start['val/loss'])} | |{blank}"
        )
        for mode in modes:
            row = results[form, mode]
            lines.append(
                f"| {form}: recipe, after {args.steps} steps, {mode} | {cell(row['end']['val/wer'], row['end']['val/loss'])}"
                f" | {row['eval_identical']}/{dev} identical (eval.py WER {100 * row['eval_wer']:.2f} %) |{blank}"
            )
        nemo = results[form, "nemo"]
        lines.append(
            f"| {form}: NeMo's own fine-tuning, after {args.steps} steps | {cell(nemo['wer'], nemo['loss'])} | |{blank}"
        )
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    write_text_atomic(out / "table.md", text)


if __name__ == "__main__":
    main()
