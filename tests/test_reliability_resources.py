"""Resource errors are one-line errors that say what to change (exit 2), and leave the store as it
was: a model too large for memory, a full disk while a checkpoint or the final results are written."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

import fedrepro
from fedrepro.app.cli import main
from fedrepro.runs.store import RunStore


def _cli(tmp_path, cfg, capsys) -> tuple[int, str]:
    f = tmp_path / "cfg.yaml"
    f.write_text(yaml.safe_dump(cfg.to_dict()))
    rc = main(["run", "--config", str(f)])
    return rc, capsys.readouterr().err.strip()


def test_a_model_too_large_for_memory_is_a_one_line_error(tiny, tmp_path, capsys):
    cfg = tiny(**{"model.name": "resnet8", "model.args": {"width": 100000}})
    rc, err = _cli(tmp_path, cfg, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "out of memory" in err and "model.args" in err and "width" in err
    runs = Path(cfg.runs_dir)
    assert not runs.exists() or not [p for p in runs.iterdir() if p.name != ".locks"]  # nothing written


def _full_disk_at(monkeypatch, name: str) -> None:
    """Every write of ``name`` fails as on a full disk (the data is written, its rename refused)."""
    real = os.replace

    def replace(src, dst, *a, **kw):
        if Path(dst).name == name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("name", ["checkpoint.pt", "final_state.pt", "summary.json", "meta.json"])
def test_a_full_disk_is_a_one_line_error_and_the_run_resumes_after(tiny, tmp_path, capsys, monkeypatch, name):
    cfg = tiny()
    with monkeypatch.context() as m:
        _full_disk_at(m, name)
        rc, err = _cli(tmp_path, cfg, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "No space left on device" in err and name in err and "FEDREPRO_RUNS" in err, err
    store = RunStore(cfg.runs_dir)
    folder = store.path(cfg)
    assert store.status(cfg) in ("missing", "partial")  # nothing finished, nothing half-written
    assert not [p for p in Path(cfg.runs_dir).rglob("*.tmp")]
    # With room again the run finishes, with the numbers of a run that never stopped.
    res = fedrepro.run(cfg)
    clean = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "clean")))
    pd.testing.assert_frame_equal(res.rounds.drop(columns=[c for c in res.rounds if c.startswith("time_")]),
                                  clean.rounds.drop(columns=[c for c in clean.rounds if c.startswith("time_")]))
    assert folder.is_dir()
