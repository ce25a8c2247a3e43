"""fedrepro verify: stored smoke runs trained again in fresh processes, compared metric by metric."""
from __future__ import annotations

import json
import os
import stat

import pytest

from fedrepro.app.cli import main
from fedrepro.errors import ConfigError
from fedrepro.execute.run import run
from fedrepro.app.verify import choose, compare_runs, parse_where, verify


def _alter(path, name, key, delta):
    """Change one stored metric (as a bad disk or a hand edit would)."""
    f = path / name
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    rows[-1][key] += delta
    os.chmod(f, stat.S_IWUSR | stat.S_IRUSR)
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))


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
    assert "1 runs: 1 identical, 0 rounding, 0 different" in capsys.readouterr().out
    assert main(["verify", "--runs-dir", str(runs_dir), "-n", "3"]) == 2  # one differs: a failing exit code


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
