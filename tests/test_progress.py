"""The pass's progress bar: counts tasks, grows its total, never goes backwards, names its unit."""
from __future__ import annotations

import time

from fedrepro.execute.local import Task, run_pool
from fedrepro.execute.progress import PassProgress


def test_the_total_grows_and_never_shrinks_and_the_fraction_never_falls():
    bar = PassProgress(enabled=False)
    bar.expect(10)
    seen = [bar.fraction]
    for _ in range(4):
        bar.advance()
        seen.append(bar.fraction)
    bar.expect(3)             # a stage that names less than is known left: the total stays
    assert bar.total == 10
    bar.expect(20)            # a stage that names more (tuned rows after a search): it grows
    assert bar.total == 24 and bar.done == 4
    for _ in range(24):
        bar.advance()
        seen.append(bar.fraction)
    assert bar.done == bar.total == 28  # more done than expected: the total follows, at 100%
    assert seen[-1] == 1.0
    # The fraction dips only where the total grew (work found), never as a task finishes.
    drops = [i for i in range(1, len(seen)) if seen[i] < seen[i - 1]]
    assert drops == [5]


def test_the_bar_states_its_unit_and_the_estimate_in_seconds(capsys):
    with PassProgress("pass", enabled=True) as bar:
        bar.expect(4)
        bar.advance(1)
        bar.estimate(125.0)
        assert bar.postfix() == "est. 2 min left"
        bar.estimate(float("nan"))
        assert bar.postfix() == ""
        bar.estimate(30.0)
    err = capsys.readouterr().err
    assert "1/4 tasks" in err and "est. 30 s left" in err
    assert "s/s" not in err


def test_stages_of_a_pass_share_one_bar_and_count_every_task():
    def call() -> float:
        time.sleep(0.01)
        return 0.01

    bar = PassProgress(enabled=False)
    bar.expect(3)  # what the first plan knows
    first = run_pool([], workers=2, progress=False, calls=[Task(f"a{i}", call=call) for i in range(2)], bar=bar)
    assert len(first.done) == 2 and (bar.done, bar.total) == (2, 3)
    # The task still to come (a later stage's) counts in the time left, at this stage's mean.
    assert bar.left_s > 0
    # The next stage names 4 tasks: the total grows to what is done plus those, from where it stood.
    second = run_pool([], workers=2, progress=False, calls=[Task(f"b{i}", call=call) for i in range(4)], bar=bar)
    assert len(second.done) == 4 and (bar.done, bar.total) == (6, 6)
    assert bar.left_s is not None and bar.left_s >= 0


def test_a_failed_task_and_what_needs_it_count_as_finished():
    def bad() -> float:
        raise RuntimeError("no")

    bar = PassProgress(enabled=False)
    report = run_pool([], workers=1, progress=False, bar=bar,
                      calls=[Task("bad", call=bad), Task("after", call=lambda: 0.0, deps=frozenset({"bad"}))])
    assert set(report.failed) == {"bad", "after"}
    assert bar.done == bar.total == 2
