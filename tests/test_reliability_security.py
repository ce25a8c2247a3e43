"""Issue 53, classes 7 and 8: a grid of no seeds is a one-line error, not an empty table; a pass
reports as trained only the runs its own process trained, not those another process over the same
store trained meanwhile."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.execute.grid import grid_points
from fedrepro.execute.local import run_pool, unfinished
from fedrepro.runs.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


# --- class 7: run_grid(seeds=[]) ------------------------------------------------------------------

@pytest.mark.parametrize("seeds", [[], (), iter([])])
def test_a_grid_of_no_seeds_is_a_one_line_error(tiny, seeds):
    with pytest.raises(ConfigError, match=r"^invalid seeds=\[\]; valid: a non-empty list of distinct integers") as e:
        fedrepro.run_grid(tiny(), {"method.name": ["fedavg"]}, seeds=seeds, progress=False)
    assert "\n" not in str(e.value)
    assert not (Path(tiny().runs_dir)).exists() or not any(Path(tiny().runs_dir).iterdir())


def test_a_sub_grid_of_no_seeds_names_its_seed_list():
    with pytest.raises(ConfigError, match=r"^invalid grid\['seed'\]=\[\]; valid: a non-empty list"):
        grid_points([{"method.name": ["fedavg"], "seed": [0]}, {"method.name": ["fedper"], "seed": []}])


def test_a_grid_of_no_sub_grids_or_no_variants_is_an_error(tiny):
    with pytest.raises(ConfigError, match=r"^invalid grid=\[\]; valid: None"):
        fedrepro.run_grid(tiny(), [], progress=False)
    with pytest.raises(ConfigError, match=r"^invalid variants=\{\}; valid: None"):
        fedrepro.run_grid(tiny(), {"method.name": ["fedavg"]}, variants={}, progress=False)


def test_grids_that_have_points_are_as_before():
    assert grid_points(None, [0, 1]) == [({}, 0), ({}, 1)]
    assert grid_points({"a": [1, 2]}, [3]) == [({"a": 1}, 3), ({"a": 2}, 3)]


# --- class 8: whose runs a report counts --------------------------------------------------------

def test_a_run_another_process_stored_meanwhile_is_done_but_not_trained_here(tiny):
    """The pool was planned with every run unfinished; before its workers got to one, another process
    stored it. The pool reports it done (its notebooks may render) but not as trained here."""
    cfgs = [tiny(seed=s) for s in range(2)]
    pending = unfinished(cfgs)
    assert len(pending) == 2
    other = cfgs[0]
    fedrepro.run(other)  # "another process": stored after the plan, before the pool runs
    report = run_pool({c.hash(): c for c in cfgs}, workers=1, progress=False, pending=pending)
    assert not report.failed and set(report.done) == pending
    assert report.trained == {cfgs[1].hash()}
    assert set(report.own()) == {cfgs[1].hash()}  # the wait for the other's run is no training time
    assert report.to_dict()["runs_trained"] == 1


def test_two_concurrent_pools_each_count_only_what_they_trained(tiny):
    """Two pools over the same runs at once (as two `fedrepro reproduce` passes over one store): every
    run is trained once, by one of them, and each pool counts only its own."""
    cfgs = [tiny(seed=s) for s in range(3)]
    pending = unfinished(cfgs)
    reports: list = [None, None]
    start = threading.Barrier(2)

    def one(i: int) -> None:
        start.wait()
        reports[i] = run_pool({c.hash(): c for c in cfgs}, workers=1, progress=False, pending=set(pending))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    a, b = reports
    assert not a.failed and not b.failed
    assert set(a.done) == set(b.done) == pending  # both passes see every run stored
    assert not (a.trained & b.trained)            # no run is claimed by both
    assert a.trained | b.trained == pending       # and each was trained by one of them
    assert all(RunStore(c.runs_dir).status(c) == "done" for c in cfgs)


def _pass(out: Path) -> subprocess.Popen:
    env = {**os.environ, "FEDREPRO_OUTPUT": str(out), "FEDREPRO_WORKERS": "1"}
    code = ("from fedrepro.app.reproduce import reproduce; "
            "reproduce('smoke', only='00_', progress=False, render=False)")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_two_concurrent_reproduce_passes_each_report_only_their_own_runs(tmp_path):
    """Two `reproduce` passes (smoke, the tour's runs, no render) over one output root at once: the
    runs each report as trained add up to the runs planned, and neither counts the other's."""
    out = tmp_path / "out"
    first, second = _pass(out), _pass(out)
    logs = [p.communicate(timeout=900)[0] for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, "\n".join(x[-3000:] for x in logs)
    report = json.loads(next(out.rglob("timings-no-render.json")).read_text())
    # Both wrote the same report file: read each pass's counts from its own printed summary.
    trained = [int(re.search(r"\((\d+) runs trained", log).group(1)) for log in logs]
    assert sum(trained) == report["runs_planned"] > 0, logs
    runs = [p for p in (out / "runs").iterdir() if (p / "summary.json").is_file()]
    assert len(runs) == report["runs_planned"]
