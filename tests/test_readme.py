"""README.md stays what a newcomer reads in two minutes: short, with narrow prose lines, the two set-up commands in
its first shell block, and a Layout that names every script in scripts/ and every top-level part of the package
(a script or a folder added without its line fails here). Measurements belong in docs/*.md, with their commands."""

from __future__ import annotations

import re

from doc_commands import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_LINES = 150
MAX_PROSE_WIDTH = 120  # pyproject's line length; code blocks and table rows may be wider
SET_UP_COMMANDS = (
    "pip install -e '.[dev]' && python recipes/librispeech/train.py experiment=first_run",
    "python recipes/librispeech/train.py   # the full CPU demo",
    "bash scripts/test.sh",
)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line of Markdown `text` outside fenced code blocks and tables."""
    found, in_code = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and not line.lstrip().startswith("|"):
            found.append((number, line))
    return found


def too_wide(text: str) -> list[str]:
    return [f"README.md:{n}: {len(line)} characters" for n, line in prose_lines(text) if len(line) > MAX_PROSE_WIDTH]


def first_shell_block(text: str) -> str:
    match = re.search(r"^```(?:bash|sh|shell)?\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def test_the_readme_is_short_and_its_prose_narrow():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES, f"README.md has {len(text.splitlines())} lines (at most {MAX_LINES})"
    assert not too_wide(text), too_wide(text)


def test_the_width_check_skips_code_and_tables_only():
    wide = "x" * (MAX_PROSE_WIDTH + 1)
    text = f"# T\n\n```bash\n{wide}\n```\n\n| a | {wide} |\n\n{wide}\n- {wide}\n"
    assert too_wide(text) == [f"README.md:9: {len(wide)} characters", f"README.md:10: {len(wide) + 2} characters"]


def test_the_two_set_up_commands_come_first():
    block = first_shell_block(README.read_text())
    for command in SET_UP_COMMANDS:
        assert command in block, f"README.md's first shell block lacks {command!r}:\n{block}"


def test_the_layout_names_every_script_and_every_part_of_the_package():
    layout = section(README.read_text(), "Layout")
    scripts = sorted(p.name for p in (REPO_ROOT / "scripts").iterdir() if p.suffix in (".py", ".sh"))
    package = sorted(
        p.name + ("/" if p.is_dir() else "")
        for p in (REPO_ROOT / "asr_plugin").iterdir()
        if not p.name.startswith(("_", ".")) and (p.is_dir() or p.suffix == ".py")
    )
    missing = [name for name in scripts + package if f"`{name}`" not in layout]
    assert not missing, f"README.md's Layout does not name {missing}"
