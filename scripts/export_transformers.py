"""Writes a model file (a training checkpoint, a directory of them, a transformers Parakeet directory) as a
transformers Parakeet directory that ``ParakeetForRNNT`` / ``ParakeetForTDT.from_pretrained`` and
``AutoProcessor.from_pretrained`` load (`asr_plugin.formats.transformers_recipe.export_transformers`,
docs/transformers.md); transformers is not needed to write it.

    python scripts/export_transformers.py logs/train/runs/<run>/checkpoints/last.ckpt finetuned-dir --like parakeet-dir
    python scripts/export_transformers.py run/checkpoints averaged-dir --like parakeet-dir --avg 5

--like: the Parakeet directory the run fine-tuned (+finetune=from_transformers finetune.path=...): its
processor's files (tokenizer.json, preprocessor_config.json, generation_config.json, ...) and token ids go with
the model, after the checkpoint's tokenizer and features were found to be its own.
"""

from __future__ import annotations

import argparse

from asr_plugin.formats.transformers_recipe import export_transformers
from asr_plugin.user_errors import exit_on_user_error


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a training checkpoint (.ckpt), a directory of them, or a Parakeet directory")
    parser.add_argument("output", help="the directory to write (a new path)")
    parser.add_argument("--like", help="the Parakeet directory whose processor's files go with the model")
    parser.add_argument("--avg", type=int, default=1, help="export the average of the last N checkpoints")
    args = parser.parse_args(argv)
    print(export_transformers(args.source, args.output, args.like, args.avg))


if __name__ == "__main__":
    exit_on_user_error()(main)()
