"""A user's mistake ends a program with its message and a non-zero exit status, not a traceback.

The project refuses bad input with a message that names the problem (the argument, file, sample or config key):
a `asr_plugin.config_nodes.ConfigError`, another ValueError, or a missing, existing or wrong kind of file.
Every entry point runs through `exit_on_user_error`: such an error prints ``error: <message>`` on stderr and
exits with status 1; the traceback is printed only with the debug switch set to 1, ``HYDRA_FULL_ERROR`` for the
Hydra recipes (Hydra's own switch) and ``ASR_PLUGIN_DEBUG`` for the scripts.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

# ConfigError is a ValueError; the file errors are the refusals of paths a user gave
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError)
HYDRA_DEBUG = "HYDRA_FULL_ERROR"  # the recipes' switch: Hydra's own
SCRIPT_DEBUG = "ASR_PLUGIN_DEBUG"  # the scripts'
EXIT_STATUS = 1

F = TypeVar("F", bound=Callable[..., Any])


def exit_on_user_error(debug_variable: str = SCRIPT_DEBUG) -> Callable[[F], F]:
    """Decorates an entry point: a user error (`USER_ERRORS`) it raises prints its message on stderr and exits
    with status 1, unless the environment sets `debug_variable` to 1 (then it propagates with its traceback)."""

    def decorate(main: F) -> F:
        @functools.wraps(main)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return main(*args, **kwargs)
            except USER_ERRORS as error:
                if os.environ.get(debug_variable) == "1":
                    raise
                print(f"error: {error}", file=sys.stderr)
                print(f"(set {debug_variable}=1 for the traceback)", file=sys.stderr)
                raise SystemExit(EXIT_STATUS) from None

        return run  # type: ignore[return-value]

    return decorate
