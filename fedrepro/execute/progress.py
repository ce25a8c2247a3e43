"""One progress bar for a whole pass of the pool, however many stages it trains in.

``fedrepro reproduce`` trains in stages (learning-rate searches, then the tables they tune and the
renders, then any sequential-claim seeds), each a call of :func:`fedrepro.execute.local.run_pool`.
The bar counts tasks (runs, cached analyses, notebook renders): its unit is ``tasks``, its total is
everything known to be left plus what is done, and a stage that names more work grows the total
instead of starting a bar of its own. The count only goes up, and the total only grows, so the bar
never moves backwards. The time left, from the pool's calibrated estimates, is shown beside it as
"est." seconds of wall time; it may change as tasks finish, the bar does not.
"""
from __future__ import annotations

import math

from tqdm.auto import tqdm


def _seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


class PassProgress:
    """Tasks done out of tasks known, for one pass.

    :meth:`expect` says how many tasks are left (the pool calls it with each stage's tasks); the
    total becomes ``done + left`` if that is more than it was. :meth:`advance` counts finished
    tasks (done or failed). :meth:`estimate` sets the shown wall time left. ``enabled=False`` keeps
    the counts and draws nothing."""

    UNIT = "tasks"

    def __init__(self, desc: str = "pass", enabled: bool = True) -> None:
        self.desc = desc
        self.enabled = enabled
        self.done = 0
        self.total = 0
        self.left_s: float | None = None
        self._bar = None

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

    def _draw(self) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.UNIT, mininterval=2.0,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} " + self.UNIT
                                        + " [{elapsed}{postfix}]")
        self._bar.total = self.total
        self._bar.n = self.done
        self._bar.set_postfix_str(self.postfix(), refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        """End the bar where it stands (a pass cut short keeps its count)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "PassProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["PassProgress"]
