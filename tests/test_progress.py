"""The pass's progress bar: counts tasks, grows its total, never goes backwards, names its unit, and
prints plain lines, not redraws, into a log that is not a terminal."""
from __future__ import annotations

import io
import time

from fedrepro.execute.local import Task, run_pool
from fedrepro.execute.progress import LINE_STEP, PassProgress


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


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_that_is_not_a_terminal_gets_a_plain_line_every_few_percent():
    # A CI log (stderr to a file) got a carriage-return redraw per update, thousands in a long pass.
    log = io.StringIO()
    with PassProgress("pass", enabled=True, file=log) as bar:
        bar.expect(1000)
        for i in range(1000):
            bar.advance()
            bar.estimate(float(1000 - i))
    text = log.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and "\x1b" not in text
    assert lines[0].startswith("pass:   0% 0/1000 tasks")
    assert lines[-1].startswith("pass: 100% 1000/1000 tasks")
    assert len(lines) <= 2 + 1 / LINE_STEP  # the start, one per step, the end
    assert any("50% 500/1000 tasks" in x and "est." in x for x in lines)


def test_plain_lines_follow_a_growing_total_and_print_the_end_once():
    log = io.StringIO()
    with PassProgress("pass", enabled=True, file=log) as bar:
        bar.expect(10)
        for _ in range(10):
            bar.advance()
        bar.expect(10)  # the next stage names ten more
        for _ in range(10):
            bar.advance()
    lines = log.getvalue().splitlines()
    assert [x.split(" [")[0] for x in lines].count("pass: 100% 20/20 tasks") == 1
    assert "pass: 100% 10/10 tasks" in [x.split(" [")[0] for x in lines]
    assert len(lines) <= 2 * (2 + 1 / LINE_STEP)


def test_a_terminal_still_gets_the_redrawn_bar():
    term = _Terminal()
    with PassProgress("pass", enabled=True, file=term) as bar:
        bar.expect(3)
        bar.advance(3)
    assert "\r" in term.getvalue() and "3/3 tasks" in term.getvalue()


def test_a_disabled_bar_prints_nothing_to_a_log():
    log = io.StringIO()
    with PassProgress("pass", enabled=False, file=log) as bar:
        bar.expect(3)
        bar.advance(3)
    assert log.getvalue() == ""
