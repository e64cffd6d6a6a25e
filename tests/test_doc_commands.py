"""Every command line README.md and docs/*.md show for train.py, eval.py, run.sh and scripts/*.py composes
(Hydra) or parses (the script's own argparse parser) as documented: a doc that drifts from the configs or a
script's options fails here, naming the doc file, line and command. Nothing is trained or run."""

from __future__ import annotations

import pytest
from doc_commands import REPO_ROOT, OptionalPluginMissing, check_command, collect_commands

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
COMMANDS = [command for doc in DOCS for command in collect_commands(doc)]


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.doc.name}:{c.line}:{c.program}" for c in COMMANDS])
def test_a_documented_command_composes_or_parses(command):
    try:
        problem = check_command(command)
    except OptionalPluginMissing as missing:
        pytest.skip(f"{command.where}: {missing}")
    assert problem is None, problem


def test_every_kind_of_command_is_collected():
    """The collector still finds commands of each kind (a change of the docs' format would lose them silently)."""
    programs = {command.program for command in COMMANDS}
    assert {"train.py", "eval.py", "run.sh"} <= programs and any(p.startswith("scripts/") for p in programs), programs


BROKEN_DOC = """# A doc with broken examples

```bash
cd recipes/librispeech
python train.py +loss=samplewise          # fine
python train.py spec_augment.time_stretch=5  # a new key without +
python eval.py checkpoint=/x/epoch=011-wer0.1234.ckpt
bash run.sh --data-dir /data --stage 4 --avg 10
python ../../scripts/export_nemo.py --bogus a.ckpt b.nemo
python scripts/no_such_script.py --out x
```

Resume with `python train.py trainer.max_stepz=3` or look at `train.py` (a mention, not a command).
"""


def test_a_broken_doc_fails_naming_the_file_line_and_command(tmp_path):
    doc = tmp_path / "broken.md"
    doc.write_text(BROKEN_DOC)
    commands = collect_commands(doc)
    problems = {command.line: check_command(command) for command in commands}
    assert sorted(problems) == [5, 6, 7, 8, 9, 10, 13], [c.where for c in commands]
    assert problems[5] is None
    expected = {
        6: ("python train.py spec_augment.time_stretch=5", "use +spec_augment.time_stretch=5"),
        7: ("python eval.py checkpoint=/x/epoch=011-wer0.1234.ckpt", "OverrideParseException"),
        8: ("bash run.sh --data-dir /data --stage 4 --avg 10", "stage 3 keeps 5 checkpoints"),
        9: ("export_nemo.py --bogus a.ckpt b.nemo", "unrecognized arguments: --bogus"),
        10: ("python scripts/no_such_script.py --out x", "there is no scripts/no_such_script.py"),
        13: ("python train.py trainer.max_stepz=3", "trainer.max_stepz"),
    }
    for line, (command, reason) in expected.items():
        assert problems[line].startswith(f"{doc}:{line}: ") and command in problems[line], problems[line]
        assert reason in problems[line], problems[line]
