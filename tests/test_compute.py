"""The predicted cost of a pass (``fedrepro reproduce --predict``): calibrated on a report's task times,
and the savings the speed levers would bring, computed from the plan alone."""
from __future__ import annotations

import json
import math

import pytest
from support import tiny_config

from fedrepro.app.compute import PlannedRuns, calibrate, claim_notebooks, halving_saving, prefix_saving
from fedrepro.errors import ConfigError
from fedrepro.execute.local import estimate_cost


def _report(*timed) -> dict:
    return {"tasks": {key: seconds for key, seconds in timed}}


def test_a_run_takes_the_seconds_per_unit_its_kind_was_timed_at(tmp_path):
    timed = tiny_config(tmp_path)
    other_seed = timed.replace(seed=7)
    other_method = timed.replace(**{"method.name": "fedprox", "train.rounds": 9})
    unseen_method = timed.replace(**{"method.name": "fedper"})
    report = _report((timed.hash(), 10.0), ("probe:" + timed.hash(), 4.0), ("probe:x", 6.0),
                     ("render:a/01_x.ipynb", 30.0), ("render:b/02_y.ipynb", 50.0), ("gone", 99.0))
    fedprox_rate = 1e-3
    report["tasks"][other_method.replace(seed=3).hash()] = fedprox_rate * estimate_cost(other_method)
    cal = calibrate(report, {c.hash(): c for c in (timed, other_method.replace(seed=3))})
    assert (cal.timed_runs, cal.matched) == (3, 2)  # "gone": a run today's plan does not have
    assert cal.run_seconds(other_seed) == pytest.approx(10.0)  # same kind: same seconds per unit
    # Another kind of a timed method: that method's rate; a method never timed: the median over all runs.
    assert cal.run_seconds(other_method.replace(**{"train.rounds": 5})) == pytest.approx(
        fedprox_rate * estimate_cost(other_method.replace(**{"train.rounds": 5})))
    rates = sorted([10.0 / estimate_cost(timed), fedprox_rate])
    assert cal.run_seconds(unseen_method) == pytest.approx(sum(rates) / 2 * estimate_cost(unseen_method))
    assert [cal.basis(c) for c in (other_seed, other_method.replace(**{"train.rounds": 5}), unseen_method)] == \
        ["kind", "method", "all"]
    assert cal.analysis_seconds("probe") == 5.0 and cal.render_seconds("a/01_x.ipynb") == 30.0
    assert cal.render_seconds("c/03_z.ipynb") == 40.0  # a notebook never rendered: the median render


def test_a_report_that_timed_no_planned_run_cannot_calibrate(tmp_path):
    cal = calibrate(_report(("elsewhere", 5.0)), {})
    with pytest.raises(ConfigError, match="--timings"):
        cal.run_seconds(tiny_config(tmp_path))


def test_a_timed_run_whose_config_changed_since_calibrates_its_kind_from_the_store(tmp_path):
    """A report outlives the configs it timed (a setup changed, so did the hash); the store still
    holds the old run's config, so its kind stays calibrated (a damaged config is skipped)."""
    import fedrepro

    old = tiny_config(tmp_path)
    today = old.replace(**{"train.lr": old.train.lr / 2})  # a hashed change of the same kind
    store = tmp_path / "runs"
    fedrepro.run(old)  # the old run, as the report's pass stored it
    (store / "damaged").mkdir()
    (store / "damaged" / "config.json").write_text("{")
    report = _report((old.hash(), 10.0), ("damaged", 7.0), ("absent", 3.0))
    with pytest.raises(ConfigError):
        calibrate(report, {today.hash(): today}).run_seconds(today)
    cal = calibrate(report, {today.hash(): today}, store)
    assert (cal.timed_runs, cal.matched, cal.from_store) == (3, 0, 1)
    assert cal.basis(today) == "kind" and cal.run_seconds(today) == pytest.approx(10.0)



def test_the_reference_archives_runs_calibrate_the_kinds_a_report_did_not_time(tmp_path):
    """A fresh clone's store is empty and its report may predate today's configs: the archive's runs,
    with the seconds they took where they were trained, calibrate their kinds; a run the report timed
    counts once (the report's seconds)."""
    timed = tiny_config(tmp_path)
    archived_kind = timed.replace(**{"method.name": "fedprox"})
    report = _report((timed.hash(), 10.0))
    with pytest.raises(ConfigError):
        calibrate(report, {}).run_seconds(archived_kind)
    cal = calibrate(report, {timed.hash(): timed},
                    archived={archived_kind.hash(): (archived_kind, 4.0), timed.hash(): (timed, 99.0)})
    assert (cal.matched, cal.from_archive) == (1, 1)
    assert cal.basis(archived_kind) == "kind" and cal.run_seconds(archived_kind.replace(seed=5)) == pytest.approx(4.0)
    assert cal.run_seconds(timed) == pytest.approx(10.0)


def test_the_committed_archive_gives_its_runs_times_and_configs():
    from fedrepro.app.compute import archived_times
    from fedrepro.runs import archive

    if not archive.Archive(archive.archive_folder("laptop")).exists():
        pytest.skip("no reference archive committed")
    times = archived_times("laptop")
    assert times and all(cfg.hash() == h and seconds > 0 for h, (cfg, seconds) in times.items())

def test_reproduce_refuses_a_timings_file_that_is_not_there_before_it_plans(tmp_path, capsys):
    from fedrepro.app.cli import main

    assert main(["reproduce", "--profile", "smoke", "--timings", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--timings" in err and "no such file" in err


def test_prefix_sharing_saves_the_shorter_runs_training_where_the_method_allows(tmp_path):
    short, long = tiny_config(tmp_path, **{"train.rounds": 2}), tiny_config(tmp_path, **{"train.rounds": 6})
    cal = calibrate(_report((long.hash(), 6.0)), {long.hash(): long})
    saved, n = prefix_saving({c.hash(): c for c in (short, long)}, cal)
    cost = estimate_cost(short)
    assert n == 1 and saved == pytest.approx(cal.run_seconds(short) * (cost - 2000.0) / cost)
    assert prefix_saving({long.hash(): long}, cal) == (0.0, 0)  # no shorter run: nothing to share
    # FedSoup's soup phase reads its total rounds: its shorter run is no prefix of the longer.
    soups = [c.replace(**{"method.name": "fedsoup"}) for c in (short, long)]
    assert prefix_saving({c.hash(): c for c in soups}, cal) == (0.0, 0)
    # A run without the early stop and its twin with it (which may stop before the end): one donor.
    fixed = long.replace(**{"train.flat_from": 3, "train.flat_window": 2})
    twin = fixed.replace(**{"train.stop_when_flat": True})
    saved, n = prefix_saving({c.hash(): c for c in (fixed, twin)}, cal)
    assert n == 1 and saved == pytest.approx(cal.run_seconds(twin) * (1 - 2000.0 / estimate_cost(twin)))


def test_halving_saves_the_short_rates_rounds_and_all_but_the_best_thirds_full_runs(tmp_path):
    rates = [tiny_config(tmp_path, **{"train.rounds": 8, "train.lr": lr}) for lr in (0.1, 0.01, 0.001)]
    planned = PlannedRuns(runs={c.hash(): c for c in rates}, searches={c.hash() for c in rates})
    cal = calibrate(_report((rates[0].hash(), 8.0)), planned.runs)
    full = sum(cal.run_seconds(c) for c in rates)
    short = sum(cal.run_seconds(c.replace(**{"train.rounds": 2})) for c in rates)
    # 3 rates at a quarter of the rounds, then ⌈3/3⌉ = 1 full run, against 3 full runs.
    assert halving_saving(planned, cal, 0.25, 3) == pytest.approx(full - short - full / 3)
    assert halving_saving(planned, cal, 0.25, 2) == pytest.approx(full - short - full * math.ceil(3 / 2) / 3)


def test_a_claims_notebook_is_read_off_the_kept_records_when_none_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path / "out"))
    pages = tmp_path / "pages"
    (pages / "claims").mkdir(parents=True)
    (pages / "claims" / "pfedcspc_04_rounds_to_target.json").write_text(json.dumps(
        {"path": "pfedcspc/04_rounds_to_target", "notebook": "pfedcspc_04_rounds_to_target", "commit": "ae54bdb",
         "claims": [{"claim_id": "pfedcspc.fewer_rounds", "paper": "pfedcspc", "verdict": "PASS"}]}))
    assert claim_notebooks("laptop", pages) == {"pfedcspc.fewer_rounds": "pfedcspc/04_rounds_to_target.ipynb"}
    assert claim_notebooks("laptop", tmp_path / "none") == {}
