"""Progress of the long stages of data preparation (synthesis, audio checks, statistics), on a terminal and in
a log alike.

On a terminal (the stream is a TTY) a tqdm bar. Anywhere else (output redirected to a file, a SLURM log, a
pipe) a bar redrawn with carriage returns would fill the log, so `Progress` writes whole lines instead: one
when the stage starts (what it counts and how many), one each time another `LINE_EVERY_PERCENT` of it is
done (but not within `LINE_GAP_S` of the last: a stage of a few seconds gets its first and last line only)
or `LINE_EVERY_S` seconds have passed since the last line, and one when it ends, each with the count, the
elapsed time, the rate and the estimated time left (tqdm's own arithmetic, `tqdm.format_meter`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

from tqdm import tqdm

LINE_EVERY_PERCENT = 10
LINE_EVERY_S = 30.0
LINE_GAP_S = 2.0
LINE_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f} %), {elapsed} elapsed, ETA {remaining}, {rate_fmt}"

Item = TypeVar("Item")


class Progress:
    """Counts `total` items of a stage called `desc` (see the module docstring); `update(n)` as they are done,
    `close()` (or the ``with`` block's end) when the stage ends. `enabled` False (or no item) shows nothing; `stream`
    defaults to stderr, `clock` (seconds) to `time.monotonic`."""

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str = "utt",
        enabled: bool = True,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.desc, self.unit = total, desc, unit
        self.stream = stream if stream is not None else sys.stderr
        self.count = 0
        self._clock = clock
        self._start = self._last_line_time = clock()
        self._next_line_count = 0
        shown = enabled and total > 0
        self._closed = not shown
        on_terminal = shown and bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream) if on_terminal else None
        if shown and not on_terminal:
            self._line()

    def _line(self) -> None:
        now = self._clock()
        text = tqdm.format_meter(
            self.count, self.total, now - self._start, prefix=self.desc, unit=self.unit, bar_format=LINE_FORMAT
        )
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_line_time = now
        step = max(1, self.total * LINE_EVERY_PERCENT // 100)
        self._next_line_count = (self.count // step + 1) * step

    def update(self, n: int = 1) -> None:
        """`n` more items are done."""
        if self._closed:
            return
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
            return
        since_last = self._clock() - self._last_line_time
        at_mark = self.count >= self._next_line_count and since_last >= LINE_GAP_S
        if (at_mark or since_last >= LINE_EVERY_S) and self.count < self.total:  # the last line is close()'s
            self._line()

    def close(self) -> None:
        """Ends the stage: the bar is completed, or its last line written."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        else:
            self._line()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def track(items: Iterable[Item], total: int, desc: str, unit: str = "utt", enabled: bool = True) -> Iterator[Item]:
    """`items` (`total` of them) passed through, counted by a `Progress`."""
    with Progress(total, desc, unit, enabled) as progress:
        for item in items:
            yield item
            progress.update()
