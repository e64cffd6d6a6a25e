"""The command lines the docs show, collected and checked without running them.

`collect_commands(doc)` finds every ``train.py``, ``eval.py``, ``run.sh`` and ``scripts/<name>.py`` command
in a Markdown file: the lines of shell code blocks (continuation lines joined) and inline code spans that
run one (a bare file name is a mention, not a command). Synopses (``[--opt]``, ``a|b``, ``...``) are left
out; ``<placeholder>`` words are replaced by a plain word. `check_command` then

* composes a ``train.py``/``eval.py`` command's overrides with Hydra's compose API (each job of a ``-m``
  sweep; the train config is also checked as ``train(cfg)`` checks it before it runs anything);
* checks a ``run.sh`` command's options against run.sh's own option parser, its ``--experiment``, its
  ``--train-args``/``--eval-args`` composed with the configs run.sh composes them with, and that a
  ``--stage 4`` alone does not average more checkpoints than training keeps;
* parses a ``scripts/*.py`` command's arguments with the script's own argparse parser (run in this process
  up to its ``parse_args``, which stops it), composing Hydra overrides it takes (``prepare_data.py``).

Each problem is returned as text naming the doc file, line and command.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import itertools
import os
import re
import runpy
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import MissingConfigException
from omegaconf import open_dict

from asr_plugin.training.config_check import check_config

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
RUN_SH = REPO_ROOT / "recipes" / "librispeech" / "run.sh"
SHELL_FENCES = {"", "bash", "sh", "shell", "console"}
LAUNCHERS = {"python", "python3", "bash", "sh", "srun", "torchrun", "time", "exec"}
HYDRA_FLAGS = {"-m", "--multirun"}
HYDRA_FLAGS_WITH_VALUE = {"--cfg", "-c", "--package", "-p"}
SYNOPSIS = re.compile(r"\[-|\.\.\.|\S\|\S")  # [--opt], ..., a|b
PLACEHOLDER = re.compile(r"<[^<>\n]+>")
# Hydra plugins the docs use that are optional extras: (config, module that provides it, extra)
OPTIONAL_PLUGINS = [("hydra/sweeper/optuna", "hydra_plugins.hydra_optuna_sweeper", "optuna")]


@dataclass(frozen=True)
class DocCommand:
    doc: Path
    line: int
    text: str  # the command as the doc shows it
    program: str  # "train.py", "eval.py", "run.sh" or "scripts/<name>.py"
    args: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


class OptionalPluginMissing(Exception):
    """The command needs an optional extra that is not installed here."""


def snippets(text: str) -> list[tuple[int, str]]:
    """(line number, shell text) of every shell code block line and inline code span of Markdown `text`."""
    found, prose = [], []
    fence, pending, pending_line = None, "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = stripped[3:].strip() if fence is None else None
            prose.append("")
            continue
        if fence is None:
            prose.append(line)
            continue
        prose.append("")
        if fence not in SHELL_FENCES:
            continue
        pending_line = pending_line if pending else number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        found.append((pending_line, pending + stripped))
        pending = ""
    outside = "\n".join(prose)
    for span in re.finditer(r"(?<!`)`([^`]+)`(?!`)", outside):
        found.append((outside.count("\n", 0, span.start()) + 1, " ".join(span.group(1).split())))
    return sorted(found)


def program_of(token: str) -> str | None:
    """ "train.py", "eval.py", "run.sh" or "scripts/<name>.py" for a token that runs one of ours, else None."""
    path = token.replace("\\", "/")
    if path in ("train.py", "eval.py", "run.sh") or re.search(
        r"(^|/)recipes/librispeech/(train|eval)\.py$|(^|/)recipes/librispeech/run\.sh$", path
    ):
        return path.rsplit("/", 1)[-1]
    match = re.search(r"(^|/)scripts/(\w+\.py)$", path)
    return f"scripts/{match.group(2)}" if match else None


def collect_commands(doc: Path) -> list[DocCommand]:
    """The commands of ours that the Markdown file `doc` shows (see the module docstring)."""
    commands = []
    for line, text in snippets(doc.read_text()):
        if SYNOPSIS.search(text) or not any(name in text for name in ("train.py", "eval.py", "run.sh", "scripts/")):
            continue
        try:
            lexer = shlex.shlex(PLACEHOLDER.sub("PLACEHOLDER", text), posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:  # unbalanced quotes: prose that quotes part of a command
            continue
        segment: list[str] = []
        for token in [*tokens, ";"]:
            if token not in (";", "&&", "||", "|", "&"):
                segment.append(token)
                continue
            words = [word for word in segment if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", word)]  # env assignments
            segment = []
            for index, word in enumerate(words):
                program = program_of(word)
                if program is None:
                    continue
                launched = index > 0 and words[0] in LAUNCHERS
                if launched or (index == 0 and len(words) > 1):
                    commands.append(DocCommand(doc, line, text, program, words[index + 1 :]))
                break
    return commands


def compose_config(config_name: str, overrides: list[str]):
    """Hydra's composition of conf/<config_name>.yaml with `overrides` (OptionalPluginMissing for an extra's)."""
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name=config_name, overrides=overrides)
    except MissingConfigException as err:
        for config, module, extra in OPTIONAL_PLUGINS:
            if f"'{config}'" in str(err) and importlib.util.find_spec(module) is None:
                raise OptionalPluginMissing(f"needs the {extra} extra (pip install -e '.[{extra}]')") from None
        raise


def check_hydra(config_name: str, arguments: list[str]) -> None:
    """Composes every job of ``<config_name>.py <arguments>`` (a ``-m`` sweep has several); raises on a problem."""
    overrides, index = [], 0
    while index < len(arguments):
        argument = arguments[index]
        if argument in HYDRA_FLAGS_WITH_VALUE:
            index += 2
            continue
        if argument.startswith("-") and argument not in HYDRA_FLAGS:
            raise ValueError(f"{argument!r} is not a Hydra flag train.py/eval.py take")
        if argument not in HYDRA_FLAGS:
            overrides.append(argument)
        index += 1
    # a sweep's jobs: every combination of the swept values, as Hydra's basic sweeper runs them
    choices = [
        [f"{o.get_key_element()}={value}" for value in o.sweep_string_iterator()]
        if o.is_sweep_override()
        else [o.input_line]
        for o in OverridesParser.create().parse_overrides(overrides)
    ]
    for job in itertools.product(*choices):
        cfg = compose_config(config_name, list(job))
        if config_name == "train":
            with open_dict(cfg):
                cfg.paths.output_dir = "/nonexistent/run"  # ${hydra:runtime.output_dir} outside a run
            check_config(cfg)


def run_sh_options() -> set[str]:
    """The options run.sh's parser takes (its ``case`` labels)."""
    return set(re.findall(r"^\s+(--[\w-]+)\)", RUN_SH.read_text(), flags=re.MULTILINE)) | {"-h", "--help"}


def check_run_sh(arguments: list[str]) -> None:
    options = dict(zip(arguments[::2], arguments[1::2]))
    if len(arguments) % 2 and arguments[-1] not in ("-h", "--help"):
        raise ValueError(f"run.sh: option {arguments[-1]} needs a value")
    unknown = sorted(set(options) - run_sh_options())
    if unknown:
        raise ValueError(f"run.sh has no option {', '.join(unknown)} (it takes {', '.join(sorted(run_sh_options()))})")
    experiment = options.get("--experiment", "librispeech_medium")
    if not (CONF_DIR / "experiment" / f"{experiment}.yaml").is_file():
        raise ValueError(f"--experiment {experiment}: no conf/experiment/{experiment}.yaml")
    check_hydra(
        "train", [f"experiment={experiment}", "data=librispeech", *shlex.split(options.get("--train-args", ""))]
    )
    check_hydra("eval", ["data=librispeech", "checkpoint=/x/checkpoints", *shlex.split(options.get("--eval-args", ""))])
    kept = yaml.safe_load((CONF_DIR / "callbacks" / "default.yaml").read_text())["model_checkpoint"]["save_top_k"]
    avg = int(options.get("--avg", 1))
    if int(options.get("--stage", 0)) >= 4 and avg > kept:
        raise ValueError(
            f"--stage {options['--stage']} --avg {avg}: stage 3 keeps {kept} checkpoints "
            "(conf/callbacks/default.yaml) unless it ran with that --avg"
        )


class ArgumentsParsed(Exception):
    def __init__(self, namespace: argparse.Namespace):
        super().__init__("parsed")
        self.namespace = namespace


def strict_parse_args(parser: argparse.ArgumentParser, args=None, namespace=None):
    """``parse_args`` that stops the script once its arguments are parsed (nothing of its work runs)."""
    parsed, extras = parser.parse_known_args(args, namespace)
    if extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    raise ArgumentsParsed(parsed)


def check_script(program: str, arguments: list[str]) -> None:
    """Parses `arguments` with ``scripts/<name>.py``'s own parser, in this process; composes its overrides."""
    path = REPO_ROOT / program
    if not path.is_file():
        raise ValueError(f"there is no {program}")
    if "parse_args(" not in path.read_text():
        raise ValueError(f"{program} has no argparse parser to check its arguments (and --help) with")
    stderr = io.StringIO()
    # the script's module-level settings (os.environ.setdefault, sys.path) stay in the script
    with (
        mock.patch.object(sys, "argv", [str(path), *arguments]),
        mock.patch.dict(os.environ),
        mock.patch.object(sys, "path", list(sys.path)),
        mock.patch.object(argparse.ArgumentParser, "parse_args", strict_parse_args),
        contextlib.redirect_stderr(stderr),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except ArgumentsParsed as parsed:
            namespace = parsed.namespace
        except SystemExit as exit_:
            if exit_.code in (0, None):  # --help
                return
            raise ValueError(
                f"{program} refuses these arguments: {stderr.getvalue().strip().splitlines()[-1]}"
            ) from None
        else:
            raise ValueError(f"{program} finished without parsing its arguments")
    if isinstance(getattr(namespace, "overrides", None), list):
        check_hydra("train", namespace.overrides)


def check_command(command: DocCommand) -> str | None:
    """None when `command` holds; else its problem, naming the doc file, line and command.

    Raises:
        OptionalPluginMissing: the command needs an extra that is not installed here.
    """
    try:
        if command.program in ("train.py", "eval.py"):
            check_hydra(command.program.removesuffix(".py"), command.args)
        elif command.program == "run.sh":
            check_run_sh(command.args)
        else:
            check_script(command.program, command.args)
    except OptionalPluginMissing:
        raise
    except Exception as err:  # noqa: BLE001 - any error of composing or parsing is the doc's problem to report
        reason = " ".join(line.strip() for line in str(err).strip().splitlines() if line.strip())[:600]
        return f"{command.where}\n  {type(err).__name__}: {reason}"
    return None
