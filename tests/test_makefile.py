"""What the make targets set: the output root, and Jupyter's --allow-root when run as root."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(*args: str) -> list[str]:
    """The commands ``make -n`` would run (prerequisites such as setup included), as a make started
    from a shell would: a ``make test OUTPUT=...`` that runs this test hands its command-line
    variables to every make below it through MAKEFLAGS, which would stand in for the defaults."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL")}
    out = subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True, check=True,
                         env=env)
    return out.stdout.splitlines()


def test_reproduce_lab_and_smoke_write_into_the_repository_unless_told_otherwise():
    lines = _dry_run("reproduce", "lab", "smoke", "test-notebooks")
    for command in ("fedrepro reproduce --profile laptop", "fedrepro results", "jupyter lab",
                    "fedrepro reproduce --profile smoke", "--nbval-lax"):
        line = next(x for x in lines if command in x)
        assert f"FEDREPRO_OUTPUT={ROOT}" in line, line
    smoke = next(x for x in lines if "--profile smoke" in x)
    assert f"FEDREPRO_RUNS={ROOT}/output/smoke/runs" in smoke and "MPLBACKEND=Agg" in smoke
    nbval = next(x for x in lines if "--nbval-lax" in x)
    assert "FEDREPRO_FIGURE_CHECK=strict" in smoke and "FEDREPRO_FIGURE_CHECK=strict" in nbval
    # nbval executes the notebooks on runs the pool trained first, two at once, into the same store.
    notebooks = _dry_run("test-notebooks")
    pretrain = next(i for i, x in enumerate(notebooks) if "reproduce --profile smoke --no-render" in x)
    assert pretrain < notebooks.index(nbval) and f"FEDREPRO_RUNS={ROOT}/output/smoke/runs" in notebooks[pretrain]
    elsewhere = _dry_run("reproduce", "OUTPUT=/scratch/x")
    assert any("FEDREPRO_OUTPUT=/scratch/x" in x and "fedrepro reproduce" in x for x in elsewhere)


def test_lab_allows_root_only_as_root():
    lab = next(x for x in _dry_run("lab") if "jupyter lab" in x)
    assert ("--allow-root" in lab) == (os.geteuid() == 0)


def test_lab_passes_the_profile_to_the_notebooks():
    # The notebooks read FEDREPRO_PROFILE (fedrepro.config.resolve_profile); make lab PROFILE=smoke was ignored.
    default = next(x for x in _dry_run("lab") if "jupyter lab" in x)
    assert "FEDREPRO_PROFILE=laptop" in default and "FEDREPRO_RUNS=" not in default
    smoke = next(x for x in _dry_run("lab", "PROFILE=smoke") if "jupyter lab" in x)
    assert "FEDREPRO_PROFILE=smoke" in smoke and f"FEDREPRO_RUNS={ROOT}/output/smoke/runs" in smoke
    paper = next(x for x in _dry_run("lab", "PROFILE=paper") if "jupyter lab" in x)
    assert "FEDREPRO_PROFILE=paper" in paper


@pytest.mark.parametrize("profile", ["laptop", "smoke", "paper"])
def test_lab_writes_figures_outside_the_committed_folder_and_saves_no_outputs(profile):
    # Laptop notebooks run in Lab wrote over the committed figures/*.png, and Lab saved their
    # outputs into notebooks/ (issue 58): figures go under the output root, and Lab runs with the
    # config that saves no outputs (etc/jupyter_server_config.py, tests/test_lab.py).
    lab = next(x for x in _dry_run("lab", f"PROFILE={profile}") if "jupyter lab" in x)
    figures = Path(next(w for w in lab.split() if w.startswith("FEDREPRO_FIGURES=")).split("=", 1)[1])
    assert figures == ROOT / "output" / profile / "figures"
    assert not figures.is_relative_to(ROOT / "figures")
    config = Path(next(w for w in lab.split() if w.startswith("--config=")).split("=", 1)[1])
    assert config == ROOT / "etc" / "jupyter_server_config.py" and config.is_file()
    elsewhere = next(x for x in _dry_run("lab", "OUTPUT=/scratch/x") if "jupyter lab" in x)
    assert "FEDREPRO_FIGURES=/scratch/x/output/laptop/figures" in elsewhere
