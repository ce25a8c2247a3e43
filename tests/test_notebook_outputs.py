"""An executed notebook, as a reader gets it: figures inline even under ``MPLBACKEND=Agg`` (as
``make smoke`` sets it), files under the output root, and the profile papermill passed, not the
one ``FEDREPRO_PROFILE`` names."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The quickest notebook with a figure: a toy FedAvg on synthetic data, no run store.
NOTEBOOK = ROOT / "notebooks" / "fedpft" / "01_toy_mismatch.ipynb"


def _outputs(nb: dict, cell_type: str = "code") -> list[dict]:
    return [o for c in nb["cells"] if c["cell_type"] == cell_type for o in c.get("outputs", [])]


def _text(output: dict) -> str:
    text = output.get("text") or output.get("data", {}).get("text/plain") or ""
    return "".join(text) if isinstance(text, list) else text


@pytest.mark.slow
def test_an_executed_smoke_notebook_carries_its_figure_and_the_explicit_profile(tmp_path, monkeypatch):
    import papermill

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("FEDREPRO_PROFILE", "laptop")  # papermill's PROFILE below must win over it
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path / "root"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = tmp_path / "executed.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(out), parameters={"PROFILE": "smoke"}, kernel_name="python3",
                               cwd=str(NOTEBOOK.parent), progress_bar=False)
    nb = json.loads(out.read_text())
    outputs = _outputs(nb)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1, f"expected the one figure inline, got {len(images)} images"
    text = "\n".join(_text(o) for o in outputs)
    assert "rounds=3" in text  # the smoke profile's toy (laptop trains 20 rounds)
    assert "PROFILE='smoke' was given explicitly and wins over FEDREPRO_PROFILE='laptop'" in text
    saved = tmp_path / "root" / "output" / "smoke" / "figures" / "fedpft_toy_mismatch.png"
    assert "figure saved: output/smoke/figures/fedpft_toy_mismatch.png (under the output root)" in text
    # Run by hand: where the output root is, said once (a `fedrepro reproduce` render says nothing of it).
    root_lines = [ln for ln in text.splitlines() if str(tmp_path) in ln]
    assert saved.is_file() and root_lines == [f"output root: {tmp_path / 'root'} ($FEDREPRO_OUTPUT)"]
