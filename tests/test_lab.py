"""JupyterLab for a class (issue 58): running a notebook under ``make lab`` modifies no tracked file
(etc/jupyter_server_config.py, the Makefile's LAB_ENV), and a notebook's first output says how many
runs it needs at its profile, how many are stored, the predicted time, and how to get the smoke
profile (fedrepro.app.notebook_header)."""
from __future__ import annotations

import asyncio
import copy
import os
import runpy
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from fedrepro.app import notebook_header

ROOT = Path(__file__).resolve().parent.parent
LAB_CONFIG = ROOT / "etc" / "jupyter_server_config.py"
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def lab_config() -> tuple[dict, Config]:
    """The config file's names, and the config it sets, loaded as Jupyter loads it."""
    config = Config()
    names = runpy.run_path(str(LAB_CONFIG), init_globals={"get_config": lambda: config})
    return names, config


def executed(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` as JupyterLab sends it to be saved after Run All: outputs and execution counts, cell
    ids where the file had none, the kernel's language_info, per-cell timings."""
    out = copy.deepcopy(nb)
    out.metadata["language_info"] = {"name": "python", "version": "3.11.2", "mimetype": "text/x-python"}
    for i, cell in enumerate(out.cells):
        cell.setdefault("id", f"lab-{i}")
        if cell.cell_type == "code":
            cell.execution_count = i + 1
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran cell {i}\n"),
                            nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=",
                                                                         "text/plain": "<Figure>"})]
            cell.metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00.0Z"}
            cell.metadata["scrolled"] = True
    return out


def test_save_hook_strips_outputs_and_keeps_what_the_reader_wrote():
    names, _ = lab_config()
    nb = nbformat.read(ROOT / "notebooks" / "00_tour.ipynb", as_version=4)
    model = {"type": "notebook", "format": "json", "content": executed(nb)}
    assert any(c.get("outputs") for c in model["content"].cells)  # the hook has something to strip
    names["strip_outputs"](model=model, path="00_tour.ipynb", contents_manager=None)
    cells = model["content"].cells
    assert all(c.outputs == [] and c.execution_count is None for c in cells if c.cell_type == "code")
    assert all("execution" not in c.metadata and "scrolled" not in c.metadata for c in cells)
    assert [c.source for c in cells] == [c.source for c in nb.cells]
    assert [c.metadata.get("tags") for c in cells] == [c.metadata.get("tags") for c in nb.cells]
    text = {"type": "file", "format": "text", "content": "x"}
    names["strip_outputs"](model=text, path="a.txt", contents_manager=None)
    assert text["content"] == "x"


def test_config_installs_the_manager_and_its_hook(tmp_path):
    names, config = lab_config()
    assert config.ServerApp.contents_manager_class is names["CleanCheckoutContentsManager"]
    manager = names["CleanCheckoutContentsManager"](root_dir=str(tmp_path), config=config)
    assert names["strip_outputs"] in manager._pre_save_hooks


def _save(manager, model: dict, path: str) -> dict:
    return asyncio.run(manager.save(model, path))


def test_run_all_then_save_leaves_every_notebook_byte_for_byte(tmp_path, monkeypatch):
    """Every committed notebook, opened, run and saved through Lab's contents manager, keeps its
    bytes (even those not in nbformat's own layout, or with cells that have no id); the executed
    copy, outputs and all, goes under the output root. A cell the reader edits is saved, without
    outputs."""
    names, config = lab_config()
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path / "root"))
    monkeypatch.setenv("FEDREPRO_PROFILE", "smoke")
    manager = names["CleanCheckoutContentsManager"](root_dir=str(tmp_path / "notebooks"), config=config)
    for nb in NOTEBOOKS:
        rel = nb.relative_to(ROOT / "notebooks").as_posix()
        before = nb.read_bytes()
        model = asyncio.run(manager.get(rel, content=True, type="notebook"))
        _save(manager, {"type": "notebook", "format": "json", "content": executed(model["content"])}, rel)
        assert (tmp_path / "notebooks" / rel).read_bytes() == before, f"{rel} was modified by Run All and save"
        copy_ = nbformat.read(tmp_path / "root" / "output" / "smoke" / "lab" / rel, as_version=4)
        assert any(c.get("outputs") for c in copy_.cells if c.cell_type == "code"), rel
    rel = "00_tour.ipynb"
    edited = executed(asyncio.run(manager.get(rel, content=True, type="notebook"))["content"])
    code = next(c for c in edited.cells if c.cell_type == "code")
    code.source = 'PROFILE = "smoke"'
    _save(manager, {"type": "notebook", "format": "json", "content": edited}, rel)
    saved = nbformat.read(tmp_path / "notebooks" / rel, as_version=4)
    assert next(c for c in saved.cells if c.cell_type == "code").source == 'PROFILE = "smoke"'
    assert all(c.outputs == [] and c.execution_count is None for c in saved.cells if c.cell_type == "code")


def lab_env(*make_args: str) -> dict[str, str]:
    """The variables ``make lab`` starts JupyterLab with (``make -n``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL")}
    lines = subprocess.run(["make", "-n", "-C", str(ROOT), "lab", *make_args], capture_output=True, text=True,
                           check=True, env=env).stdout.splitlines()
    line = next(x for x in lines if "jupyter lab" in x)
    words = shlex.split(line)
    return dict(w.split("=", 1) for w in words[:next(i for i, w in enumerate(words) if "=" not in w)])


def _git_status() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all", "--",
                           "figures", "notebooks", "docs"], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def run_all_under_lab(tmp_path_factory):
    """The tour run top to bottom in the environment ``make lab`` gives its kernels, with the first
    cell set to PROFILE = "smoke" (the header's advice; papermill's -p does that edit), in the kernel
    Jupyter would start for it (JPY_SESSION_NAME); the git status of the tracked folders before and
    after, and the executed notebook."""
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.skip("make and git are needed")
    tmp = tmp_path_factory.mktemp("lab")
    lab = lab_env(f"OUTPUT={tmp}")  # make lab's variables at its default profile, writing under tmp
    env = {**os.environ, **lab, "PYTHONPATH": str(ROOT),
           # the smoke runs make smoke and the site's test store: reused, not trained again in tmp
           "FEDREPRO_RUNS": str(ROOT / "output" / "smoke" / "runs"),
           "JPY_SESSION_NAME": str(ROOT / "notebooks" / "00_tour.ipynb")}
    env.pop("MPLBACKEND", None)
    before, started = _git_status(), time.time()
    done = subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "notebooks" / "00_tour.ipynb"),
                           str(tmp / "00_tour.ipynb"), "-p", "PROFILE", "smoke", "--cwd", str(ROOT / "notebooks"),
                           "--no-progress-bar"], env=env, capture_output=True, text=True)
    if done.returncode:
        pytest.fail("papermill failed:\n" + "\n".join((done.stdout + done.stderr).splitlines()[-30:]))
    return {"before": before, "after": _git_status(), "lab": lab, "started": started,
            "notebook": nbformat.read(tmp / "00_tour.ipynb", as_version=4)}


def test_run_all_under_lab_leaves_the_checkout_clean(run_all_under_lab):
    r = run_all_under_lab
    assert r["after"] == r["before"], f"running the tour under make lab changed tracked files:\n{r['after']}"
    figures = Path(r["lab"]["FEDREPRO_FIGURES"])
    written = [p for p in figures.glob("tour_*.png") if p.stat().st_mtime >= r["started"] - 1]
    assert written, f"the tour saved no figure into make lab's figures folder {figures}"


def test_first_output_says_runs_stored_time_and_smoke(run_all_under_lab):
    """The tour's first output, in the kernel Jupyter starts for it, is the header (needs
    fedrepro's package to register notebook_header.announce with fedrepro.config.ON_RESOLVE)."""
    first = next(o for c in run_all_under_lab["notebook"].cells if c.cell_type == "code" for o in c.outputs)
    text = first.get("text", "")
    assert text.startswith("00_tour.ipynb at the smoke profile needs "), text
    assert " stored, " in text and "Predicted time:" in text


@pytest.mark.parametrize("in_jupyter", [True, False])
def test_the_package_registers_the_header_in_a_notebook_kernel(in_jupyter):
    """In a kernel Jupyter started for a notebook (JPY_SESSION_NAME set), importing fedrepro has
    resolve_profile call the header; elsewhere (the CLI, scripts) it is not even imported."""
    env = {k: v for k, v in os.environ.items() if k != notebook_header.ENV_SESSION}
    if in_jupyter:
        env[notebook_header.ENV_SESSION] = str(ROOT / "notebooks" / "00_tour.ipynb")
    probe = ("import sys, fedrepro; print(any(h.__module__ == 'fedrepro.app.notebook_header' "
             "for h in fedrepro.config.ON_RESOLVE), 'fedrepro.app.notebook_header' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(in_jupyter)] * 2


def test_header_counts_the_plan_and_offers_smoke(tmp_path, monkeypatch):
    from fedrepro.papers.plan import plan

    monkeypatch.setenv("FEDREPRO_RUNS", str(tmp_path / "runs"))  # an empty store: nothing stored
    nb_root = ROOT / "notebooks"
    tour = nb_root / "00_tour.ipynb"
    n = len(plan([tour], nb_root, "laptop").runs)
    assert n > 0
    text = notebook_header.header(tour, nb_root, "laptop")
    lines = text.splitlines()
    assert lines[0] == f"00_tour.ipynb at the laptop profile needs {n} runs: 0 stored, {n} to train."
    assert lines[1].startswith("Predicted time: about ") and f"to train the {n} runs not stored" in lines[1]
    assert 'PROFILE = "smoke"' in lines[2] and "make lab PROFILE=smoke" in lines[2]
    # Where planning is slow, the command that predicts instead of a prediction.
    slow = notebook_header.header(tour, nb_root, "laptop", budget_s=0.0).splitlines()
    assert slow[1].startswith("Predicted time: `fedrepro reproduce --plan --predict --only 00_tour`")
    smoke = notebook_header.header(tour, nb_root, "smoke")
    assert "smoke profile needs" in smoke and 'PROFILE = "smoke"' not in smoke
    none = notebook_header.header(nb_root / "99_claims_summary.ipynb", nb_root, "laptop")
    assert none.startswith("99_claims_summary.ipynb at the laptop profile reads no federated runs.")


def test_header_only_in_a_kernel_jupyter_started_for_a_notebook(monkeypatch, capsys):
    tour = ROOT / "notebooks" / "00_tour.ipynb"
    monkeypatch.delenv("FEDREPRO_TRACE", raising=False)
    monkeypatch.delenv(notebook_header.ENV_SESSION, raising=False)
    assert notebook_header.session_notebook() is None
    monkeypatch.setenv(notebook_header.ENV_SESSION, str(tour))
    assert notebook_header.session_notebook() == (tour, ROOT / "notebooks")
    monkeypatch.setenv(notebook_header.ENV_SESSION, "00_tour.ipynb")  # relative to Lab's root, notebooks/
    assert notebook_header.session_notebook() == (tour, ROOT / "notebooks")
    monkeypatch.setenv(notebook_header.ENV_SESSION, str(ROOT / "README.md"))
    assert notebook_header.session_notebook() is None
    monkeypatch.setenv(notebook_header.ENV_SESSION, str(tour))
    monkeypatch.setenv("FEDREPRO_TRACE", "/tmp/x.jsonl")  # fedrepro reproduce renders it: no header
    assert notebook_header.session_notebook() is None
    notebook_header.announce("smoke")
    assert capsys.readouterr().out == ""
