"""Every file a CLI command reads is verified: each one, truncated, emptied or with bytes flipped,
gives a one-line error that names it (exit 2) or is listed as damaged, never a traceback and never
a result made from it."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

import fedrepro
from fedrepro.papers.verdicts import registered
from fedrepro.claims import save_claims
from fedrepro.app.cli import main
from fedrepro.errors import CorruptCacheError
from fedrepro.runs.store import FINISHED_FILES
from support import interrupt_at, tiny_config

WAYS = ("truncated", "emptied", "flipped")


def corrupt(f: Path, way: str) -> None:
    """Damage ``f`` in place: cut it in half, empty it, or flip 8 bytes spread over it (same size)."""
    f.chmod(0o644)
    data = f.read_bytes()
    if way == "truncated":
        data = data[: len(data) // 2]
    elif way == "emptied":
        data = b""
    else:
        b = bytearray(data)
        for k in range(1, 9):
            b[k * len(b) // 9] ^= 0xFF
        data = bytes(b)
    f.write_bytes(data)


def _one_line_error(capsys, rc: int, needle: str) -> str:
    out = capsys.readouterr()
    err = out.err.strip()
    assert rc == 2, (rc, out.out[-2000:], err[-2000:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert needle in err, err
    return err


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished run and an interrupted one (2 of 3 rounds), as folders to copy."""
    root = tmp_path_factory.mktemp("made")
    done = tiny_config(root)
    fedrepro.run(done)
    cut = tiny_config(root, seed=1)
    interrupt_at(cut, 2)
    return root / "runs", done, cut


def _copy(made, tmp_path) -> tuple[Path, object, object]:
    runs, done, cut = made
    dest = tmp_path / "runs"
    shutil.copytree(runs, dest, ignore=shutil.ignore_patterns(".locks"))
    for p in dest.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest, done.replace(runs_dir=str(dest)), cut.replace(runs_dir=str(dest))


def _config_file(tmp_path, cfg) -> str:
    f = tmp_path / "cfg.yaml"
    f.write_text(yaml.safe_dump(cfg.to_dict()))
    return str(f)


# Files that the cheap checks of a listing cover whatever the damage; the others (large) by size,
# so bytes flipped in them are found only where they are read in full.
LISTED_BY_HASH = ("config.json", "meta.json", "rounds.jsonl", "summary.json")


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name", FINISHED_FILES)
def test_a_damaged_file_of_a_finished_run(made, tmp_path, capsys, name, way):
    runs, cfg, _ = _copy(made, tmp_path)
    folder = runs / cfg.hash()
    corrupt(folder / name, way)
    listed = way != "flipped" or name in LISTED_BY_HASH

    # fedrepro runs: damaged, not finished
    assert main(["runs", "--runs-dir", str(runs), "--csv", "-"]) == 0
    table = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    status = dict(zip(table["hash"], table["status"]))[cfg.hash()]
    assert status == "damaged" if listed else status in ("damaged", "finished"), status

    # fedrepro show: the status and why, no traceback
    assert main(["show", cfg.hash()[:8], "--runs-dir", str(runs)]) == 0
    shown = capsys.readouterr().out
    if listed or name in ("rounds.jsonl", "clients.jsonl"):  # show reads these two whole
        assert "status:    damaged" in shown and "WARNING" in shown, shown

    # fedrepro run (reuse): a one-line error naming the file; never a result from it
    rc = main(["run", "--config", _config_file(tmp_path, cfg)])
    if name == "final_state.pt" and way == "flipped":  # reuse does not read it (only analyses do) ...
        assert rc == 0
        capsys.readouterr()
        with pytest.raises(CorruptCacheError, match="final_state.pt"):  # ... which check its hash
            fedrepro.run(cfg).final_state()
    else:
        _one_line_error(capsys, rc, str(folder))

    # fedrepro verify: damaged, naming the run's file (not a scratch folder), exit 2, nothing trained
    rc = main(["verify", "--runs-dir", str(runs)])
    out = capsys.readouterr()
    assert rc == 2 and "Traceback" not in out.err, out.err
    line = next(ln for ln in out.out.splitlines() if ln.startswith(cfg.hash()))
    assert "damaged" in line and str(folder) in line and "fedrepro-verify-" not in line, line


def test_verify_of_an_edited_config_names_the_run(made, tmp_path, capsys):
    runs, cfg, _ = _copy(made, tmp_path)
    f = runs / cfg.hash() / "config.json"
    stored = json.loads(f.read_text())
    stored["config"]["train"]["lr"] = 0.5
    f.write_text(json.dumps(stored))
    assert main(["verify", "--runs-dir", str(runs)]) == 2
    out = capsys.readouterr().out
    assert f"{cfg.hash()}: damaged" in out and str(f) in out and "fedrepro-verify-" not in out


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name", ["checkpoint.pt", "config.json", "meta.json"])
def test_a_damaged_file_of_an_unfinished_run_stops_its_resume(made, tmp_path, capsys, name, way):
    runs, _, cfg = _copy(made, tmp_path)
    folder = runs / cfg.hash()
    corrupt(folder / name, way)
    _one_line_error(capsys, main(["run", "--config", _config_file(tmp_path, cfg)]), name)
    assert not (folder / "summary.json").exists()  # not stored as finished (nor as diverged)
    assert main(["show", cfg.hash()[:8], "--runs-dir", str(runs)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_flipped_checkpoint_is_caught_and_deleting_it_restarts_cleanly(made, tmp_path):
    runs, _, cfg = _copy(made, tmp_path)
    ckpt = runs / cfg.hash() / "checkpoint.pt"
    data = bytearray(ckpt.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit, same size: what a torch.load alone would not notice
    ckpt.write_bytes(bytes(data))
    with pytest.raises(CorruptCacheError, match="sha256"):
        fedrepro.run(cfg)
    ckpt.unlink()
    res = fedrepro.run(cfg)
    assert res.summary["rounds"] == cfg.train.rounds and "diverged_round" not in res.summary


def test_tampered_runs_from_the_issue_are_listed_damaged(made, tmp_path, capsys):
    runs, cfg, _ = _copy(made, tmp_path)
    src = runs / cfg.hash()
    cases = {}
    for case in ("empty_summary", "edited_summary", "tiny_state", "copied"):
        name = {"empty_summary": "a" * 16, "edited_summary": "b" * 16, "tiny_state": "c" * 16}.get(case, "d" * 16)
        shutil.copytree(src, runs / name)
        cases[case] = runs / name
    shutil.rmtree(src)  # the copies stand alone
    (cases["empty_summary"] / "summary.json").write_text("{}")
    s = json.loads((cases["edited_summary"] / "summary.json").read_text())
    s["best_acc_mean"] = 0.99
    (cases["edited_summary"] / "summary.json").write_text(json.dumps(s))
    (cases["tiny_state"] / "final_state.pt").write_bytes(b"7 bytes")
    # "copied": a finished run under another config's hash, every file intact
    table = fedrepro.list_runs(runs)
    table = table[table["hash"].isin([p.name for p in cases.values()])]
    assert list(table["status"]) == ["damaged"] * 4
    assert table["best_acc_mean"].isna().all()  # a tampered summary's numbers are not shown
    for folder in cases.values():
        assert main(["show", folder.name, "--runs-dir", str(runs)]) == 0
        assert "status:    damaged" in capsys.readouterr().out


def test_a_symlink_loop_in_the_runs_folder_is_skipped_and_reported(made, tmp_path, capsys, caplog):
    runs, cfg, _ = _copy(made, tmp_path)
    (runs / "loop_a").symlink_to(runs / "loop_b")
    (runs / "loop_b").symlink_to(runs / "loop_a")
    (runs / cfg.hash() / "self").symlink_to(runs / cfg.hash() / "self")
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr()
    assert cfg.hash()[:8] in out.out and "finished" in out.out
    assert "loop_a" in caplog.text and "symbolic links" in caplog.text  # on stderr outside pytest
    assert main(["show", cfg.hash()[:8], "--runs-dir", str(runs)]) == 0
    assert "status:    finished" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# fedrepro results: the claims, verdicts by round and timings it reads


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    claims = registered()
    c = claims.get("tour.local_beats_fedavg_skewed")
    row = {"claim_id": c.id, "paper": c.paper, "source": c.source, "statement": c.statement, "verdict": "FAIL",
           "interval": "-1.00 pts", "evidence": "e"}
    claims_file = save_claims(pd.DataFrame([row]), "00_tour", "smoke")
    by_round = claims_file.parent / "by_round" / "00_tour.json"
    by_round.parent.mkdir()
    by_round.write_text(json.dumps({"notebook": "00_tour", "profile": "smoke",
                                    "verdicts": [{"round": 1, "claim_id": c.id, "verdict": "FAIL"}]}))
    timings = tmp_path / "output" / "smoke" / "notebooks" / "timings.json"
    timings.parent.mkdir(parents=True)
    timings.write_text(json.dumps({"wall_s": 60.0, "cpu_use": 0.9, "cores": 2, "runs_trained": 1, "runs_planned": 1,
                                   "peak_memory_mib": 100, "notebooks": [{"notebook": "00_tour.ipynb",
                                                                          "render_s": 3.0}]}))
    trace = tmp_path / "output" / "trace" / "smoke" / "00_tour.ipynb.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_text(json.dumps({"event": "run", "hash": "0" * 16, "trained": False}) + "\n")
    return {"claims": claims_file, "by_round": by_round, "timings": timings, "trace": trace}


@pytest.mark.parametrize("way", [*WAYS, "{}", "[]"])
@pytest.mark.parametrize("which", ["claims", "by_round", "timings"])
def test_results_names_a_damaged_input_and_what_to_do(recorded, capsys, which, way):
    assert main(["results", "--profile", "smoke"]) == 0  # intact, the pages are written
    capsys.readouterr()
    f = recorded[which]
    if way in ("{}", "[]"):
        f.write_text(way)
    else:
        corrupt(f, way)
    err = _one_line_error(capsys, main(["results", "--profile", "smoke"]), str(f))
    assert "fedrepro reproduce" in err or "delete it" in err


@pytest.mark.parametrize("way", WAYS)
def test_results_reads_past_a_damaged_trace(recorded, capsys, way):
    # A trace is a log whose last line a crash may tear: what is unreadable in it is skipped.
    corrupt(recorded["trace"], way)
    assert main(["results", "--profile", "smoke"]) == 0
    assert "Traceback" not in capsys.readouterr().err


# A field of the wrong type in a recorded file, at (file, path to the field, value): each was met as a
# TypeError deep in the pages (or written to them as is), before the readers named every field they read.
WRONG_FIELDS = [
    ("claims", ("claims", 0, "verdict"), "MAYBE"),
    ("claims", ("claims", 0, "interval"), 3),
    ("claims", ("claims", 0, "seeds"), [0, "1"]),
    ("claims", ("claims", 0, "max_seeds"), True),
    ("claims", ("claims", 0, "runs"), 5),
    ("by_round", ("verdicts", 0, "verdict"), "MAYBE"),
    ("by_round", ("verdicts", 0, "round"), "1"),
    ("timings", ("commit",), 7),
    ("timings", ("cpu",), 5),
    ("timings", ("n_notebooks",), "x"),
    ("timings", ("notebooks", 0, "runs"), "x"),
]


@pytest.mark.parametrize("which, path, value", WRONG_FIELDS, ids=lambda x: x if isinstance(x, str) else None)
def test_results_names_a_field_of_the_wrong_type(recorded, capsys, which, path, value):
    f = recorded[which]
    record = json.loads(f.read_text())
    if which == "claims":
        record["claims"][0].update(seeds=[0, 1, 2], max_seeds=3, runs=["0" * 16])  # as save_claims writes them
        f.write_text(json.dumps(record))
        assert main(["results", "--profile", "smoke"]) == 0
        capsys.readouterr()
    *parents, key = path
    holder = record
    for p in parents:
        holder = holder[p]
    holder[key] = value
    f.write_text(json.dumps(record))
    err = _one_line_error(capsys, main(["results", "--profile", "smoke"]), str(f))
    assert f"{key}={value!r}" in err


@pytest.mark.parametrize("mutate, named", [
    (lambda c: c["step_times"]["resnet8"].update(step_s="x"), "step_times['resnet8'] has step_s='x'"),
    (lambda c: c["gpu"].update(step_times=5), "gpu has step_times=5"),
    (lambda c: c["notebooks"][0].update(models="resnet8"), "notebooks[0] has models='resnet8'"),
    (lambda c: c["notebooks"][0].update(cpu_hours="many"), "notebooks[0] has cpu_hours='many'"),
])
def test_a_cost_file_names_its_innermost_damaged_field(tmp_path, mutate, named):
    """The paper-scale cost table every results page prints (bench/paper_cost.json, or a rehearsal's)."""
    from fedrepro.app.rehearsal import COMMITTED_COST, read_cost
    from fedrepro.env.host import repo_root

    cost = json.loads((repo_root() / COMMITTED_COST).read_text())
    assert read_cost(repo_root() / COMMITTED_COST) == cost
    mutate(cost)
    f = tmp_path / "cost.json"
    f.write_text(json.dumps(cost))
    with pytest.raises(CorruptCacheError, match=re.escape(named)):
        read_cost(f)
