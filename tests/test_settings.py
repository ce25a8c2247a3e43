"""The output root: which setting wins, the layout under it, and the error when it cannot be written."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fedrepro.config import rehearsing
from fedrepro.data.root import download_allowed
from fedrepro.env import settings
from fedrepro.errors import ConfigError
from fedrepro.env.settings import configure, output_path, output_root
from fedrepro.runs.prefix import sharing

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for var in ("FEDREPRO_OUTPUT", "FEDREPRO_RUNS", "FEDREPRO_FIGURES", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    configure(None)
    yield
    configure(None)


def test_precedence_argument_then_setting_then_environment_then_default(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert output_root() == tmp_path / "home" / ".local" / "share" / "fedrepro"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert output_root() == tmp_path / "xdg" / "fedrepro"
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path / "env"))
    assert output_root() == tmp_path / "env"
    configure(output_root=tmp_path / "set")
    assert output_root() == tmp_path / "set"
    assert output_root(tmp_path / "arg") == tmp_path / "arg"
    configure(None)
    assert output_root() == tmp_path / "env"
    with pytest.raises(ConfigError, match="output_root=5; valid: a folder path"):
        configure(output_root=5)


def test_the_layout_under_the_root(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    assert output_path("runs") == tmp_path / "runs"
    assert output_path("notebooks", "smoke") == tmp_path / "output" / "smoke" / "notebooks"
    assert output_path("claims", "paper") == tmp_path / "output" / "paper" / "claims"
    assert output_path("figures", "laptop") == tmp_path / "figures"
    assert output_path("figures", "paper") == tmp_path / "figures" / "paper"
    assert output_path("figures", "smoke") == tmp_path / "output" / "smoke" / "figures"
    assert output_path("results", "laptop") == tmp_path / "docs" / "results" / "laptop"
    with pytest.raises(ConfigError, match="unknown output kind 'plots'; valid: runs, notebooks"):
        output_path("plots")


def test_runs_and_figures_folders_can_still_be_moved_alone(tmp_path, monkeypatch):
    from fedrepro.app.figures import figures_dir
    from fedrepro.runs.store import RunStore, default_runs_dir

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path / "root"))
    assert default_runs_dir() == RunStore().root == tmp_path / "root" / "runs"
    assert figures_dir("smoke") == tmp_path / "root" / "output" / "smoke" / "figures"
    monkeypatch.setenv("FEDREPRO_RUNS", str(tmp_path / "my-runs"))
    monkeypatch.setenv("FEDREPRO_FIGURES", str(tmp_path / "my-figs"))
    assert default_runs_dir() == tmp_path / "my-runs"
    assert figures_dir("laptop") == tmp_path / "my-figs"
    assert output_path("notebooks", "laptop") == tmp_path / "root" / "output" / "laptop" / "notebooks"


def test_claims_and_figures_go_under_the_root(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    import pandas as pd

    from fedrepro.claims import save_claims
    from fedrepro.app.figures import savefig

    configure(output_root=tmp_path)
    fig = plt.figure()
    path = savefig(fig, "x", "laptop")
    plt.close(fig)
    assert path == tmp_path / "figures" / "x.png" and path.read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in path.parent.iterdir()] == ["x.png"]  # no temporary file left
    saved = save_claims(pd.DataFrame([{"claim_id": "c", "verdict": "PASS"}]), "00_tour", "smoke")
    assert saved == tmp_path / "output" / "smoke" / "claims" / "00_tour.json"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_root_is_an_error_naming_the_setting(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        monkeypatch.setenv("FEDREPRO_OUTPUT", str(ro))
        with pytest.raises(ConfigError, match=r"chosen by the output root .*\(\$FEDREPRO_OUTPUT\).*Permission denied; "
                                              r"set FEDREPRO_OUTPUT"):
            output_path("figures", "smoke", create=True)
        from fedrepro.runs.store import RunStore

        with pytest.raises(ConfigError, match=r"chosen by the output root, \$FEDREPRO_OUTPUT\).*FEDREPRO_OUTPUT\)"):
            RunStore().prepare_root()
    finally:
        ro.chmod(stat.S_IRWXU)


def test_a_root_that_is_a_file_is_an_error_naming_the_setting(tmp_path, monkeypatch):
    # Also checked as root, which a read-only folder does not stop.
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    configure(output_root=blocker)
    with pytest.raises(ConfigError, match=r"chosen by the output root '.*a_file' \(fedrepro.env.settings.configure"
                                          r"\(output_root=...\)\): .*is a file; set FEDREPRO_OUTPUT"):
        output_path("claims", "smoke", create=True)
    monkeypatch.setenv("FEDREPRO_RUNS", str(blocker / "runs"))
    from fedrepro.runs.store import RunStore

    with pytest.raises(ConfigError, match=r"invalid runs_dir=.*\(chosen by \$FEDREPRO_RUNS\): .*is a file"):
        RunStore().prepare_root()


def test_child_processes_get_the_root_set_in_this_one(tmp_path):
    configure(output_root=tmp_path / "mine")
    env = settings.child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    out = subprocess.run([sys.executable, "-c",
                          "from fedrepro.env.settings import output_path; print(output_path('runs'))"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / "mine" / "runs")


def test_the_results_pages_follow_the_root(tmp_path, monkeypatch):
    import pandas as pd

    from fedrepro.papers.verdicts import registered
    from fedrepro.claims import save_claims
    from fedrepro.app.results_page import write_pages

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    c = registered().get("tour.fedavg_beats_local_iid")
    save_claims(pd.DataFrame([{"claim_id": c.id, "paper": c.paper, "source": c.source, "statement": c.statement,
                               "verdict": "PASS", "interval": "", "evidence": ""}]), "00_tour", "smoke")
    pages = write_pages("smoke")
    assert pages["index"] == tmp_path / "docs" / "results" / "smoke" / "index.md"
    assert pages["tour"].read_text().startswith("# tour: results at the smoke profile")


@pytest.mark.parametrize("name, read", [
    ("FEDREPRO_REHEARSE", rehearsing), ("FEDREPRO_SHARE_PREFIX", sharing), ("FEDREPRO_DOWNLOAD", download_allowed),
])
def test_every_yes_no_variable_reads_the_same_words_and_refuses_others(monkeypatch, name, read):
    from fedrepro.env.settings import FLAG_FALSE, FLAG_TRUE

    for word in FLAG_TRUE | {"TRUE", " Yes "}:
        monkeypatch.setenv(name, word)
        assert read() is True, word
    for word in FLAG_FALSE | {"False", "OFF"}:
        monkeypatch.setenv(name, word)
        assert read() is False, word
    monkeypatch.delenv(name)
    assert read() is False
    monkeypatch.setenv(name, "flase")  # once read as yes: anything but "" and "0" was
    with pytest.raises(ConfigError, match=f"{name}='flase'.*valid: 1/0, true/false") as err:
        read()
    assert "\n" not in str(err.value)
