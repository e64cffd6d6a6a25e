"""Progress of data preparation's long stages (`asr_plugin.progress`): whole lines with count and ETA in a log,
a few per stage whatever its length; a tqdm bar on a terminal."""

from __future__ import annotations

import io

from asr_plugin.progress import LINE_EVERY_S, LINE_GAP_S, Progress, track


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_slow_stage_in_a_log_gets_a_line_per_tenth_and_every_30_s_with_its_eta():
    log, clock = io.StringIO(), Clock()
    with Progress(100, "synthesizing", stream=log, clock=clock) as progress:
        for _ in range(100):
            clock.now += 5.0  # 5 s an item: a tenth takes 50 s
            progress.update()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines[0] == "synthesizing: 0/100 utt (0 %), 00:00 elapsed, ETA ?, ?utt/s"
    assert lines[-1].startswith("synthesizing: 100/100 utt (100 %), 08:20 elapsed, ETA 00:00")
    counts = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    # 30 s after the first line (item 6), the 10 % mark (item 10), 30 s after that (item 16), ...
    assert counts[:4] == [0, 6, 10, 16]
    assert all("ETA" in line for line in lines)
    assert "synthesizing: 50/100 utt (50 %), 04:10 elapsed, ETA 04:10,  5.00s/utt" in lines


def test_a_stage_of_a_few_seconds_gets_its_first_and_last_line_only():
    log, clock = io.StringIO(), Clock()
    with Progress(24, "dev: checking audio", stream=log, clock=clock) as progress:
        for _ in range(24):
            clock.now += LINE_GAP_S / 30
            progress.update()
    lines = log.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "dev: checking audio: 0/24 utt (0 %)",
        "dev: checking audio: 24/24 utt (100 %)",
    ]


def test_a_stalled_stage_says_so_every_30_s():
    log, clock = io.StringIO(), Clock()
    progress = Progress(10, "tokenizer", stream=log, clock=clock)
    clock.now = LINE_EVERY_S - 1
    progress.update(0)
    clock.now = LINE_EVERY_S + 1
    progress.update(0)
    assert len(log.getvalue().splitlines()) == 2
    progress.close()
    progress.close()
    assert len(log.getvalue().splitlines()) == 3


def test_track_counts_what_passes_through():
    assert list(track(iter("abc"), 3, "x", enabled=False)) == ["a", "b", "c"]


def test_a_terminal_gets_a_tqdm_bar_and_disabled_or_empty_stages_show_nothing():
    terminal = Terminal()
    with Progress(8, "stats", stream=terminal) as progress:
        progress.update(8)
    assert "\r" in terminal.getvalue() and "8/8" in terminal.getvalue()
    quiet = io.StringIO()
    for enabled, total in ((False, 5), (True, 0)):
        with Progress(total, "x", enabled=enabled, stream=quiet) as progress:
            progress.update(total)
    assert quiet.getvalue() == ""
