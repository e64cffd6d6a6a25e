"""The suite's per-test time budget, as a pytest plugin (tests/conftest.py loads it).

``--max-test-seconds=S`` fails the run when a test not marked ``slow`` spent more than S seconds in its call
(its fixtures' setup is left out: a session fixture built once, such as the tiny corpus or the trained tiny run,
is the whole run's cost, shown by ``--durations``), and names every such test with its time. CI passes
``--max-test-seconds=60`` (.ci/run); without the option nothing is checked, so a loaded developer machine is
not failed for being slow."""

from __future__ import annotations

import pytest

OPTION = "--max-test-seconds"


class DurationBudget:
    """Collects the calls over `limit` seconds (under xdist the controller sees every worker's reports)."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.over: list[tuple[str, float]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and "slow" not in report.keywords and report.duration > self.limit:
            self.over.append((report.nodeid, report.duration))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.over:
            terminalreporter.section(f"tests over the {self.limit:g} s budget: mark them slow or make them smaller")
            for nodeid, seconds in sorted(self.over, key=lambda item: -item[1]):
                terminalreporter.line(f"{seconds:7.1f} s  {nodeid}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.over and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        type=float,
        default=None,
        metavar="S",
        help="fail the run naming every test not marked slow whose call took more than S seconds",
    )


def pytest_configure(config: pytest.Config) -> None:
    limit = config.getoption(OPTION)
    if limit is None or hasattr(config, "workerinput"):  # xdist workers: the controller checks
        return
    if not limit > 0:
        raise pytest.UsageError(f"{OPTION} takes a positive number of seconds, not {limit}")
    config.pluginmanager.register(DurationBudget(limit), "duration_budget_check")
