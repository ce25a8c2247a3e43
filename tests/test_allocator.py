"""The preloaded allocator: its setting, its environment, and the same numbers as glibc's malloc."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import fedrepro
from fedrepro.env import allocator
from fedrepro.errors import ConfigError
from fedrepro.execute.local import run_pool
from fedrepro.runs.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def test_system_means_no_preload():
    assert allocator.library("system") is None
    env = {"PATH": "/bin"}
    assert allocator.child_env(env, "system") == env


@pytest.mark.parametrize("bad", ["tcmallc", "glibc"])
def test_unknown_setting_names_the_variable_and_the_choices(bad):
    with pytest.raises(ConfigError, match=r"FEDREPRO_ALLOCATOR=.*valid: auto, system, tcmalloc, jemalloc"):
        allocator.library(bad)


def test_a_missing_library_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        allocator.library(str(tmp_path / "libnothing.so"))


def test_child_env_prepends_once_and_keeps_other_preloads(tmp_path):
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"")
    env = allocator.child_env({"LD_PRELOAD": "/other.so"}, str(lib))
    assert env["LD_PRELOAD"] == f"{lib}:/other.so"
    assert allocator.child_env(env, str(lib))["LD_PRELOAD"] == env["LD_PRELOAD"]


def test_for_children_restores_the_environment(tmp_path, monkeypatch):
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"")
    monkeypatch.setenv("LD_PRELOAD", "/other.so")
    with allocator.for_children(str(lib)) as got:
        assert got == str(lib)
        assert os.environ["LD_PRELOAD"] == f"{lib}:/other.so"
    assert os.environ["LD_PRELOAD"] == "/other.so"
    monkeypatch.delenv("LD_PRELOAD")
    with allocator.for_children(str(lib)):
        pass
    assert "LD_PRELOAD" not in os.environ


def _rows(path: Path) -> list[dict]:
    rounds = fedrepro.RunResult(path).rounds
    return rounds.drop(columns=[c for c in rounds if c.startswith("time_")]).to_dict("records")


@pytest.mark.skipif(allocator.library("auto") is None, reason="no tcmalloc or jemalloc installed")
def test_preloaded_allocator_gives_the_same_numbers(tiny, tmp_path):
    """A conv run in a child process on the preloaded allocator (CLI), and in a pool worker (which
    preloads it), against this process on its own allocator: bit for bit."""
    if allocator.in_use() != "system":
        pytest.skip("this process already runs on a preloaded allocator: nothing to compare against")
    cfg = tiny(**{"model.name": "resnet8", "model.args": {"width": 8}})
    here = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "a"))).path
    yml = tmp_path / "cfg.yaml"
    yml.write_text(yaml.safe_dump({k: v for k, v in cfg.to_dict().items() if k != "profile"}
                                  | {"runs_dir": str(tmp_path / "b")}))
    out = subprocess.run([sys.executable, "-m", "fedrepro.app.cli", "run", "--profile", cfg.profile, "--config",
                          str(yml)],
                         capture_output=True, text=True, cwd=ROOT, env=allocator.child_env())
    assert out.returncode == 0, out.stderr
    child = Path(out.stdout.strip().splitlines()[-1].removeprefix("results: "))
    pooled = cfg.replace(runs_dir=str(tmp_path / "c"))
    assert not run_pool([pooled], workers=1, progress=False).failed
    worker = RunStore(pooled.runs_dir).path(pooled)
    expected = allocator.library("auto")
    for path in (child, worker):
        used = fedrepro.RunResult(path).meta["allocator"]
        assert used != "system" and allocator.LIBRARIES[used] in expected
        assert _rows(path) == _rows(here)


@pytest.mark.parametrize("setting", ["system", "tcmalloc", "jemalloc"])
def test_release_free_memory_runs_under_each_allocator(setting):
    lib = None if setting == "system" else allocator._find(setting)
    if setting != "system" and lib is None:
        pytest.skip(f"{setting} is not installed here")
    env = allocator.child_env(setting=setting)
    code = ("from fedrepro.env import allocator; b = bytearray(50 << 20); del b; allocator.release_free_memory(); "
            "print(allocator.in_use())")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == setting
