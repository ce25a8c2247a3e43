"""``fedrepro runs``, ``show``, ``describe``, ``list -v``, ``--version`` and the CSV export, on a
small store trained here: four finished runs and one interrupted after its first round."""
import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import fedrepro
from fedrepro.runs.catalog import list_runs, resolve_run
from fedrepro.app.cli import main
from fedrepro.errors import ConfigError
from support import tiny_config

ROOT = Path(__file__).resolve().parent.parent


class _Stop(Exception):
    pass


def _stop(state):
    raise _Stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """``(runs_dir, {name: config})``: fedavg seeds 0 and 1; fedprox μ=0.1 at α=0.1; fedprox at its
    default μ under the laptop profile; fedper stopped after round 1 of 3 (interrupted)."""
    tmp = tmp_path_factory.mktemp("catalog")
    cfgs = {
        "avg0": tiny_config(tmp, **{"method.name": "fedavg"}),
        "avg1": tiny_config(tmp, **{"method.name": "fedavg", "seed": 1}),
        "prox": tiny_config(tmp, **{"method.name": "fedprox", "method.args": {"mu": 0.1},
                                    "data.partition_args.alpha": 0.1}),
        "prox_laptop": tiny_config(tmp, **{"method.name": "fedprox", "profile": "laptop", "train.rounds": 2}),
        "per": tiny_config(tmp, **{"method.name": "fedper"}),
    }
    for name, cfg in cfgs.items():
        if name == "per":
            with pytest.raises(_Stop):
                fedrepro.run(cfg, on_round_end=_stop)
        else:
            fedrepro.run(cfg)
    return tmp / "runs", cfgs


def _rows(out: str) -> dict[str, str]:
    """The runs table's lines by their (shortened) hash."""
    lines = out.strip().splitlines()
    assert lines[0].split()[:3] == ["hash", "method", "dataset"]
    return {ln.split()[0]: ln for ln in lines[1:-1]}


def _row_of(rows: dict[str, str], cfg) -> str:
    found = [ln for h, ln in rows.items() if cfg.hash().startswith(h)]
    assert len(found) == 1, (cfg.hash(), rows)
    return found[0]


def test_runs_lists_every_run_with_status_rounds_and_accuracy(store, capsys):
    runs_dir, cfgs = store
    assert main(["runs", "--runs-dir", str(runs_dir)]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert len(rows) == 5 and "5 runs (4 finished, 1 interrupted)" in out
    best = fedrepro.RunResult(runs_dir / cfgs["avg1"].hash()).summary["best_acc_mean"]
    line = _row_of(rows, cfgs["avg1"])
    assert line.split()[1:3] == ["fedavg", "synthetic"] and "dirichlet α=0.5" in line
    assert " finished " in line and " 3/3 " in line and f"{100 * best:.2f}" in line.split()
    per = _row_of(rows, cfgs["per"])
    assert " interrupted " in per and " ?/3 " in per
    assert " laptop " in _row_of(rows, cfgs["prox_laptop"]) and " 2/2 " in _row_of(rows, cfgs["prox_laptop"])


@pytest.mark.parametrize("args, expect", [
    (["--method", "fedavg"], {"avg0", "avg1"}),
    (["--method", "fedavg,fedper"], {"avg0", "avg1", "per"}),
    (["--status", "interrupted"], {"per"}),
    (["--profile", "laptop"], {"prox_laptop"}),
    (["--where", "data.partition_args.alpha=0.1"], {"prox"}),
    (["--where", "seed=1"], {"avg1"}),
    (["--where", "method.args.mu=0.1"], {"prox"}),
    # μ left at its default is stored as {} and matched through FedProx's Params
    (["--where", "method.args.mu=0.01"], {"prox_laptop"}),
    (["--method", "fedprox", "--where", "train.rounds=3"], {"prox"}),
])
def test_runs_filters(store, capsys, args, expect):
    runs_dir, cfgs = store
    assert main(["runs", "--runs-dir", str(runs_dir), *args]) == 0
    rows = _rows(capsys.readouterr().out)
    assert {name for name, c in cfgs.items() if any(c.hash().startswith(h) for h in rows)} == expect


@pytest.mark.parametrize("args, needle", [
    (["--where", "trian.rounds=3"], "trian.rounds"),
    (["--where", "train.rounds"], "key=value"),
    (["--status", "done"], "valid: finished, diverged"),
    (["--sort", "nope"], "cannot sort by 'nope'"),
    (["--per-round"], "add --csv FILE"),
])
def test_runs_bad_input_is_a_clear_error(store, capsys, args, needle):
    assert main(["runs", "--runs-dir", str(store[0]), *args]) == 2
    assert needle in capsys.readouterr().err


def test_runs_in_a_missing_folder_or_with_no_match(store, tmp_path, capsys):
    assert main(["runs", "--runs-dir", str(tmp_path / "none")]) == 0
    assert "no runs folder at" in capsys.readouterr().out
    assert main(["runs", "--runs-dir", str(store[0]), "--method", "moon"]) == 0
    assert "no stored run matches" in capsys.readouterr().out


def test_list_runs_api_and_sorting(store):
    runs_dir, cfgs = store
    table = fedrepro.list_runs(runs_dir, sort="-best_acc_mean")
    assert list(table.columns[:4]) == ["hash", "method", "dataset", "partition"]
    finished = table[table["status"] == "finished"]
    assert finished["best_acc_mean"].is_monotonic_decreasing and len(finished) == 4
    row = table.set_index("hash").loc[cfgs["prox"].hash()]
    res = fedrepro.RunResult(runs_dir / cfgs["prox"].hash())
    assert row["best_acc_mean"] == res.summary["best_acc_mean"] and row["rounds_done"] == 3
    assert row["partition_key"] == "α=0.1" and row["profile"] == "smoke"
    with_cfg = list_runs(runs_dir, where=["method.name=fedprox"], config_columns=True)
    assert set(with_cfg["cfg.method.args.mu"].dropna()) == {0.1}
    assert list_runs(runs_dir / "missing").empty


def test_runs_sorted_descending_from_the_cli(store, capsys):
    assert main(["runs", "--runs-dir", str(store[0]), "--status", "finished", "--sort=-best"]) == 0
    rows = _rows(capsys.readouterr().out)
    best = [float(ln.split()[-2]) for ln in rows.values()]
    assert len(best) == 4 and best == sorted(best, reverse=True)


def test_listing_does_not_import_torch(store):
    code = ("import sys, fedrepro; from fedrepro.app.cli import main; "
            f"assert len(fedrepro.list_runs({str(store[0])!r})) == 5; "
            f"main(['runs', '--runs-dir', {str(store[0])!r}, '--csv', '-', '--per-round']); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)


def test_csv_export_per_run_and_per_round(store, tmp_path, capsys):
    runs_dir, cfgs = store
    f = tmp_path / "runs.csv"
    assert main(["runs", "--runs-dir", str(runs_dir), "--method", "fedavg", "--csv", str(f)]) == 0
    table = pd.read_csv(f)
    assert sorted(table["hash"]) == sorted(c.hash() for n, c in cfgs.items() if n.startswith("avg"))
    for h, best in zip(table["hash"], table["best_acc_mean"]):
        assert best == fedrepro.RunResult(runs_dir / h).summary["best_acc_mean"]  # full precision
    assert not list(tmp_path.glob(".*.tmp"))  # written through a temporary file, renamed
    assert main(["runs", "--runs-dir", str(runs_dir), "--csv", str(f), "--per-round"]) == 0
    rounds = pd.read_csv(f)
    # 3 rounds for each finished smoke run, 2 for the laptop one; the interrupted run has none stored
    assert len(rounds) == 3 * 3 + 2
    assert list(rounds.columns[:9]) == ["hash", "method", "dataset", "partition", "partition_key", "seed",
                                        "profile", "status", "round"]
    prox = rounds[rounds["hash"] == cfgs["prox"].hash()]
    stored = fedrepro.RunResult(runs_dir / cfgs["prox"].hash()).rounds
    assert list(prox["round"]) == [1, 2, 3] and list(prox["acc_mean"]) == list(stored["acc_mean"])
    capsys.readouterr()
    assert main(["runs", "--runs-dir", str(runs_dir), "--csv", str(tmp_path / "no" / "x.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_show_a_run_by_prefix(store, capsys):
    runs_dir, cfgs = store
    h = cfgs["prox"].hash()
    assert main(["show", h[:6], "--runs-dir", str(runs_dir)]) == 0
    out = capsys.readouterr().out
    res = fedrepro.RunResult(runs_dir / h)
    assert f"run {h}" in out and "status:    finished" in out and "seed: 0" in out
    assert f"fedrepro {res.meta['fedrepro']}" in out and f"torch {res.meta['torch']}" in out
    assert "args={mu: 0.1}" in out and "partition_args={alpha: 0.1" in out
    table = out.split("per round (accuracies in %):\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split()[:3] == ["round", "acc_mean", "acc_weighted"]
    assert [ln.split()[0] for ln in table[1:]] == ["1", "2", "3"]
    assert table[3].split()[1] == f"{100 * res.rounds['acc_mean'].iloc[2]:.2f}"
    assert "at round 3, 4 clients" in out


def test_show_an_interrupted_run_reads_its_checkpoint(store, capsys):
    runs_dir, cfgs = store
    assert main(["show", cfgs["per"].hash(), "--runs-dir", str(runs_dir)]) == 0
    out = capsys.readouterr().out
    assert "status:    interrupted" in out and "rounds:    1/3 (from its checkpoint)" in out
    assert "(round 1)" in out and "final: -" in out  # the best so far; no final round yet


def test_show_ambiguous_and_unknown_prefixes(store, tmp_path, capsys):
    src = store[0] / store[1]["avg0"].hash()
    for name in ("abc1000000000000", "abc2000000000000"):
        shutil.copytree(src, tmp_path / name)
    assert main(["show", "abc", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "ambiguous" in err and "abc1000000000000" in err and "abc2000000000000" in err
    assert resolve_run("abc2", tmp_path).name == "abc2000000000000"
    assert main(["show", "ffff", "--runs-dir", str(tmp_path)]) == 2
    assert "no run in" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="hex digits"):
        resolve_run("runs?", tmp_path)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("fedrepro ") and "torch " in out
    if (ROOT / ".git").exists():
        commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        assert f"git {commit}" in out


def test_every_subcommand_and_flag_has_help(capsys):
    import argparse

    from fedrepro.app import cli

    seen = {}

    def capture(self, *a, **kw):  # the parser main() builds, without running a command
        seen["parser"] = self
        raise SystemExit(0)

    orig = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = capture
    try:
        with pytest.raises(SystemExit):
            cli.main(["runs"])
    finally:
        argparse.ArgumentParser.parse_args = orig
    parser = seen["parser"]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"run", "list", "describe", "runs", "show", "reproduce", "results", "verify", "pretrain"} <= set(sub.choices)
    helps = {c.dest: c.help for c in sub._choices_actions}
    for name, p in sub.choices.items():
        assert helps.get(name), f"{name} has no help"
        for action in p._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"fedrepro {name} {action.option_strings or action.dest} has no help"
    assert "fedrepro show" in parser.epilog


def test_describe_reads_parameters_from_the_params_dataclass(capsys):
    from fedrepro.methods.fedprox import FedProxParams

    assert main(["describe", "fedprox"]) == 0
    out = capsys.readouterr().out
    default = dataclasses.fields(FedProxParams)[0].default
    assert "method fedprox" in out and "paper:   Li et al., MLSys 2020" in out
    assert any(ln.split()[:4] == ["mu", "float", "=", str(default)] and "valid: a number >= 0" in ln
               for ln in out.splitlines())
    assert main(["describe", "dirichlet"]) == 0
    out = capsys.readouterr().out
    assert "partition dirichlet" in out and "(required)" in out  # alpha has no default
    assert main(["describe", "fedprxo"]) == 2
    assert "did you mean fedprox" in capsys.readouterr().err


def test_list_verbose_describes_every_method(capsys):
    from fedrepro.methods import METHODS

    assert main(["list", "methods", "-v"]) == 0
    out = capsys.readouterr().out
    heads = [ln.split(":")[0] for ln in out.splitlines() if ln and not ln.startswith(" ")]
    assert heads == METHODS.names()
    pft = out.split("\nfedpft:")[1].split("\nfedpft_con:")[0]
    for f in dataclasses.fields(METHODS.get("fedpft").Params):
        assert f"      {f.name} " in pft


def test_run_says_reused_and_a_notebook_stays_quiet(tmp_path, capsys):
    args = ["run", "--profile", "smoke", "--dataset", "synthetic", "--set", "model.name=mlp",
            "--set", "data.partition=dirichlet", "--set", "data.partition_args={alpha: 1.0, min_size: 5}",
            "--set", "train.rounds=1", "--set", f"runs_dir={tmp_path}", "--set", "progress=false"]
    assert main(args) == 0
    first = capsys.readouterr()
    assert "fedrepro: reused" not in first.err and "mean client accuracy: best" in first.out
    assert main(args) == 0
    second = capsys.readouterr()
    folder = first.out.split("results: ")[1].strip()
    assert second.err.count("fedrepro: reused") == 1 and f"fedrepro: reused {folder} " in second.err
    res = fedrepro.run(fedrepro.RunResult(folder).config)  # the library at the default logging level
    assert res.path.name == Path(folder).name
    assert "fedrepro: reused" not in capsys.readouterr().err


def test_output_cut_by_a_closed_pipe_ends_quietly():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "fedrepro.app.cli", "list", "methods", "-v"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the first line is written
    err = p.stderr.read().decode()
    assert p.wait() == 141 and "Traceback" not in err and "BrokenPipe" not in err


def test_run_grid_draws_one_labelled_bar(tiny, capsys):
    from fedrepro.execute.grid import _point_label

    assert _point_label(None, {"method.name": "fedper", "data.partition_args.alpha": 0.1}, 2) == "fedper α=0.1 s2"
    assert _point_label("II", {"train.rounds": 5}, 0) == "II rounds=5 s0"
    # the runs would draw their own round bars (progress=true in their config)
    fedrepro.run_grid(tiny(progress=True), {"method.name": ["fedavg", "local"], "data.partition_args.alpha": [0.5]},
                      progress=True)
    err = capsys.readouterr().err
    assert "grid" in err and "local α=0.5 s0" in err
    assert "/3 [" not in err  # no run's own bar over its 3 rounds


def test_show_thins_a_long_run_keeping_the_best_and_last_rounds():
    from fedrepro.app.cli_runs import format_rounds

    rounds = pd.DataFrame({"round": range(1, 101), "acc_mean": [i / 200 for i in range(100)]})
    rounds.loc[36, "acc_mean"] = 0.99  # round 37, between two of the evenly spaced rows
    lines = format_rounds(rounds, best_round=37).splitlines()
    shown = [int(ln.split()[0]) for ln in lines[1:-1]]
    assert len(shown) == 20 and {1, 37, 100} <= set(shown) and "20 of 100 rounds" in lines[-1]
    assert len(format_rounds(rounds, best_round=37, every=True).splitlines()) == 101


def test_runs_that_look_alike_show_the_config_values_that_differ(tmp_path, capsys):
    """Two runs equal in every listed column (method, data, partition, seed, profile) get a column
    for the config value that tells them apart; a listing of unlike runs gets none."""
    a = tiny_config(tmp_path, **{"method.name": "fedavg", "train.lr": 0.05})
    b = tiny_config(tmp_path, **{"method.name": "fedavg", "train.lr": 0.01})
    for c in (a, b):
        fedrepro.run(c)
    runs_dir = tmp_path / "runs"
    assert main(["runs", "--runs-dir", str(runs_dir)]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert "train.lr" in header
    assert {_row_of(_rows(out), a).split()[-1], _row_of(_rows(out), b).split()[-1]} == {"0.05", "0.01"}
    assert main(["runs", "--runs-dir", str(runs_dir), "--where", "train.lr=0.05"]) == 0
    assert "train.lr" not in capsys.readouterr().out.splitlines()[0].split()
