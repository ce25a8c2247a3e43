"""The reproduction plan, the pool, the trace, and one config giving one result from every launcher."""
from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

import fedrepro
from fedrepro.env import trace
from fedrepro.errors import ConfigError
from fedrepro.execute.grid import run_grid
from fedrepro.papers import PAPERS
from fedrepro.papers.plan import Need, needs_of, plan
from fedrepro.execute.local import estimate_cost, run_pool
from fedrepro.analysis.grid import check_cached
from fedrepro.app.reproduce import analyze, numbered_notebooks
from fedrepro.runs.store import RunStore

ROOT = Path(__file__).resolve().parent.parent
NB_ROOT = ROOT / "notebooks"


# --- the plan ---------------------------------------------------------------------------------

def test_every_paper_notebook_has_a_plan_entry():
    for nb in numbered_notebooks(ROOT):
        needs = needs_of(nb, NB_ROOT)  # raises, naming the notebook, when its entry is missing
        folder = nb.relative_to(NB_ROOT).parts[0] if len(nb.relative_to(NB_ROOT).parts) > 1 else "tour"
        if folder in PAPERS and not nb.name.startswith("99_"):
            assert needs is not None, nb


def test_no_entry_without_a_notebook():
    for name in PAPERS:
        entries = set(fedrepro.papers.paper(name).NOTEBOOKS)
        folder = NB_ROOT if name == "tour" else NB_ROOT / name
        stems = {p.stem for p in folder.glob("[0-9][0-9]_*.ipynb")}
        assert entries <= stems, f"{name}.NOTEBOOKS names notebooks that do not exist: {entries - stems}"


@pytest.mark.parametrize("profile", ["smoke", "laptop", "paper"])
def test_plan_builds_at_every_profile_and_shares_runs(profile):
    p = plan(numbered_notebooks(ROOT), NB_ROOT, profile)
    reads = sum(len(h) for h in p.readers.values())
    assert len(p.runs) > 50
    assert len(p.runs) < reads  # notebooks share runs; each is planned once
    assert all(h in p.runs for hs in p.readers.values() for h in hs)
    assert all(cfg.hash() == h for h, cfg in p.runs.items())
    from fedrepro.analysis.grid import CACHED

    assert {name for name, _ in p.analyses} <= set(CACHED)


def test_plan_of_a_notebook_matches_its_tables():
    nb = NB_ROOT / "fedpft" / "04_fedpft_con.ipynb"
    p = plan([nb], NB_ROOT, "smoke")
    tables = fedrepro.papers.paper("fedpft").TABLES
    expected = {c.hash() for t in ("con", "two_stage") for c in tables[t].configs("smoke")}
    assert set(p.runs) == expected


def test_need_takes_one_source():
    with pytest.raises(ConfigError, match="exactly one"):
        Need()
    with pytest.raises(ConfigError, match="exactly one"):
        Need("probe", runs=lambda p: [])
    with pytest.raises(ConfigError, match="no such table"):
        Need("no_such_table").configs("fedpft", "smoke")


def test_a_missing_entry_is_named(tmp_path):
    folder = tmp_path / "notebooks" / "fedpft"
    folder.mkdir(parents=True)
    nb = folder / "42_new.ipynb"
    nb.write_text("{}")
    with pytest.raises(ConfigError, match="42_new.ipynb has no entry in fedrepro.papers.fedpft.NOTEBOOKS"):
        needs_of(nb, tmp_path / "notebooks")


# --- the pool ---------------------------------------------------------------------------------

def test_estimate_grows_with_the_work(tiny):
    base = tiny()
    assert estimate_cost(base.replace(**{"train.rounds": 6})) > estimate_cost(base)
    assert estimate_cost(base.replace(**{"train.local_epochs": 2})) > estimate_cost(base)
    assert estimate_cost(base.replace(**{"model.name": "tiny_vit", "model.args": {}})) > estimate_cost(base)


def test_pool_trains_each_run_once_then_its_analyses(tiny, tmp_path):
    cfgs = [tiny(seed=s) for s in range(3)]
    report = run_pool(cfgs + cfgs[:1], workers=2, progress=False)
    assert not report.failed
    assert len(report.done) == 3
    assert all(RunStore(c.runs_dir).status(c) == "done" for c in cfgs)
    again = run_pool(cfgs, workers=2, progress=False)
    assert again.skipped == 3 and not again.done


def test_pool_takes_a_plans_mappings_and_reports_worker_memory(tiny):
    cfgs = {c.hash(): c for c in (tiny(seed=s) for s in range(2))}
    h = next(iter(cfgs))
    report = run_pool(cfgs, {("linear_probe:features", h): cfgs[h]}, workers=2, progress=False,
                      pending=set(cfgs), analyze=analyze)
    assert not report.failed
    assert set(report.done) == {*cfgs, f"linear_probe:features:{h}"}
    for mem in report.memory.values():
        assert 0 < mem["rss_mib"] <= mem["max_rss_mib"]


def test_pool_makes_at_most_calls_at_once_calls_together():
    import threading
    import time

    from fedrepro.execute.local import Task

    lock, now, most = threading.Lock(), [0], [0]

    def call():
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.2)
        with lock:
            now[0] -= 1
        return 0.2

    calls = [Task(f"c{i}", call=call) for i in range(4)]
    assert not run_pool([], workers=2, progress=False, calls=calls, calls_at_once=1).failed
    assert most[0] == 1
    run_pool([], workers=2, progress=False, calls=[Task(f"d{i}", call=call) for i in range(4)])
    assert most[0] == 2


def test_a_task_starts_after_the_tasks_it_waits_for_done_or_failed():
    from fedrepro.execute.local import Task

    order = []

    def call(name, fail=False):
        def go():
            order.append(name)
            if fail:
                raise RuntimeError(name)
            return 0.0
        return go

    calls = [Task("b", call=call("b"), after=frozenset({"a"}), cost=100.0), Task("a", call=call("a", fail=True)),
             Task("c", call=call("c"), deps=frozenset({"a"})), Task("d", call=call("d"), after=frozenset({"b"}))]
    report = run_pool([], workers=2, progress=False, calls=calls)
    assert order == ["a", "b", "d"]  # b, the longest, waits for a; d for b; c needs a, which failed
    assert set(report.failed) == {"a", "c"} and set(report.done) == {"b", "d"}


def test_the_scheduling_process_imports_no_torch():
    # fedrepro reproduce's own process only schedules: planning runs in a child (reproduce._planned)
    code = ("import sys, fedrepro, fedrepro.app.cli, fedrepro.app.reproduce, fedrepro.execute.local, "
            "fedrepro.papers.plan, fedrepro.env.host; "
            "assert 'torch' not in sys.modules, 'torch imported'; fedrepro.run; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_pool_handed_its_gpus_trains_auto_device_runs_without_torch_in_the_scheduler(tiny, tmp_path):
    # fedrepro reproduce hands run_pool the cards its planner found (run_pool(gpus=)); without them
    # run_pool would look for cards itself, loading torch in the scheduling process for device=auto.
    # The config arrives as the planner sends it: hashed (which loads the registries, and torch with
    # them) and pickled with its hash.
    cfg = tiny(device="auto")
    cfg.hash()
    code = ("import pickle, sys; from fedrepro.execute.local import gpus_of, run_pool; "
            f"cfg = pickle.loads({pickle.dumps(cfg)!r}); assert 'torch' not in sys.modules; "
            "report = run_pool([cfg], workers=1, progress=False, gpus=[]); "
            "assert not report.failed, report.failed; assert 'torch' not in sys.modules, 'torch imported'; "
            "gpus_of([cfg]); assert 'torch' in sys.modules")  # the check can fail: finding cards loads torch
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert len(list((tmp_path / "runs").glob("*/summary.json"))) == 1


def test_a_config_keeps_its_hash_through_pickling_and_recomputes_it_when_a_field_changes(tiny):
    cfg = tiny()
    h = cfg.hash()
    back = pickle.loads(pickle.dumps(cfg))  # unsafe-load-ok: its own pickle of a config, in-process
    assert back == cfg and back.hash() == h and back.to_dict() == cfg.to_dict()
    back.seed = 7  # a config is not frozen: the kept hash must not outlive a change
    assert back.hash() == tiny(seed=7).hash() != h


def test_pool_reports_a_failed_task_and_keeps_the_rest(tiny):
    good = tiny(seed=0)
    bad = tiny(seed=1, **{"data.num_clients": 100})  # 240 images cannot give 100 clients 5 each
    report = run_pool([good, bad], analyses=[("linear_probe:features", bad)], workers=2, progress=False,
                      analyze=analyze)
    assert RunStore(good.runs_dir).status(good) == "done"
    assert set(report.failed) == {bad.hash(), f"linear_probe:features:{bad.hash()}"}
    assert "PartitionError" in report.failed[bad.hash()]
    with pytest.raises(Exception, match="unknown analysis"):
        check_cached(["nope"])
    with pytest.raises(Exception, match="needs analyze="):
        run_pool([good], analyses=[("linear_probe:features", good)], workers=1, progress=False)


# --- one config, one result -------------------------------------------------------------------

def _conv(tiny, **kw):
    # a conv model, whose CPU kernels split their sums by thread count
    return tiny(**{"model.name": "resnet8", "model.args": {"width": 8}}, **kw)


def test_the_run_trains_at_its_own_thread_count(tiny):
    seen = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for threads in (1, 3):
            cfg = _conv(tiny, threads=threads, seed=threads)
            res = fedrepro.run(cfg, on_round_end=lambda s: seen.append(torch.get_num_threads()))
            assert res.meta["torch_threads"] == threads
            assert seen[-1] == threads
            assert torch.get_num_threads() == 2  # the caller's count is restored
    finally:
        torch.set_num_threads(before)
    assert _conv(tiny, threads=1).hash() != _conv(tiny, threads=2).hash()


def _rows(path: Path) -> list[dict]:
    rounds = fedrepro.RunResult(path).rounds
    return rounds.drop(columns=[c for c in rounds if c.startswith("time_")]).to_dict("records")


def test_one_config_gives_the_same_numbers_from_every_launcher(tiny, tmp_path):
    """In-process (caller at 2 threads), a pool worker, run_grid's workers and the CLI."""
    cfg = _conv(tiny)
    results = {}
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        results["in-process"] = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "a"))).path
    finally:
        torch.set_num_threads(before)
    pooled = cfg.replace(runs_dir=str(tmp_path / "b"))
    assert not run_pool([pooled], workers=1, progress=False).failed
    results["pool"] = RunStore(pooled.runs_dir).path(pooled)
    grid_base = cfg.replace(runs_dir=str(tmp_path / "c"))
    table = run_grid(grid_base, {"seed": [cfg.seed, cfg.seed + 1]}, progress=False, workers=2)
    results["run_grid workers"] = Path(table.path.iloc[0])
    yml = tmp_path / "cfg.yaml"
    yml.write_text(yaml.safe_dump({k: v for k, v in cfg.to_dict().items() if k != "profile"}
                                  | {"runs_dir": str(tmp_path / "d")}))
    out = subprocess.run([sys.executable, "-m", "fedrepro.app.cli", "run", "--profile", cfg.profile, "--config",
                          str(yml)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    results["cli"] = Path(out.stdout.strip().splitlines()[-1].removeprefix("results: "))
    assert len({p.name for p in results.values()}) == 1  # one config, one folder name
    reference = _rows(results["in-process"])
    for launcher, path in results.items():
        assert _rows(path) == reference, launcher
        assert fedrepro.RunResult(path).meta["torch_threads"] == 1, launcher


# --- the trace --------------------------------------------------------------------------------

def test_trace_records_runs_and_figures(tiny, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from fedrepro.app.figures import savefig

    log = tmp_path / "trace.jsonl"
    monkeypatch.setenv(trace.ENV, str(log))
    monkeypatch.setenv("FEDREPRO_FIGURES", str(tmp_path / "figs"))
    cfg = tiny()
    fedrepro.run(cfg)
    fedrepro.run(cfg)
    fig = plt.figure()
    savefig(fig, "x", "smoke")
    plt.close(fig)
    events = trace.read(log)
    assert [(e["event"], e.get("trained")) for e in events] == [("run", True), ("run", False), ("figure", None)]
    assert events[0]["hash"] == cfg.hash()
    with open(log, "a") as f:
        f.write('{"event": "run", "ha')  # a line torn by a crash is skipped
    assert len(trace.read(log)) == 3


def test_reproduce_plan_only_lists_without_training(tmp_path, monkeypatch):
    from fedrepro.app.reproduce import reproduce

    monkeypatch.setenv("FEDREPRO_RUNS", str(tmp_path / "runs"))
    report = reproduce("smoke", only="fedpft/04", plan_only=True)
    assert report["runs"] == report["to_train"] > 0
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_reproduce_plans_a_tuned_tables_search_first_and_says_which_notebooks_wait(tmp_path, monkeypatch):
    from fedrepro.papers import paper
    from fedrepro.app.reproduce import reproduce

    monkeypatch.setenv("FEDREPRO_RUNS", str(tmp_path / "runs"))
    report = reproduce("smoke", only="pfedcspc/01", plan_only=True)
    assert report["waiting_for_searches"] == ["pfedcspc/01_global_and_personalized.ipynb"]
    # Before its search is stored the notebook's plan holds the search runs only.
    table = paper("pfedcspc").TABLES["main_default"]
    assert report["runs"] == len(table.search_configs("smoke")) > 0
    # ... and counts the rows the search tunes, one run each, as runs still to come.
    assert report["runs_after_searches"] == len({c.hash() for c in table.configs("smoke", tuned=False)}) > 0


def test_an_unseen_kind_of_run_is_timed_like_its_own_method_first(tiny):
    from fedrepro.execute.local import Task, _Calibration

    cal = _Calibration()
    cheap, costly = tiny(**{"method.name": "fedavg"}), tiny(**{"method.name": "fedpft_con"})
    cal.add(Task("a", cheap, cost=100.0), 1.0)     # 0.01 s per unit
    cal.add(Task("b", costly, cost=100.0), 30.0)   # 0.3 s per unit
    longer = costly.replace(**{"train.rounds": costly.train.rounds + 1})  # a kind not seen yet
    assert cal.seconds(Task("c", longer, cost=10.0)) == pytest.approx(3.0)  # its method's rate
    other = tiny(**{"method.name": "fedper"})  # no run of its method yet: the median of all runs
    assert cal.seconds(Task("d", other, cost=10.0)) == pytest.approx(10.0 * (0.01 + 0.3) / 2)
