"""One progress bar for a whole pass of the pool, however many stages it trains in.

``fedrepro reproduce`` trains in stages (learning-rate searches, then the tables they tune and the
renders, then any sequential-claim seeds), each a call of :func:`fedrepro.execute.local.run_pool`.
The bar counts tasks (runs, cached analyses, notebook renders): its unit is ``tasks``, its total is
everything known to be left plus what is done, and a stage that names more work grows the total
instead of starting a bar of its own. The count only goes up, and the total only grows, so the bar
never moves backwards. The time left, from the pool's calibrated estimates, is shown beside it as
"est." seconds of wall time; it may change as tasks finish, the bar does not.

Where the stream is not a terminal (a CI log, ``make reproduce > log``) and not a Jupyter kernel
(which draws a widget), the bar's carriage-return redraws would pile up as thousands of updates in
the file; there it prints a plain line instead, at the start, each time another
:data:`LINE_STEP` of the total is done, and when it closes.
"""
from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from tqdm.auto import tqdm

# The share of the total between two plain lines in a non-interactive log: at most about 20 lines
# for a pass whose total does not grow.
LINE_STEP = 0.05


def _seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def _in_jupyter_kernel() -> bool:
    """Whether this process is a Jupyter kernel (tqdm.auto draws a widget there), told as tqdm.auto
    tells it: an IPython shell whose config names the kernel app."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def interactive(stream: TextIO) -> bool:
    """Whether a redrawn bar suits ``stream``: a terminal, or any stream inside a Jupyter kernel."""
    isatty = getattr(stream, "isatty", None)
    try:
        tty = bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        tty = False
    return tty or _in_jupyter_kernel()


class PassProgress:
    """Tasks done out of tasks known, for one pass.

    :meth:`expect` says how many tasks are left (the pool calls it with each stage's tasks); the
    total becomes ``done + left`` if that is more than it was. :meth:`advance` counts finished
    tasks (done or failed). :meth:`estimate` sets the shown wall time left. ``enabled=False`` keeps
    the counts and draws nothing. ``file`` is the stream drawn on (default: ``sys.stderr`` when the
    bar first draws); one that is not :func:`interactive` gets plain lines, not a redrawn bar."""

    UNIT = "tasks"

    def __init__(self, desc: str = "pass", enabled: bool = True, file: TextIO | None = None) -> None:
        self.desc = desc
        self.enabled = enabled
        self.file = file
        self.done = 0
        self.total = 0
        self.left_s: float | None = None
        self._bar = None
        self._lines: bool | None = None  # None: not drawn yet; True: plain lines; False: tqdm's bar
        self._started = 0.0
        self._line_done: int | None = None  # the count the last plain line showed
        self._line_state: tuple | None = None  # (done, total, postfix) of the last plain line

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0

    def expect(self, left: int) -> None:
        """At least ``left`` more tasks are to come: grow the total to cover them (never shrink it)."""
        self.total = max(self.total, self.done + int(left))
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done += int(n)
        self.total = max(self.total, self.done)
        self._draw()

    def estimate(self, wall_s_left: float | None) -> None:
        """The estimated wall time left (None or not finite: unknown)."""
        self.left_s = wall_s_left if wall_s_left is not None and math.isfinite(wall_s_left) else None
        self._draw()

    def postfix(self) -> str:
        return "" if self.left_s is None else f"est. {_seconds(self.left_s)} left"

    def line(self) -> str:
        """The plain line that stands for the bar in a non-interactive log."""
        pct = 100.0 * self.fraction
        elapsed = tqdm.format_interval(time.monotonic() - self._started)
        extra = f", {self.postfix()}" if self.postfix() else ""
        return f"{self.desc}: {pct:3.0f}% {self.done}/{self.total} {self.UNIT} [{elapsed}{extra}]"

    def _print_line(self) -> None:
        stream = self.file if self.file is not None else sys.stderr
        print(self.line(), file=stream, flush=True)
        self._line_done = self.done
        self._line_state = (self.done, self.total, self.postfix())

    def _draw_line(self) -> None:
        if self.total == 0:
            return  # nothing known yet: the first line waits for a total
        if self._line_done is None or self.done >= self.total > self._line_done \
                or self.done - self._line_done >= max(1, math.ceil(LINE_STEP * self.total)):
            self._print_line()

    def _draw(self) -> None:
        if not self.enabled:
            return
        if self._lines is None:
            self._lines = not interactive(self.file if self.file is not None else sys.stderr)
            self._started = time.monotonic()
        if self._lines:
            self._draw_line()
            return
        if self._bar is None:
            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.UNIT, mininterval=2.0, file=self.file,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} " + self.UNIT
                                        + " [{elapsed}{postfix}]")
        self._bar.total = self.total
        self._bar.n = self.done
        self._bar.set_postfix_str(self.postfix(), refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        """End the bar where it stands (a pass cut short keeps its count)."""
        if self._lines and self.total and self._line_state != (self.done, self.total, self.postfix()) \
                and not (self.done == self.total and self._line_done == self.done):
            self._print_line()  # where it stopped short, or what the last line did not show of it
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "PassProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["PassProgress"]
