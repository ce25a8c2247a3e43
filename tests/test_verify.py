"""fedrepro verify: stored smoke runs trained again in fresh processes, compared metric by metric."""
from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from fedrepro.app.cli import main
from fedrepro.errors import ConfigError
from fedrepro.execute.run import run
from fedrepro.app.verify import choose, compare_runs, parse_where, verify


def _alter(path, name, key, delta, reseal=True):
    """Change one stored metric. ``reseal``: and record the file's new sha256, as a run stored by
    other code or on another machine would hold it (without, it is damage: a bad disk, a hand edit)."""
    f = path / name
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    rows[-1][key] += delta
    os.chmod(f, stat.S_IWUSR | stat.S_IRUSR)
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if reseal:
        _reseal(path, name)


def _reseal(path, name):
    summary_file = path / "summary.json"
    summary = json.loads(summary_file.read_text())
    record = summary.pop("files_sha256")
    data = (path / name).read_bytes()
    record[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    record["summary.json"] = hashlib.sha256(json.dumps(summary, indent=2, sort_keys=True).encode()).hexdigest()
    os.chmod(summary_file, stat.S_IWUSR | stat.S_IRUSR)
    summary_file.write_text(json.dumps({**summary, "files_sha256": record}, indent=2, sort_keys=True))


def test_verify_finds_identical_runs_and_the_one_that_was_altered(tiny, capsys):
    a, b, c = (run(tiny(seed=s)) for s in range(3))
    _alter(b.path, "rounds.jsonl", "acc_mean", 0.25)
    _alter(c.path, "clients.jsonl", "loss", 1e-12)
    runs_dir = a.path.parent
    out = {v.hash: v for v in verify(choose(runs_dir), workers=2, progress=False)}
    assert out[a.path.name].outcome == "identical" and out[a.path.name].max_diff == 0
    assert out[b.path.name].outcome == "different" and out[b.path.name].max_diff == pytest.approx(0.25)
    assert "acc_mean" in out[b.path.name].worst
    assert out[c.path.name].outcome == "rounding" and "loss" in out[c.path.name].worst
    assert "thread(s)" in out[a.path.name].made_on
    assert main(["verify", "--runs-dir", str(runs_dir), "--where", "seed=0"]) == 0
    assert "1 run: 1 identical, 0 rounding, 0 different" in capsys.readouterr().out
    assert main(["verify", "--runs-dir", str(runs_dir), "-n", "3"]) == 2  # one differs: a failing exit code
    _alter(a.path, "clients.jsonl", "loss", 1e-12, reseal=False)  # damage, not another machine's run
    capsys.readouterr()
    assert main(["verify", "--runs-dir", str(runs_dir), "--where", "seed=0"]) == 2
    assert f"{a.path.name}: damaged" in capsys.readouterr().out


def test_compare_ignores_timings(tiny, tmp_path):
    res = run(tiny())
    _alter(res.path, "rounds.jsonl", "time_train_s", 5.0)
    assert compare_runs(res.path, res.path)[0] == "identical"


def test_bad_selections_are_named(tiny):
    res = run(tiny())
    with pytest.raises(ConfigError, match="key=value"):
        parse_where(["method.name"])
    with pytest.raises(ConfigError, match="no finished run"):
        choose(res.path.parent, {"method.name": "nope"})
    with pytest.raises(ConfigError, match="positive number"):
        choose(res.path.parent, n=0)
    for absent in (res.path.parent / "nowhere", res.path / "config.json"):  # missing, or a file
        with pytest.raises(ConfigError, match="no runs folder at"):
            choose(absent)
