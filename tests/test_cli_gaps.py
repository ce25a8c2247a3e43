"""The CLI's gaps closed: ``python -m fedrepro``, "did you mean" for a misspelled name, and a device
the machine lacks refused before the store is looked in."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from fedrepro.errors import ConfigError
from fedrepro.execute.run import run
from fedrepro.methods import METHODS
from fedrepro.registry import did_you_mean


def test_python_dash_m_fedrepro_is_the_cli():
    out = subprocess.run([sys.executable, "-m", "fedrepro", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "usage: fedrepro" in out.stdout


@pytest.mark.parametrize("wrong, right", [("fedprx", "fedprox"), ("pfedcspcc", "pfedcspc"), ("FedPer", "fedper")])
def test_a_misspelled_method_name_suggests_the_closest(tiny, wrong, right):
    with pytest.raises(ConfigError, match=f"method.name={wrong!r} \\(did you mean {right!r}\\?\\); valid: "):
        tiny(**{"method.name": wrong})
    assert did_you_mean(wrong, METHODS.names()) == f" (did you mean {right!r}?)"


def test_a_name_far_from_every_valid_one_gets_no_suggestion(tiny):
    assert did_you_mean("zzzzzz", METHODS.names()) == ""
    with pytest.raises(ConfigError) as err:
        tiny(**{"model.name": "zzzzzz"})
    assert "did you mean" not in str(err.value)


def test_the_registry_suggests_too():
    with pytest.raises(ConfigError, match="did you mean 'fedprox'"):
        METHODS.get("fedproxx")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_stored_run_is_not_reused_on_a_device_the_machine_lacks(tiny):
    cfg = tiny()
    run(cfg)
    with pytest.raises(ConfigError, match="device='cuda'"):
        run(cfg.replace(device="cuda"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_dry_run_refuses_a_device_the_machine_lacks_as_the_run_would(capsys):
    from fedrepro.app.cli import main

    assert main(["run", "--profile", "smoke", "--set", "device=cuda", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "device='cuda'" in err and "valid on this machine" in err and len(err.strip().splitlines()) == 1


def test_reproduce_takes_dry_run_as_run_does():
    out = subprocess.run([sys.executable, "-m", "fedrepro", "reproduce", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--plan, --dry-run" in out.stdout


def test_reproduce_no_render_reaches_the_pass(monkeypatch):
    from fedrepro.app import cli

    seen = {}
    monkeypatch.setattr(cli, "reproduce", lambda *a, **k: seen.update(k))
    assert cli.main(["reproduce", "--profile", "smoke", "--no-render"]) == 0
    assert seen["render"] is False
    assert cli.main(["reproduce", "--profile", "smoke"]) == 0
    assert seen["render"] is True
